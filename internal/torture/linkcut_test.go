package torture

import (
	"fmt"
	"testing"
)

func TestCutPlan(t *testing.T) {
	nodes := []string{"node1", "node2", "node3", "node4", "node5"}
	resp := []string{"node2", "node4", "node5"}
	// reach is who reaches whom once pairs are cut.
	reach := func(pairs [][2]string) map[string]map[string]bool {
		cut := map[[2]string]bool{}
		for _, p := range pairs {
			cut[p], cut[[2]string{p[1], p[0]}] = true, true
		}
		r := map[string]map[string]bool{}
		for _, a := range nodes {
			r[a] = map[string]bool{}
			for _, b := range nodes {
				r[a][b] = a == b || !cut[[2]string{a, b}]
			}
		}
		return r
	}
	// isolated: x reaches no other node, every other pair still links.
	isolated := func(pairs [][2]string, x string) bool {
		r := reach(pairs)
		for _, a := range nodes {
			for _, b := range nodes {
				if a != b && r[a][b] == (a == x || b == x) {
					return false
				}
			}
		}
		return true
	}
	for pick := 0; pick < 6; pick++ {
		t.Run(fmt.Sprint(pick), func(t *testing.T) {
			target, pairs, err := cutPlan(IsolateMaster, pick, nodes, "node2", resp)
			if err != nil || target != "node2" {
				t.Fatalf("isolate-master: %q, %v", target, err)
			}
			if !isolated(pairs, "node2") {
				t.Fatalf("isolate-master cuts %v", pairs)
			}

			target, pairs, err = cutPlan(IsolateReplica, pick, nodes, "node2", resp)
			if err != nil || (target != "node4" && target != "node5") || !isolated(pairs, target) {
				t.Fatalf("isolate-replica: %q %v, %v", target, pairs, err)
			}

			_, pairs, err = cutPlan(Bridge, pick, nodes, "node2", resp)
			if err != nil {
				t.Fatal(err)
			}
			r := reach(pairs)
			bridge := nodes[pick%len(nodes)]
			sides := map[string]int{}
			for _, n := range nodes {
				if !r[bridge][n] {
					t.Fatalf("bridge %s does not reach %s: %v", bridge, n, pairs)
				}
				if n != bridge {
					sides[n] = 0
					for _, m := range nodes {
						if m != bridge && r[n][m] {
							sides[n]++
						}
					}
				}
			}
			// 4 nodes but the bridge: two sides of 2, each reaching only itself.
			for n, k := range sides {
				if k != 2 {
					t.Fatalf("bridge %s: %s reaches %d of the others' nodes (with itself), want 2: %v", bridge, n, k, pairs)
				}
			}
		})
	}
	if _, _, err := cutPlan(IsolateReplica, 0, nodes, "node2", []string{"node2"}); err == nil {
		t.Fatal("isolate-replica of a partition without replicas")
	}
}

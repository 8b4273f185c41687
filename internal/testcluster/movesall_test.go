package testcluster_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// GET /v1/cluster?moves=all on one node lists the moves from every
// member (a node knows only the moves from itself), and names a member it
// could not ask.
func TestOneNodeListsEveryMembersMoves(t *testing.T) {
	c := testcluster.Start(t, 3)
	admin := c.Node("node1").Client(testnode.AdminToken(t))
	ask := func() api.ClusterAnswer {
		r := admin.Do("GET", "/v1/cluster?moves=all", nil)
		if r.Status != 200 {
			t.Fatalf("GET /v1/cluster?moves=all: %d %s", r.Status, r.Body)
		}
		var a api.ClusterAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := ask(); len(a.MovesUnknown) != 0 || len(a.Moves) != 0 {
		t.Fatalf("a settled cluster: moves %+v, unknown %+v; want none of either", a.Moves, a.MovesUnknown)
	}

	// A fourth node: node-to-node calls between it and node2 and node3
	// cut, so that their moves to it wait, listed, in their copy.
	c.Faults.CutCalls("node2", "node4")
	c.Faults.CutCalls("node3", "node4")
	c.AddNode()
	testnode.Eventually(t, 30*time.Second, "node1 lists moves from node2 and node3", func() (bool, string) {
		a := ask()
		from := map[string]bool{}
		for _, m := range a.Moves {
			from[m.From] = true
		}
		return from["node2"] && from["node3"] && len(a.MovesUnknown) == 0, fmt.Sprintf("moves %+v, unknown %+v", a.Moves, a.MovesUnknown)
	})
	c.Faults.HealAll()
	testnode.Eventually(t, 60*time.Second, "no move left anywhere", func() (bool, string) {
		a := ask()
		return len(a.Moves) == 0 && len(a.MovesUnknown) == 0, fmt.Sprintf("moves %+v, unknown %+v", a.Moves, a.MovesUnknown)
	})

	c.Node("node3").Stop()
	testnode.Eventually(t, 30*time.Second, "node1 names node3 as a member whose moves it does not know", func() (bool, string) {
		a := ask()
		for _, u := range a.MovesUnknown {
			if u.Node == "node3" && u.Reason != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("unknown %+v", a.MovesUnknown)
	})
}

package testcluster_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// Majority and linearizable reads on a real cluster, across a failover of
// an idle partition. The new master inherits states it cannot count as
// majority-held by acknowledgements alone (only a position of its own
// epoch establishes the majority-committed position), so before its first
// write every strong read waited out its bound and answered 503; it now
// writes a tenure marker first. A replica serves a majority read of a
// state once its master has shipped it the committed position.
func TestStrongReadsAcrossAFailoverOfAnIdlePartition(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.ReplicationFactor(3))
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	doc := "/v1/users/" + user + "/collections/c/documents/d"
	via := c.Node("node2").Client(token)
	for i := 1; i <= 3; i++ {
		if r := via.Do("PUT", doc, fmt.Sprintf(`{"n":%d}`, i), "X-Write-Concern", "majority"); r.Status != 200 && r.Status != 201 {
			t.Fatalf("majority write %d: %d %s", i, r.Status, r.Body)
		}
	}
	read := func(n *testcluster.Node, headers ...string) (int, any, string) {
		r, err := n.Client(token).TryDo("GET", doc, nil, headers...)
		if err != nil {
			return 0, nil, err.Error()
		}
		if r.Status != 200 {
			return r.Status, nil, string(r.Body)
		}
		return r.Status, r.JSON(t)["n"], ""
	}
	for _, n := range c.Nodes {
		for _, concern := range []string{"majority", "linearizable"} {
			if status, v, body := read(n, "X-Read-Concern", concern); status != 200 || v != 3.0 {
				t.Fatalf("%s read through %s before the failover: %d n=%v %s; want 200 n=3", concern, n.ID, status, v, body)
			}
		}
	}
	// Every replica learns that n=3 is majority-held and serves it itself.
	for _, n := range c.Nodes[1:] {
		testnode.Eventually(t, 30*time.Second, n.ID+" serving a majority read from its copy", func() (bool, string) {
			status, v, body := read(n, "X-Read-Concern", "majority", "X-Read-Preference", "local")
			return status == 200 && v == 3.0, fmt.Sprintf("%d n=%v %s", status, v, body)
		})
	}

	c.Node("node1").Stop()
	var master string
	testnode.Eventually(t, 20*time.Second, "a new master", func() (bool, string) {
		master = c.MasterOf(p)
		return master != "" && master != "node1", "master " + master
	})
	for _, n := range c.Nodes[1:] {
		testnode.Eventually(t, 30*time.Second, "linearizable reads through "+n.ID+" after the failover", func() (bool, string) {
			status, v, body := read(n, "X-Read-Concern", "linearizable")
			var lags []string
			for _, l := range c.Node(master).Lags() {
				if l.Partition == p {
					lags = append(lags, fmt.Sprintf("%+v", l))
				}
			}
			return status == 200 && v == 3.0, fmt.Sprintf("%d n=%v %s; master %s: applied %s, lags %v", status, v, body, master, c.Node(master).Applied(p), lags)
		})
		if status, v, body := read(n, "X-Read-Concern", "majority"); status != 200 || v != 3.0 {
			t.Fatalf("majority read through %s after the failover: %d n=%v %s", n.ID, status, v, body)
		}
	}
	// The marker is the only write of the new tenure, and no client sees it.
	for _, n := range c.Nodes[1:] {
		r := n.Client(token).Do("GET", "/v1/users/"+user+"/collections", nil)
		if r.Status != 200 {
			t.Fatalf("collections through %s: %d %s", n.ID, r.Status, r.Body)
		}
		var names []string
		for _, c := range r.JSON(t)["collections"].([]any) {
			names = append(names, c.(map[string]any)["name"].(string))
		}
		if !slices.Equal(names, []string{"c"}) {
			t.Errorf("%s lists collections %v of %s; want only c", n.ID, names, user)
		}
	}
	// The new master counts its marker (one per tenure, shared by every
	// read) and the strong reads it served.
	lines := metricLines(t, c.Node(master).Client(token), "shoal_tenure_markers_total", `shoal_strong_reads_total{concern="linearizable",outcome="served"}`)
	if !slices.Contains(lines, "shoal_tenure_markers_total 1") || len(lines) != 2 {
		t.Errorf("%s's metrics: %v; want one tenure marker and served linearizable reads", master, lines)
	}
	t.Logf("partition %d moved from node1 to %s; strong reads served on both sides of the failover; %v", p, master, lines)
}

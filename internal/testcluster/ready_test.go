package testcluster_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// Ready means writable: once every node of a new cluster answers /readyz
// with 200, a write to any partition through any node is taken on the
// first try. Before, /readyz answered 200 as soon as a node ran, and the
// first writes answered 503 ("no reachable master") for about 2 s while
// the masters were elected.
//
// The same after a full restart, when every node's table names each
// partition's master of before the restart at once (from the nodes' own
// tenure records) while no lease is held yet.
func TestOnceEveryNodeIsReadyEveryPartitionTakesWrites(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.NoWait())
	token := testnode.AdminToken(t)
	writeEverywhere(t, c, token, "u")
	c.StopAll()
	for _, id := range c.IDs() {
		c.Restart(id)
	}
	writeEverywhere(t, c, token, "v")
}

// writeEverywhere waits until every node of c answers /readyz with 200,
// then writes once, with no retry, to every partition (users prefix0,
// prefix1, ...), each through another node.
func writeEverywhere(t *testing.T, c *testcluster.Cluster, token, prefix string) {
	t.Helper()
	testnode.Eventually(t, 30*time.Second, "every node answers /readyz with 200", func() (bool, string) {
		for _, n := range c.Nodes {
			resp, err := http.Get(n.URL() + "/readyz")
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return false, fmt.Sprintf("%s answers %d", n.ID, resp.StatusCode)
			}
		}
		return true, ""
	})
	covered := map[int]bool{}
	for i := 0; len(covered) < testcluster.Partitions; i++ {
		u := fmt.Sprintf("%s%d", prefix, i)
		p := shard.PartitionOf(u, testcluster.Partitions)
		if covered[p] {
			continue
		}
		covered[p] = true
		n := c.Nodes[p%len(c.Nodes)]
		if r := n.Client(token).Do("PUT", "/v1/users/"+u+"/collections/c/documents/d", `{}`); r.Status != 201 {
			t.Errorf("the first write to partition %d, through %s: %d %s", p, n.ID, r.Status, r.Body)
		}
	}
}

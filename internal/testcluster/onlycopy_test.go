package testcluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// A master that holds a partition's only regular copy is waited for while
// it is merely down, not lost (DOWN past REPLICA_REPLACE_AFTER, or out of
// the cluster): it may hold majority writes no other node has. With
// REPLICATION_FACTOR 1 every majority write is one the master alone
// acknowledged. Before, a node without a copy skipped such a master when
// deciding whether every copy was lost, took the partition over with
// nothing as soon as gossip saw the master DOWN, and the master rolled
// every write back when it returned (5 of 5 lost). The same rule took over
// from a restarted master that had named itself from its tenure record
// (responsible list: itself alone) before it had chosen its replicas
// again.
func TestAnOnlyCopyMerelyDownIsWaitedFor(t *testing.T) {
	t.Parallel() // a long test that checks what is kept, not how fast (see README, tests)
	c := testcluster.Start(t, 3, testcluster.ReplicationFactor(1), testcluster.ReplicaReplaceAfter(time.Minute))
	token := testnode.AdminToken(t)
	user, p := userPlacedOn(t, c, "node1")
	base := "/v1/users/" + user + "/collections/c/documents/"
	acked := writeMajority(t, c.Node("node1").Client(token), base, 5)
	c.Node("node1").Stop()
	// A voter with no live grant grants the lease to whoever asks: node1's
	// lapsed on it, or node1 was granted it by the other voter alone (a
	// voter whose store is slow refuses new grants and keeps no record).
	testnode.Eventually(t, 30*time.Second, "node2 and node3 see node1 DOWN and, as voters, hold no live grant", func() (bool, string) {
		for _, id := range []string{"node2", "node3"} {
			n := c.Node(id)
			if st := n.Placement(p).States["node1"]; st != "DOWN" {
				return false, fmt.Sprintf("%s sees node1 %s", id, st)
			}
			if h := n.Leases().VotedHolder(p); h != "" {
				return false, fmt.Sprintf("a grant to %s is live on %s", h, id)
			}
		}
		return true, ""
	})
	// From here a node that means to take the partition over wins it in a
	// lease round (two voters of three are up): watch three lease periods.
	// A bounded watch, as nothing marks a decision not taken.
	for deadline := time.Now().Add(3 * testcluster.LeaseTTL); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := c.MasterOf(p); m != "" {
			t.Fatalf("%s took partition %d over while node1, which holds its only copy, was merely down", m, p)
		}
	}
	node1 := c.Restart("node1")
	testnode.Eventually(t, 30*time.Second, "node1 masters the partition again", func() (bool, string) {
		_, ok := node1.Leases().Holds(p)
		return ok, fmt.Sprint("master ", c.MasterOf(p))
	})
	// Holding the lease comes a lease round before serving: the voters
	// must keep node1's list of copies first.
	if m := awaitMasterTakingWrites(t, c, token, p, base+"after-restart", 30*time.Second); m != "node1" {
		t.Fatalf("%s masters partition %d after node1's restart, not node1", m, p)
	}
	for _, id := range acked {
		if r := c.Node("node2").Client(token).Do("GET", base+id, nil); r.Status != 200 {
			t.Errorf("majority write %s reads %d %s", id, r.Status, r.Body)
		}
	}
}

package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// Invariant 3 with a drain (the fault suite's seed 6009): node4, master of
// a partition, is cut off from the other nodes' calls (gossip still flows,
// so they see it UP) and acknowledges w=1 writes until its lease runs out;
// they never reach its replica, which takes over. Then node4 is taken out
// of the peer list, and its links heal only once the new master has a
// caught-up replica in node4's stead. When node4's own cluster answer says
// it holds nothing (the check shoal dev and the fault suite stop a
// drained node on), every write it acknowledged is on the master or in
// node4's rollback collection. Before, the new master dropped node4 from
// the responsible list as soon as the replica chosen instead had caught
// up, node4 never got a batch of the new tenure (so never rolled its
// writes back), and it reported that it held nothing with the writes still
// only in its own copy of the partition.
func TestACutOffMasterDrainedKeepsItsW1Writes(t *testing.T) {
	t.Parallel() // a long test that checks what is kept, not how fast (see README, tests)
	c := testcluster.Start(t, 4, testcluster.Voters(3))
	token := testnode.AdminToken(t)
	user, p := userOfNode4KeptByItsReplica(t, c)
	base := "/v1/users/" + user + "/collections/c/documents/"
	old := c.Node("node4").Client(token)
	acked, master := cutOffNode4Writes(t, c, old, base, p, []string{"node1", "node2", "node3"})
	c.RemoveFromPeers("node4")
	// The replica chosen instead of node4 takes its slot once caught up
	// (before the fix, node4 left the list in that same round).
	testnode.Eventually(t, 20*time.Second, "a caught-up replica in node4's slot", func() (bool, string) {
		r := c.Node(master).Placement(p).Responsible
		return len(r) > 1 && r[0] == master && r[1] != "node4", fmt.Sprint(r)
	})
	c.Faults.HealAll()

	testnode.Eventually(t, 20*time.Second, "node4 holds nothing by its own answer", func() (bool, string) {
		st, err := old.API().Cluster(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return st.Partitions.HoldsNothing("node4", len(st.Moves))
	})
	inRollback, err := rollbackKeys(old)
	if err != nil {
		t.Fatalf("node4's rollback list: %v", err)
	}
	onMaster, rolledBack := 0, 0
	var lost []string
	for id, v := range acked {
		r := c.Node(master).Client(token).Do("GET", base+id, nil)
		switch {
		case r.Status == 200 && r.JSON(t)["_version"].(float64) >= v:
			onMaster++
		case inRollback[user+"/"+id]:
			rolledBack++
		default:
			lost = append(lost, fmt.Sprintf("%s (%d)", id, r.Status))
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		t.Errorf("%d w=1 writes acknowledged by node4 are neither on the master %s nor in node4's rollback collection: %v",
			len(lost), master, lost)
	}
	t.Logf("%d w=1 writes acknowledged by node4 while cut off: %d on the master %s, %d in node4's rollback collection",
		len(acked), onMaster, master, rolledBack)
}

// Invariant 3 for a former master that comes back after it was replaced:
// node4, master of a partition, is cut off from the other nodes' calls and
// acknowledges w=1 writes until its lease runs out; then it is stopped,
// and stays down past REPLICA_REPLACE_AFTER, so the new master replaces it
// in the responsible list. It comes back (cut off, so that it does not get
// the partition back as its preferred master first) and is taken out of
// the peer list: it is in no responsible list of the partition, so no
// master would send it a batch of the new tenure, the only thing that
// moves those writes to its rollback collection. Once its links heal,
// every write it acknowledged is on the master or in node4's rollback
// collection, and node4 drains (its own answer says it holds nothing).
// Before, the writes stayed in node4's copy of the partition for ever,
// and node4 never drained.
func TestAReplacedFormerMasterKeepsItsW1Writes(t *testing.T) {
	t.Parallel() // a long test that checks what is kept, not how fast (see README, tests)
	c := testcluster.Start(t, 4, testcluster.Voters(3))
	token := testnode.AdminToken(t)
	user, p := userOfNode4KeptByItsReplica(t, c)
	base := "/v1/users/" + user + "/collections/c/documents/"
	others := []string{"node1", "node2", "node3"}
	old := c.Node("node4").Client(token)
	acked, master := cutOffNode4Writes(t, c, old, base, p, others)
	c.Node("node4").Stop()
	replaced := testnode.Eventually(t, 20*time.Second, "node4 replaced in the responsible list", func() (bool, string) {
		r := c.Node(master).Placement(p).Responsible
		return len(r) == 2 && r[0] == master && r[1] != "node4", fmt.Sprint(r)
	})
	c.Faults.Isolate("node4", others)
	restart := time.Now()
	node4 := c.Restart("node4")
	c.RemoveFromPeers("node4")
	c.Faults.HealAll()

	cl := node4.Client(token)
	onMaster, rolledBack := 0, 0
	restarted := time.Since(restart)
	checked := testnode.Eventually(t, 30*time.Second, "every w=1 write node4 acknowledged on the master or in node4's rollback collection", func() (bool, string) {
		inRollback, err := rollbackKeys(cl)
		if err != nil {
			return false, fmt.Sprint("node4's rollback list: ", err)
		}
		var lost []string
		onMaster, rolledBack = 0, 0
		for id, v := range acked {
			r, err := c.Node(master).Client(token).TryDo("GET", base+id, nil)
			if err != nil {
				return false, err.Error()
			}
			switch {
			case r.Status == 200 && r.JSON(t)["_version"].(float64) >= v:
				onMaster++
			case inRollback[user+"/"+id]:
				rolledBack++
			default:
				lost = append(lost, fmt.Sprintf("%s (%d)", id, r.Status))
			}
		}
		slices.Sort(lost)
		return len(lost) == 0, fmt.Sprintf("%d of %d neither on the master %s nor in node4's rollback collection: %v; responsible %v",
			len(lost), len(acked), master, lost, c.Node(master).Placement(p).Responsible)
	})
	drained := testnode.Eventually(t, 20*time.Second, "node4 holds nothing by its own answer", func() (bool, string) {
		st, err := cl.API().Cluster(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return st.Partitions.HoldsNothing("node4", len(st.Moves))
	})
	t.Logf("%d w=1 writes acknowledged by node4 while cut off: %d on the master %s, %d in node4's rollback collection; "+
		"node4 replaced %s after its stop, restarted in %s, checked %s later, drained %s after that",
		len(acked), onMaster, master, rolledBack, replaced.Round(time.Millisecond), restarted.Round(time.Millisecond),
		checked.Round(time.Millisecond), drained.Round(time.Millisecond))
}

// userOfNode4KeptByItsReplica finds a user whose partition node4 masters
// with one replica, the partition's preferred master once node4 is out of
// the ring: that replica takes over and keeps it (no handoff follows).
func userOfNode4KeptByItsReplica(t *testing.T, c *testcluster.Cluster) (string, int) {
	t.Helper()
	ring := ringOf(t, 3)
	for i := 0; i < 10000; i++ {
		u := fmt.Sprintf("user%d", i)
		q := shard.PartitionOf(u, testcluster.Partitions)
		if r := c.Node("node4").Placement(q).Responsible; c.MasterOf(q) == "node4" && len(r) == 2 && r[1] == ring.Owner(q) {
			return u, q
		}
	}
	t.Fatal("no partition of node4 has its replica for its next preferred master; the test proves nothing")
	return "", 0
}

// cutOffNode4Writes cuts node4's calls to others (gossip still flows), has
// it acknowledge w=1 writes (cut0, cut1, ... under base) until its lease
// of partition p runs out, and waits for another master: the writes, by
// id with their versions, and that master.
func cutOffNode4Writes(t *testing.T, c *testcluster.Cluster, old *testnode.Client, base string, p int, others []string) (map[string]float64, string) {
	t.Helper()
	// The collection's first write creates it in the store, which a
	// starved machine may take longer than a lease to do: not cut off.
	testnode.Eventually(t, 30*time.Second, "a first write on node4", func() (bool, string) {
		r, err := old.TryDo("PUT", base+"first", `{"v":1}`, "X-Write-Concern", "majority")
		if err != nil {
			return false, err.Error()
		}
		return r.Status == 201 || r.Status == 200, fmt.Sprint(r.Status, " ", string(r.Body))
	})
	for _, id := range others {
		c.Faults.CutCalls("node4", id)
	}
	acked := map[string]float64{}
	for i := 0; i < 50; i++ {
		r, err := old.TryDo("PUT", fmt.Sprintf("%scut%d", base, i), `{"v":1}`, "X-Write-Concern", "1")
		if err != nil || r.Status != 201 {
			if err == nil {
				err = fmt.Errorf("%d %s", r.Status, r.Body)
			}
			t.Logf("node4's write %d after the cut: %v", i, err)
			break // the lease ran out (usually 50 writes are done first)
		}
		acked[fmt.Sprintf("cut%d", i)] = r.JSON(t)["_version"].(float64)
	}
	if len(acked) == 0 {
		t.Fatal("node4 acknowledged no write before its lease ran out; the test proves nothing")
	}
	var master string
	testnode.Eventually(t, 20*time.Second, "a new master", func() (bool, string) {
		master = c.MasterOf(p)
		return master != "" && master != "node4", fmt.Sprintf("master %q", master)
	})
	return acked, master
}

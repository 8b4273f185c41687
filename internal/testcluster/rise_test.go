package testcluster_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// When an edit of the peer list raises the count of copies (RF 3, one
// node that holds copies to two), a copy that joins the regular ones
// counts towards a check of the list only once it holds the partition's
// whole history: until then the list the voters keep says the lower count
// (record.CopyList.Counted), and a copy promoted alone by the higher
// count's quorum (2 copies: 1) is not confirmed without the master.
//
// node1 and node2 hold copies, node3 none. node2 stops holding data (the
// count falls to 1), node1 acknowledges 10 majority writes alone, its
// replication to node2 is cut, and node2 holds data again (the count
// rises to 2): node1 lists it as a regular copy. node1 stops. Before (a
// helper's review, reproduced), node2, stale, was promoted alone,
// confirmed, and took writes without the 10: node1's copy of them was
// rolled back when it returned. Now node2 takes no write while node1 is
// down, and node1, back, takes the partition again with all of them; and
// so again when node1 stops once more in that new tenure.
func TestACopyJoiningAsTheCountRisesCountsOnceItHoldsTheHistory(t *testing.T) {
	t.Parallel() // a long test that checks what is kept, not how fast (see README, tests)
	c := testcluster.Start(t, 3, testcluster.ReplicationFactor(3))
	token := testnode.AdminToken(t)
	c.SetHoldsData("node3", false)
	testnode.Eventually(t, 90*time.Second, "node1 and node2 hold every partition", func() (bool, string) {
		for p := range testcluster.Partitions {
			for _, n := range c.Nodes {
				pl := n.Placement(p)
				if pl.Master == "" || pl.Master != pl.PreferredMaster || len(pl.Responsible) != 2 || slices.Contains(pl.Responsible, "node3") {
					return false, fmt.Sprint(n.ID, " sees partition ", p, " on ", pl.Responsible, ", master ", pl.Master, ", preferred ", pl.PreferredMaster)
				}
			}
		}
		return true, ""
	})
	user, p := "", -1
	for i := 0; i < 10000 && p < 0; i++ {
		u := fmt.Sprintf("user%d", i)
		q := shard.PartitionOf(u, testcluster.Partitions)
		if pl := c.Node("node1").Placement(q); pl.Master == "node1" && slices.Equal(pl.Responsible, []string{"node1", "node2"}) {
			user, p = u, q
		}
	}
	if p < 0 {
		t.Fatal("node1 masters no partition; the test proves nothing")
	}
	base := "/v1/users/" + user + "/collections/c/documents/"
	cl := c.Node("node1").Client(token)
	for i := range 5 {
		if r := cl.Do("PUT", fmt.Sprintf("%sold%d", base, i), `{"n":0}`, "X-Write-Concern", "all"); r.Status != 201 {
			t.Fatalf("a write on both copies: %d %s", r.Status, r.Body)
		}
	}
	listed := func(want ...string) {
		t.Helper()
		testnode.Eventually(t, 90*time.Second, fmt.Sprint("node1 lists ", want, " and the voters keep it"), func() (bool, string) {
			pl, kept := c.Node("node1").Placement(p), c.Node("node1").Leases().ListOnVoters(p)
			return slices.Equal(pl.Responsible, want) && kept != nil && slices.Equal(kept.Copies, want), fmt.Sprint(pl.Responsible, ", kept ", kept)
		})
	}
	c.SetHoldsData("node2", false) // the count of copies falls to 1
	listed("node1")
	acked := writeMajority(t, cl, base, 10) // on node1 alone
	c.Faults.CutReplication("node1", "node2")
	c.SetHoldsData("node2", true) // and rises to 2
	listed("node1", "node2")
	testnode.Eventually(t, 30*time.Second, "node2 knows the list", func() (bool, string) {
		pl := c.Node("node2").Placement(p)
		return slices.Equal(pl.Responsible, []string{"node1", "node2"}), fmt.Sprint(pl.Responsible)
	})
	epoch, _ := c.Node("node1").Leases().Holds(p)
	// node1 stops twice: node2 must take no write either time, also once
	// node1 took the partition back in a new tenure (whose list must say
	// the lower count too: a review found the new tenure's list said the
	// count now, and node2 was then promoted alone).
	for round := 1; round <= 2; round++ {
		c.Node("node1").Stop()
		// node2 wins the lease (the promotion rule needs its answer
		// alone)...
		testnode.Eventually(t, 30*time.Second, "node2 holds the lease", func() (bool, string) {
			_, ok := c.Node("node2").Leases().Holds(p)
			return ok, "not yet"
		})
		// ... and takes no write while node1 is down: there is no event
		// to wait for, so it is tried for a few leases' time.
		until := time.Now().Add(3 * testcluster.LeaseTTL)
		for time.Now().Before(until) {
			r, err := c.Node("node2").Client(token).TryDo("PUT", base+"after", `{"n":3}`)
			if err == nil && (r.Status == 200 || r.Status == 201) {
				var lost []string
				for _, id := range acked {
					if c.Node("node2").Client(token).Do("GET", base+id, nil).Status != 200 {
						lost = append(lost, id)
					}
				}
				t.Fatalf("stop %d: node2 took a write with node1 down, without %d of the %d majority writes node1 acknowledged: %v", round, len(lost), len(acked), lost)
			}
			time.Sleep(testcluster.LeaseTTL / 4)
		}
		c.Restart("node1")
		// node1, back, takes the partition again in a new tenure (w=1:
		// node2's replication is still cut).
		testnode.Eventually(t, 90*time.Second, "node1 masters a new tenure whose list the voters keep", func() (bool, string) {
			e, ok := c.Node("node1").Leases().Holds(p)
			kept := c.Node("node1").Leases().ListOnVoters(p)
			return ok && e > epoch && kept != nil && kept.Epoch == e, fmt.Sprint(e, ok, kept)
		})
		epoch, _ = c.Node("node1").Leases().Holds(p)
	}
	c.Faults.HealAll()
	master := awaitMasterTakingWrites(t, c, token, p, base+"back", 60*time.Second)
	for _, id := range acked {
		if r := c.Node(master).Client(token).Do("GET", base+id, nil); r.Status != 200 {
			t.Fatalf("%s, master again, lacks the majority write %s: %d", master, id, r.Status)
		}
	}
}

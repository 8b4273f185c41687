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

// A new master does not wait for a copy gone for good. Seed 2211 of the
// fault suite at REPLICATION_FACTOR 4 (three nodes and the spare): the
// spare joined every partition's copies (the count of copies rose to 4),
// was taken out of the peer list, drained and was stopped. The master of a
// partition was then paused with a change of its own that no copy held,
// and another node won the partition. Its check of the tenure read the
// voters' last two lists, the older of which still named the spare, and
// needed three answers of that list's four copies: the paused master's
// (its lease over, ahead) could not count, and the check waited for the
// spare, which never came back. The partition took no write for the rest
// of the run, and the paused master waited for the new one to check its
// copy.
//
// Here: four nodes, three of them voters, RF 4. One voter's lease calls
// from M, master of the test's partition, are cut, so that it keeps the
// list naming node4; node4 is taken out and stopped once it holds nothing. M's
// replication is cut and it takes a w=1 write no copy gets, then M is cut
// off until another node wins the partition, then every cut heals. Before, the new master waited for node4 for good (writes
// answered 503 until the test gave up); now node4, gone for good, is not
// waited for: the new master steps down, M, which holds everything it
// acknowledged, takes the partition back (its w=1 change with it), and
// writes flow, with every acknowledged one there.
func TestANewMasterDoesNotWaitForACopyGoneForGood(t *testing.T) {
	c := testcluster.Start(t, 4, testcluster.Voters(3), testcluster.ReplicationFactor(4), testcluster.ReplicaReplaceAfter(time.Minute))
	token := testnode.AdminToken(t)
	settled := func(holders int, without string) func() (bool, string) {
		return func() (bool, string) {
			for _, id := range c.IDs() {
				if c.Node(id).Stopped() || id == without {
					continue
				}
				if mv := c.Node(id).Moves(); len(mv) > 0 {
					return false, fmt.Sprint(id, " moves ", len(mv))
				}
			}
			for p := range testcluster.Partitions {
				pl := c.Node("node1").Placement(p)
				if pl.Master == "" || pl.Master == without || len(pl.Responsible) != holders || slices.Contains(pl.Responsible, without) {
					return false, fmt.Sprint("partition ", p, " on ", pl.Responsible, " master ", pl.Master)
				}
				if without == "" {
					continue
				}
				kept := c.Node(pl.Master).Leases().ListOnVoters(p)
				if kept == nil || slices.Contains(kept.Copies, without) {
					return false, fmt.Sprint("the voters keep ", kept, " for partition ", p)
				}
			}
			return true, ""
		}
	}
	testnode.Eventually(t, 90*time.Second, "every partition on the four nodes", settled(4, ""))
	// A user on each partition, written with majority so that each has a
	// history.
	users := map[int]string{}
	for i := 0; len(users) < testcluster.Partitions && i < 100000; i++ {
		u := fmt.Sprintf("user%d", i)
		if p := shard.PartitionOf(u, testcluster.Partitions); users[p] == "" {
			users[p] = u
		}
	}
	acked := map[string][]string{} // user -> majority writes acknowledged
	for _, u := range users {
		acked[u] = writeMajority(t, c.Node("node1").Client(token), "/v1/users/"+u+"/collections/c/documents/", 2)
	}
	// The partition: mastered by its preferred master M (not node4, so
	// node4 leaving moves nothing of it), with copies X and Y besides.
	p, m := -1, ""
	var others []string
	for q := range testcluster.Partitions {
		pl := c.Node("node1").Placement(q)
		if pl.Master == pl.PreferredMaster && pl.Master != "node4" && p < 0 {
			p, m = q, pl.Master
			for _, id := range pl.Responsible {
				if id != m && id != "node4" {
					others = append(others, id)
				}
			}
		}
	}
	if p < 0 || len(others) != 2 {
		t.Fatalf("no partition its preferred master masters with two copies besides node4 (%d, %v); the test proves nothing", p, others)
	}
	tenure := c.Node("node1").Placement(p).Epoch
	y := others[1]
	t.Logf("partition %d: master %s at epoch %d, copies %v", p, m, tenure, others)
	// Y, a voter, keeps the list that names node4: M's lease calls to it
	// are cut before node4 leaves (replication flows), so M's renewals
	// with the shorter list are kept by M and X alone.
	c.Faults.CutLease(m, y)

	c.RemoveFromPeers("node4")
	testnode.Eventually(t, 90*time.Second, "node4 drained, and the voters keep lists without it", settled(3, "node4"))
	c.Node("node4").Stop()
	if e := c.Node("node1").Placement(p).Epoch; e != tenure {
		t.Fatalf("partition %d changed tenure during the drain (epoch %d to %d); the test proves nothing", p, tenure, e)
	}
	named := false
	for _, l := range c.Node(y).Leases().NewestLists(p, tenure+1) {
		named = named || l.Epoch == tenure && slices.Contains(l.Copies, "node4")
	}
	if !named {
		t.Fatalf("%s keeps no list of epoch %d naming node4 (%v); the test proves nothing", y, tenure, c.Node(y).Leases().NewestLists(p, tenure+1))
	}
	base := "/v1/users/" + users[p] + "/collections/c/documents/"

	// M's change of its own, which no copy gets.
	for _, id := range others {
		c.Faults.CutReplication(m, id)
	}
	if r := c.Node(m).Client(token).Do("PUT", base+"ahead", `{"n":2}`, "X-Write-Concern", "1"); r.Status != 201 {
		t.Fatalf("w=1 write on %s: %d %s", m, r.Status, r.Body)
	}
	// M cut off until another node holds the partition's lease.
	for _, id := range others {
		c.Faults.Cut(m, id)
	}
	var n string
	testnode.Eventually(t, 60*time.Second, "another node wins the partition", func() (bool, string) {
		for _, id := range others {
			if e, ok := c.Node(id).Leases().Holds(p); ok && e > tenure {
				n = id
				return true, ""
			}
		}
		return false, "no other node holds the lease yet"
	})
	t.Logf("%s won partition %d while %s was cut off", n, p, m)
	c.Faults.HealAll()

	testnode.Eventually(t, 60*time.Second, "the partition takes majority writes again", func() (bool, string) {
		for _, id := range append([]string{m}, others...) {
			r, err := c.Node(id).Client(token).TryDo("PUT", base+"after", `{"n":3}`, "X-Write-Concern", "majority")
			if err == nil && (r.Status == 200 || r.Status == 201) {
				return true, ""
			}
			if err != nil {
				return false, fmt.Sprint(id, ": ", err)
			}
			if r.Status != 503 && r.Status != 421 {
				return false, fmt.Sprint(id, ": ", r.Status, " ", string(r.Body))
			}
		}
		return false, "every node answers 503 or 421"
	})
	// Nothing acknowledged is lost on the way, and M, ahead, took the
	// partition back: its change is there.
	cl := c.Node(n).Client(token)
	for _, id := range append(acked[users[p]], "after", "ahead") {
		if r := readAnswered(t, cl, base+id, "X-Read-Concern", "linearizable"); r.Status != 200 {
			t.Errorf("%s after the heal: %d %s", id, r.Status, r.Body)
		}
	}
}

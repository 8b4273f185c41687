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
// Here: four nodes, three of them voters, RF 4. node4 is taken out and
// stopped once it holds nothing; a partition whose master M kept its
// tenure, and whose other copies have seen the list that named node4, is
// the one. M's replication is cut and it takes a w=1 write no copy gets,
// then M is cut off until another node wins the partition, then the cut
// heals. Before, the new master waited for node4 for good (writes
// answered 503 until the test gave up); now node4, gone for good, is not
// waited for: the new master steps down, M, which holds everything it
// acknowledged, takes the partition back, and writes flow.
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
	for _, u := range users {
		writeMajority(t, c.Node("node1").Client(token), "/v1/users/"+u+"/collections/c/documents/", 2)
	}
	tenures := map[int]uint64{}
	for p := range testcluster.Partitions {
		tenures[p] = c.Node("node1").Placement(p).Epoch
	}

	c.RemoveFromPeers("node4")
	testnode.Eventually(t, 90*time.Second, "node4 drained, and the voters keep lists without it", settled(3, "node4"))
	c.Node("node4").Stop()

	// The partition: its master kept its tenure through the drain, and a
	// copy other than the master has seen the voters keep a list naming
	// node4 in that tenure (the list it will check when it wins).
	p, m := -1, ""
	var others []string
	for q := range testcluster.Partitions {
		pl := c.Node("node1").Placement(q)
		if pl.Epoch != tenures[q] {
			continue
		}
		var copies []string
		for _, id := range pl.Responsible {
			if id != pl.Master {
				copies = append(copies, id)
			}
		}
		for _, id := range copies {
			for _, l := range c.Node(id).Leases().NewestLists(q, pl.Epoch+1) {
				if l.Epoch == pl.Epoch && slices.Contains(l.Copies, "node4") && p < 0 {
					p, m, others = q, pl.Master, copies
				}
			}
		}
	}
	if p < 0 {
		t.Fatal("no partition whose copies saw a list naming node4 in its master's tenure; the test proves nothing")
	}
	t.Logf("partition %d: master %s, copies %v", p, m, others)
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
			if e, ok := c.Node(id).Leases().Holds(p); ok && e > tenures[p] {
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
}

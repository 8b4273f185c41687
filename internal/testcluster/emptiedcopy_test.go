package testcluster_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/replicate"
)

// A replica whose data directory was emptied, restarted, and copied only
// part of its partition when its master stops, does not take the
// partition over with what it holds: it may lack writes it acknowledged
// before (here 20 `majority` writes, on the master and on it alone, with
// REPLICATION_FACTOR 2). Its new store marks every copy as awaiting a
// full copy (store.Writer.MarkNew), and such a copy counts for no list,
// its own tenure's check included. Before, once it had seen the
// partition's epoch it counted as a copy at the position its copy had
// reached, and with REPLICATION_FACTOR 2 its own answer confirmed it: it
// took writes, and the master's history was rolled back when it
// returned (found by a review of the fifteenth session's fixes).
func TestAnEmptiedReplicaCopiedPartWayDoesNotTakeOver(t *testing.T) {
	// Copy chunks of at most 5 documents: 400 documents take 80 of them,
	// long enough to be seen under way (see
	// TestAReplacementStillCopyingIsNotPromoted).
	c := testcluster.Start(t, 3, testcluster.ReplicationBatch(5), testcluster.ReplicaReplaceAfter(time.Minute))
	token := testnode.AdminToken(t)
	user, p := userPlacedOn(t, c, "node1", "node2")
	fill(t, c.Node("node1").Client(token), user, 400)
	base := "/v1/users/" + user + "/collections/c/documents/"
	acked := writeMajority(t, c.Node("node1").Client(token), base, 20)

	c.Node("node2").Stop()
	if err := os.RemoveAll(c.Node("node2").Config.DataDir); err != nil {
		t.Fatal(err)
	}
	// node1's copy to node2 stops after 20 replication calls (of chunks
	// of 5 documents, a few partitions sharing them): part way through
	// the 420 documents.
	c.Faults.CutReplicationAfter("node1", "node2", 20)
	c.Restart("node2")
	// A write has node1 send node2 a batch (node1 may not have noticed
	// the restart): node2 answers what it holds, and its copy begins.
	if r := c.Node("node1").Client(token).Do("PUT", base+"after-the-emptying", `{"n":2}`, "X-Write-Concern", "1"); r.Status != 201 {
		t.Fatalf("a write after node2's restart: %d %s", r.Status, r.Body)
	}
	var copying replicate.Lag
	testnode.Eventually(t, 30*time.Second, "node2's copy stopped part way", func() (bool, string) {
		for _, l := range c.Node("node1").Lags() {
			if l.Partition == p && l.Replica == "node2" {
				copying = l
				return l.Copied > 0 && strings.Contains(l.LastError, "link cut"), fmt.Sprintf("%+v", l)
			}
		}
		return false, "node1 sends node2 nothing of the partition"
	})
	if copying.ToCopy > 0 && copying.Copied >= copying.ToCopy {
		t.Fatalf("node2 was copied the whole partition before the cut (%+v); the test proves nothing", copying)
	}
	c.Node("node1").Stop()

	// node2 may win the lease (with node3's vote): it must not write
	// before it hears node1, the list's other copy.
	testnode.Eventually(t, 20*time.Second, "node2 winning the lease", func() (bool, string) {
		_, held := c.Node("node2").Leases().Holds(p)
		return held, "not yet"
	})
	if r, err := c.Node("node2").Client(token).TryDo("PUT", base+"while-the-master-is-down", `{"n":3}`, "X-Write-Timeout", "2s"); err == nil && (r.Status == 200 || r.Status == 201) {
		t.Errorf("node2, emptied and copied part way, took a write while node1, which holds the partition, was down: %d", r.Status)
	}
	c.Faults.HealAll()
	c.Restart("node1")
	now := awaitMasterTakingWrites(t, c, token, p, base+"after-restart", 30*time.Second)
	lost := readsLost(t, c, token, now, base, acked)
	t.Logf("node2 emptied, copied part way, node1 stopped; %s masters the partition now; %d of %d majority writes lost", now, lost, len(acked))
}

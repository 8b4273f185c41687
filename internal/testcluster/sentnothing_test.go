package testcluster_test

import (
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// A replica that was never sent anything of its partition (its master
// acknowledged a first write with write concern 1 and died before the
// batch went out) takes the partition over like any replica: the list
// of copies its master recorded before the partition's first write names
// it at the process it still runs in, which acknowledged nothing, so no
// write was counted on the list with it (with REPLICATION_FACTOR 2, none
// was acknowledged with write concern majority). Before, every node holding nothing of a partition counted
// as no copy of it (the check meant for a node whose data directory was
// emptied), and with REPLICATION_FACTOR 2 it waited for the dead master
// to answer: the partition took no write until that master came back (a
// CI run of TestProcessClusterFailureDetection failed so on a loaded
// machine, where the "before" write had not reached the replica).
func TestAReplicaSentNothingTakesOverFromADeadMaster(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.NoWait())
	// No batch of node1's reaches node2 (cut before the first tenures
	// begin: a new cluster's take a few seconds): node2 never hears of a
	// tenure of node1's partitions, or of their writes.
	c.Faults.CutReplication("node1", "node2")
	c.WaitForMasters(30 * time.Second)
	token := testnode.AdminToken(t)
	user, p := userPlacedOn(t, c, "node1", "node2")
	base := "/v1/users/" + user + "/collections/c/documents/"
	if r := c.Node("node1").Client(token).Do("PUT", base+"unreplicated", `{"n":1}`, "X-Write-Concern", "1"); r.Status != 201 {
		t.Fatalf("the w=1 write on node1: %d %s", r.Status, r.Body)
	}
	c.Node("node1").Stop()
	master := awaitMasterTakingWrites(t, c, token, p, base+"after", 20*time.Second)
	if master == "node1" {
		t.Fatalf("node1 is stopped but served the write")
	}
	t.Logf("%s took partition %d over and takes writes", master, p)
}

// With REPLICATION_FACTOR 3, a copy new in its process that was never
// sent its first full copy answers as awaiting one, and counts as a copy
// holding nothing in another copy's check (its master's first list names
// it at the incarnation that answered): node2 takes over from a dead
// node1 with node3's answer. Before, a copy awaiting a full copy counted
// for no list, and node2, which needs two answers, waited for node1.
func TestAnUntouchedNewCopyCountsInAnotherCopysCheck(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.NoWait(), testcluster.ReplicationFactor(3))
	// No batch or copy of node1's reaches node3 (cut before the first
	// tenures begin).
	c.Faults.CutReplication("node1", "node3")
	c.WaitForMasters(30 * time.Second)
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	base := "/v1/users/" + user + "/collections/c/documents/"
	acked := writeMajority(t, c.Node("node1").Client(token), base, 10)
	c.Node("node1").Stop()
	master := awaitMasterTakingWrites(t, c, token, p, base+"after", 20*time.Second)
	if master == "node1" {
		t.Fatalf("node1 is stopped but served the write")
	}
	lost := readsLost(t, c, token, master, base, acked)
	t.Logf("%s took partition %d over with node3's answer; %d of %d majority writes lost", master, p, lost, len(acked))
}

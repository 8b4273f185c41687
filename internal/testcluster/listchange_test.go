package testcluster_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// A master that dies right after a change of its replica list, before
// the others learned of the change, must not lose the majority writes it
// acknowledged on the new list (docs/reliability.md, "Seventh session").
// RF 2: node1 masters the partition with node2 as its replica. node1's
// table updates are held back from the others (Faults.MuteState: its
// broadcast of the new list never leaves); node2 is stopped, and node1
// replaces it by node3 once node3 holds the partition. node1 acknowledges
// majority writes on itself and node3, and stops. node2 restarts knowing
// only the old list, [node1, node2], in which the promotion rule needs
// only its own answer.
//
// Failed every time before the lease voters kept each master's list of
// copies (5 of 5 writes lost): the copies that decide a failover knew
// the list by gossip only, so node2 took the partition over and node3
// rolled the writes back. Now node1 counts on the new list only once a
// majority of the voters keeps it, node2 reads it from the voters that
// grant it the lease, finds node3 ahead and steps down, and node3 takes
// over.
func TestAMasterThatDiesRightAfterAListChangeLosesNoMajorityWrite(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	user, p := userPlacedOn(t, c, "node1", "node2")
	base := "/v1/users/" + user + "/collections/c/documents/"
	writeMajority(t, c.Node("node1").Client(token), base, 5)

	c.Faults.MuteState("node1")
	c.Node("node2").Stop()
	testnode.Eventually(t, 60*time.Second, "node1 replaces node2 by node3", func() (bool, string) {
		pl := c.Node("node1").Placement(p)
		return slices.Equal(pl.Responsible, []string{"node1", "node3"}), fmt.Sprint(pl.Responsible)
	})
	if pl := c.Node("node3").Placement(p); slices.Contains(pl.Responsible, "node3") {
		t.Fatalf("node3 learned the new list %v although node1's table updates are muted: the test proves nothing", pl.Responsible)
	}
	cl := c.Node("node1").Client(token)
	var acked []string
	for i := range 5 {
		id := fmt.Sprintf("w%d", i)
		if r := cl.Do("PUT", base+id, `{"n":2}`, "X-Write-Concern", "majority"); r.Status != 201 {
			t.Fatalf("majority write %s on the new list: %d %s", id, r.Status, r.Body)
		}
		acked = append(acked, id)
	}
	c.Node("node1").Stop()
	c.Restart("node2")
	// A lease won by the promotion rule serves its copy before it has
	// asked the others whether one is ahead: a read of it is no evidence.
	master := awaitMasterTakingWrites(t, c, token, p, base+"after", 30*time.Second)
	lost := 0
	for _, id := range acked {
		if r := readAnswered(t, c.Node(master).Client(token), base+id, "X-Read-Concern", "linearizable"); r.Status != 200 {
			lost++
			t.Errorf("majority write %s reads %d %s (served by %q)", id, r.Status, r.Body, r.Header.Get("X-Served-By"))
		}
	}
	t.Logf("%s took over from node1; %d of %d majority writes acknowledged on the new list lost", master, lost, len(acked))
}

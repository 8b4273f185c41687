package testcluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// A full-cluster restart after a failover loses no majority write (issue
// 11, case 1): RF 3; node1, the preferred master, masters a partition; it
// goes down and another copy takes over and acknowledges majority writes
// (on itself and the third node); then every node restarts, node1 first.
// Before, every restarted node's partition table was empty, so the
// preferred master campaigned by succession with its stale history and won,
// and the others rolled the acknowledged writes back.
func TestAFullRestartAfterAFailoverLosesNoMajorityWrite(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.ReplicationFactor(3))
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	base := "/v1/users/" + user + "/collections/c/documents/"
	if r := c.Node("node2").Client(token).Do("PUT", base+"before", `{"n":0}`, "X-Write-Concern", "all"); r.Status != 201 {
		t.Fatalf("first write: %d %s", r.Status, r.Body)
	}
	c.Node("node1").Stop()
	var standIn string
	testnode.Eventually(t, 20*time.Second, "a stand-in master", func() (bool, string) {
		standIn = c.MasterOf(p)
		return standIn != "", "none yet"
	})
	var acked []string
	for i := range 30 {
		id := fmt.Sprintf("after-failover-%d", i)
		r, err := c.Node(standIn).Client(token).TryDo("PUT", base+id, `{"n":1}`, "X-Write-Concern", "majority", "X-Write-Timeout", "5s")
		if err == nil && r.Status == 201 {
			acked = append(acked, id)
		}
	}
	if len(acked) < 20 {
		t.Fatalf("only %d of 30 majority writes were acknowledged by the stand-in %s", len(acked), standIn)
	}
	for _, n := range c.Nodes {
		n.Stop()
	}
	for _, id := range []string{"node1", "node2", "node3"} {
		c.Restart(id)
	}
	// The stand-in takes the partition back, then hands it to node1, the
	// preferred master, once node1 has caught up.
	waitMoved(t, c, 60*time.Second)
	master := c.MasterOf(p)
	cl := c.Node(master).Client(token)
	lost := 0
	for _, id := range append([]string{"before"}, acked...) {
		if r := cl.Do("GET", base+id, nil, "X-Read-Preference", "local"); r.Status != 200 {
			lost++
			t.Errorf("majority write %s reads %d %s on %s, the master after the restart", id, r.Status, r.Body, master)
		}
	}
	t.Logf("stand-in %s acknowledged %d majority writes; after the restart %s masters the partition; %d lost", standIn, len(acked), master, lost)
}

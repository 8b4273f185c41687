package testcluster_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// A replica cut off from its master while documents are deleted and their
// tombstones purged cannot be caught up from the log (the deletes are gone
// from it): once the link heals it gets a full copy and ends holding
// exactly the master's documents, at the same versions, none of the deleted
// ones. A document created again after its tombstone was purged starts
// above every version it had: an If-Match of the old document is refused.
func TestAReplicaBehindTheTombstoneHorizonGetsAFullCopy(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.TombstoneRetention(200*time.Millisecond))
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	master := c.Node("node1")
	replica := master.Placement(p).Responsible[1]
	cl := master.Client(token)
	base := "/v1/users/" + user + "/collections/c/documents/"
	do := func(method, id, body string, want int) map[string]any {
		t.Helper()
		r := cl.Do(method, base+id, body)
		if r.Status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, id, r.Status, r.Body, want)
		}
		if want == 204 {
			return nil
		}
		return r.JSON(t)
	}
	for i := range 12 {
		do("PUT", fmt.Sprintf("d%d", i), fmt.Sprintf(`{"i":%d}`, i), 201)
	}
	waitConverged(t, c, 20*time.Second)

	c.Faults.Cut("node1", replica)
	for i := range 4 {
		do("PATCH", fmt.Sprintf("d%d", i), `{"patched":true}`, 200)
	}
	for i := range 3 {
		do("PUT", fmt.Sprintf("e%d", i), `{"new":true}`, 201)
	}
	for i := 4; i <= 10; i++ {
		do("DELETE", fmt.Sprintf("d%d", i), "", 204)
	}
	testnode.Eventually(t, 30*time.Second, "the master purges the tombstones", func() (bool, string) {
		h, last := master.Horizon(p), master.Applied(p)
		return h == last, fmt.Sprintf("horizon %s, last %s", h, last)
	})
	horizon := master.Horizon(p)
	if got := c.Node(replica).Applied(p); got.Compare(horizon) >= 0 {
		t.Fatalf("the replica is at %s, not behind the horizon %s: the test proves nothing", got, horizon)
	}
	// d10 was created at version 1 and deleted at 2.
	again := do("PUT", "d10", `{"again":true}`, 201)["_version"].(float64)
	if again <= 2 {
		t.Fatalf("d10 created again after its tombstone was purged has version %v, want above 2", again)
	}
	for _, old := range []string{`"1"`, `"2"`} {
		if r := cl.Do("PUT", base+"d10", `{"stale":true}`, "If-Match", old); r.Status != 412 {
			t.Fatalf("PUT d10 with If-Match %s of the deleted document: %d %s, want 412", old, r.Status, r.Body)
		}
	}

	c.Faults.HealAll()
	waitConverged(t, c, 30*time.Second)
	c.WaitForReplicas(20 * time.Second)
	if m := c.MasterOf(p); m != "node1" || !slices.Contains(master.Placement(p).Responsible, replica) {
		t.Fatalf("partition %d moved (master %s, responsible %v): the comparison below would not be the one meant", p, m, master.Placement(p).Responsible)
	}
	live := func(n *testcluster.Node) []string {
		docs, err := n.Store().ScanUser(context.Background(), p, user)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range docs {
			out = append(out, fmt.Sprintf("%s v%d @%s %v", d.ID, d.Version, d.Pos, d.Body))
		}
		slices.Sort(out)
		return out
	}
	want, got := live(master), live(c.Node(replica))
	if !slices.Equal(want, got) {
		t.Fatalf("the replica holds\n%v\nthe master\n%v", got, want)
	}
	if len(want) != 12-7+3+1 {
		t.Fatalf("the master holds %d live documents, want 9: %v", len(want), want)
	}
	for _, id := range []string{"d0", "d5", "d10", "e1"} {
		sameEverywhere(t, c, token, user, id)
	}
	if h := c.Node(replica).Horizon(p); h.Compare(horizon) < 0 {
		t.Fatalf("the replica's horizon %s is behind the master's %s: it did not take a full copy", h, horizon)
	}
	metrics := string(master.Client("").Do("GET", "/metrics", nil).Body)
	if n := counter(t, metrics, "shoal_replication_full_copies_total"); n < 1 {
		t.Fatalf("the master started %v full copies", n)
	}
	if n := counter(t, metrics, "shoal_tombstones_purged_total"); n < 7 {
		t.Fatalf("the master purged %v tombstones, want at least 7", n)
	}
}

func counter(t *testing.T, metrics, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(metrics)
	if m == nil {
		t.Fatalf("/metrics lacks %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

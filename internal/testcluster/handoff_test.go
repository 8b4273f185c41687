package testcluster_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// When the preferred master comes back after a failover (long enough to
// have been replaced as a replica) it is copied the partition as an extra
// copy, then takes it back by an orderly handoff: the stand-in pauses the
// partition's writes, ships its last changes, releases the lease, and the
// preferred master campaigns at once. Under a continuous stream of
// write-concern-1 writes nothing is rolled back, every acknowledged write
// is on the master afterwards, and no two nodes ever accepted writes at
// once.
func TestHandoffBackToThePreferredMasterLosesNothing(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	base := "/v1/users/" + user + "/collections/c/documents/"
	c.Faults.Isolate("node1", c.IDs())
	var standIn string
	testnode.Eventually(t, 20*time.Second, "a stand-in master", func() (bool, string) {
		for _, n := range c.Nodes[1:] {
			if _, ok := n.Leases().Holds(p); ok {
				standIn = n.ID
				return true, ""
			}
		}
		return false, "none yet"
	})
	testnode.Eventually(t, 30*time.Second, "node2 and node3 know the stand-in", func() (bool, string) {
		for _, n := range c.Nodes[1:] {
			if m := n.Placement(p).Master; m != standIn {
				return false, n.ID + " knows " + m
			}
		}
		return true, ""
	})

	var mu sync.Mutex
	acked := map[string]float64{}
	var slowest time.Duration
	retried := 0 // writes sent again after a 503
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, n := range c.Nodes[1:] {
		wg.Add(1)
		go func(n *testcluster.Node) {
			defer wg.Done()
			cl := n.Client(token)
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("%s-%d", n.ID, i)
				began := time.Now()
				r, err := cl.TryDo("PUT", base+id, `{}`)
				// A starved machine may let a lease lapse outside any
				// handoff (a renewal too late): the write answers 503 and
				// is sent again, as a client would; anything else fails.
				for tries := 0; err == nil && r.Status == 503 && tries < 20; tries++ {
					mu.Lock()
					retried++
					mu.Unlock()
					r, err = cl.TryDo("PUT", base+id, `{}`)
				}
				took := time.Since(began)
				if err != nil || r.Status != 201 && r.Status != 200 {
					if err == nil {
						err = fmt.Errorf("%d %s", r.Status, r.Body)
					}
					t.Errorf("write %s during the handoff: %v", id, err)
					return
				}
				mu.Lock()
				acked[id] = r.JSON(t)["_version"].(float64)
				slowest = max(slowest, took)
				mu.Unlock()
			}
		}(n)
	}
	written := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	testnode.Eventually(t, 30*time.Second, "writes flowing to the stand-in", func() (bool, string) {
		return written() > 50, fmt.Sprint(written())
	})
	// Cut off for longer than REPLICA_REPLACE_AFTER, node1 loses even its
	// replica copy: to take its partition back it must first be copied it
	// again as an extra copy, then be handed the lease.
	testnode.Eventually(t, 20*time.Second, "node1 replaced as a replica", func() (bool, string) {
		r := c.Node(standIn).Placement(p).Responsible
		return !slices.Contains(r, "node1") && len(r) == 2, fmt.Sprint(r)
	})
	c.Faults.HealAll()
	testnode.Eventually(t, 30*time.Second, "the preferred master takes its partition back", func() (bool, string) {
		_, ok := c.Node("node1").Leases().Holds(p)
		return ok, "node1 does not hold it yet; master " + c.MasterOf(p)
	})
	atHandoff := written()
	testnode.Eventually(t, 30*time.Second, "writes flowing to the preferred master", func() (bool, string) {
		return written() > atHandoff+50, fmt.Sprint(written() - atHandoff)
	})
	stop.Store(true)
	wg.Wait()

	master := c.Node("node1").Client(token)
	lost, rolledBack := 0, 0
	for id, v := range acked {
		r := master.Do("GET", base+id, nil, "X-Read-Preference", "local")
		if r.Status != 200 || r.JSON(t)["_version"].(float64) < v {
			lost++
			t.Errorf("acknowledged write %s (version %v) reads %d %s on the master", id, v, r.Status, r.Body)
		}
	}
	for _, n := range c.Nodes {
		kept, err := n.Client(token).API().Rollbacks(t.Context(), 0)
		if err != nil || len(kept.RolledBack) > 0 {
			rolledBack += max(len(kept.RolledBack), 1)
			t.Errorf("%s rolled back changes during an orderly handoff: %+v (%v)", n.ID, kept.RolledBack, err)
		}
	}
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes at once:\n%s", strings.Join(o, "\n"))
	}
	epochs := map[string]uint64{}
	for _, cm := range c.History.Of(p) {
		epochs[cm.Node] = max(epochs[cm.Node], cm.Epoch)
	}
	if epochs["node1"] <= epochs[standIn] {
		t.Fatalf("node1 took the partition back at epoch %d, the stand-in %s wrote at %d", epochs["node1"], standIn, epochs[standIn])
	}
	pauses := metricLines(t, c.Node(standIn).Client(token), "shoal_partition_move_write_pause_seconds_sum",
		"shoal_partition_move_write_pause_seconds_count", "shoal_partition_moves_total")
	t.Logf("%d writes acknowledged (%d sent again after a 503), %d of them lost, %d rolled back; slowest write %s; stand-in %s: %s",
		len(acked), retried, lost, rolledBack, slowest.Round(time.Millisecond), standIn, strings.Join(pauses, "; "))
	if !slices.ContainsFunc(pauses, func(l string) bool { return strings.HasPrefix(l, `shoal_partition_moves_total{outcome="done"}`) }) {
		t.Fatalf("the stand-in counted no handoff: %v", pauses)
	}
}

// metricLines returns the lines of a node's /metrics that start with any
// of the prefixes.
func metricLines(t *testing.T, cl *testnode.Client, prefixes ...string) []string {
	t.Helper()
	r := cl.Do("GET", "/metrics", nil)
	var out []string
	for _, l := range strings.Split(string(r.Body), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return out
}

// With three copies, the copy that holds the most history takes over when
// the master is lost, not merely the first of the responsible list: the
// first replica is cut off from the master (it falls behind), majority
// writes go on reaching the master and the second replica, then the
// master is lost. The second replica must take over, with every
// acknowledged majority write.
func TestTheMostCurrentCopyIsPromoted(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.ReplicationFactor(3))
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	responsible := c.Node("node1").Placement(p).Responsible
	behind, current := responsible[1], responsible[2]
	base := "/v1/users/" + user + "/collections/c/documents/"
	master := c.Node("node1").Client(token)
	for i := 0; i < 5; i++ {
		master.Do("PUT", fmt.Sprintf("%searly%d", base, i), `{}`, "X-Write-Concern", "all")
	}
	c.Faults.Cut("node1", behind)
	acked := map[string]float64{}
	for i := 0; len(acked) < 30; i++ {
		id := fmt.Sprintf("late%d", i)
		r, err := master.TryDo("PUT", base+id, `{}`, "X-Write-Concern", "majority", "X-Write-Timeout", "2s")
		if err == nil && r.Status == 201 {
			acked[id] = r.JSON(t)["_version"].(float64)
		}
		if i > 300 {
			t.Fatalf("only %d majority writes acknowledged in %d tries", len(acked), i)
		}
	}
	if got, want := c.Node(behind).Applied(p), c.Node(current).Applied(p); got.Compare(want) >= 0 {
		t.Fatalf("%s is not behind %s (%s vs %s): the test proves nothing", behind, current, got, want)
	}
	c.Faults.Isolate("node1", c.IDs())
	testnode.Eventually(t, 20*time.Second, "a copy takes over", func() (bool, string) {
		for _, id := range []string{behind, current} {
			if _, ok := c.Node(id).Leases().Holds(p); ok {
				return true, ""
			}
		}
		return false, "none yet"
	})
	if _, ok := c.Node(current).Leases().Holds(p); !ok {
		t.Fatalf("%s, which was behind, took over instead of %s", behind, current)
	}
	cl := c.Node(current).Client(token)
	for id, v := range acked {
		r := cl.Do("GET", base+id, nil, "X-Read-Preference", "local")
		if r.Status != 200 || r.JSON(t)["_version"].(float64) < v {
			t.Errorf("majority write %s (version %v) reads %d on the new master", id, v, r.Status)
		}
	}
	for _, cm := range c.History.Of(p) {
		if cm.Node == behind {
			t.Fatalf("%s, which was behind, accepted writes at epoch %d", behind, cm.Epoch)
		}
	}
}

// A handoff whose receiver cannot take the lease (here: the new node is cut
// from two of the three voters, so its campaign after the release reaches
// no majority) must not leave the partition without a master. Before, the
// old master had released the lease and went back to being a replica of a
// master it still believed in (itself), the receiver stopped campaigning
// when its takeover call ended, and nobody else campaigns for a partition
// whose master is UP: the partition had no master until the old master
// went down. Now the old master, whose copy is complete, takes it back,
// and the handoff is tried again once the links heal; no acknowledged
// write is lost on the way.
func TestAHandoffTheReceiverCannotCompleteLeavesNoPartitionMasterless(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	ring := ringOf(t, 4)
	// The partitions node1 masters that node4 will own: they move to node4
	// through handoffs node4 cannot complete.
	var moving []int
	users := map[int]string{}
	for i := 0; len(users) < testcluster.Partitions && i < 10000; i++ {
		u := fmt.Sprintf("u%d", i)
		p := shard.PartitionOf(u, testcluster.Partitions)
		if _, ok := users[p]; !ok {
			users[p] = u
			if ring.Owner(p) == "node4" && c.MasterOf(p) == "node1" {
				moving = append(moving, p)
			}
		}
	}
	if len(moving) == 0 {
		t.Fatal("node1 masters no partition node4 will own; the test proves nothing")
	}
	acked := map[int][]string{}
	write := func(via *testcluster.Node, p int, id string) bool {
		r, err := via.Client(token).TryDo("PUT", "/v1/users/"+users[p]+"/collections/c/documents/"+id, `{"n":1}`,
			"X-Write-Concern", "majority")
		if err == nil && r.Status == 201 {
			acked[p] = append(acked[p], id)
			return true
		}
		return false
	}
	for _, p := range moving {
		for i := range 5 {
			if !write(c.Nodes[i%3], p, fmt.Sprintf("before-%d", i)) {
				t.Fatalf("writing to partition %d before the move failed", p)
			}
		}
	}
	c.Faults.Cut("node4", "node2")
	c.Faults.Cut("node4", "node3")
	c.AddNode()
	// node1 copies the partitions to node4, hands the first over and
	// releases its lease; node4's takeover fails.
	testnode.Eventually(t, 60*time.Second, "node1 releasing a partition to node4", func() (bool, string) {
		for _, p := range moving {
			if c.MasterOf(p) != "node1" {
				return true, ""
			}
		}
		return false, "node1 still masters every one"
	})
	// Each handoff is tried again and again while the links are cut, but
	// between the tries every partition has a master.
	for _, p := range moving {
		testnode.Eventually(t, 30*time.Second, fmt.Sprintf("partition %d mastered", p), func() (bool, string) {
			return c.MasterOf(p) != "", "no master"
		})
	}
	c.Faults.HealAll()
	waitMoved(t, c, 60*time.Second)
	for _, p := range moving {
		if !write(c.Nodes[0], p, "after") {
			t.Errorf("writing to partition %d after the move failed", p)
		}
		master := c.MasterOf(p)
		for _, id := range acked[p] {
			r := c.Node(master).Client(token).Do("GET", "/v1/users/"+users[p]+"/collections/c/documents/"+id, nil,
				"X-Read-Preference", "local")
			if r.Status != 200 {
				t.Errorf("acknowledged write %s/%s reads %d on the master %s of partition %d", users[p], id, r.Status, master, p)
			}
		}
	}
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes at once:\n%s", strings.Join(o, "\n"))
	}
}

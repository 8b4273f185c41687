package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// waitConverged waits until every replica of every partition holds its
// master's history.
func waitConverged(t *testing.T, c *testcluster.Cluster, timeout time.Duration) {
	t.Helper()
	testnode.Eventually(t, timeout, "replicas hold their masters' history", func() (bool, string) {
		for p := 0; p < testcluster.Partitions; p++ {
			m := c.MasterOf(p)
			if m == "" {
				return false, fmt.Sprintf("partition %d has no master", p)
			}
			pl := c.Node(m).Placement(p)
			want := c.Node(m).Applied(p)
			for _, r := range pl.Responsible[1:] {
				if got := c.Node(r).Applied(p); got.Compare(want) < 0 {
					return false, fmt.Sprintf("partition %d: replica %s at %s, master %s at %s", p, r, got, m, want)
				}
			}
		}
		return true, ""
	})
}

// sameEverywhere checks a document reads the same, with X-Read-Preference:
// local, on every member of its partition's responsible list. Masters may
// be changing hands (a handoff back to the preferred master), so it waits
// for a moment where they agree, and fails if none comes.
func sameEverywhere(t *testing.T, c *testcluster.Cluster, token, user, id string) {
	t.Helper()
	p := shard.PartitionOf(user, testcluster.Partitions)
	path := fmt.Sprintf("/v1/users/%s/collections/c/documents/%s", user, id)
	testnode.Eventually(t, 30*time.Second, path+" reads the same on every copy", func() (bool, string) {
		master := c.MasterOf(p)
		if master == "" {
			return false, "no master"
		}
		want := ""
		for _, n := range c.Node(master).Placement(p).Responsible {
			r := c.Node(n).Client(token).Do("GET", path, nil, "X-Read-Preference", "local")
			got := fmt.Sprintf("%d %s", r.Status, strings.TrimSpace(string(r.Body)))
			if r.Status == 404 {
				got = "404"
			}
			if r.Header.Get("X-Served-By") != n {
				return false, fmt.Sprintf("a local read on %s was served by %s", n, r.Header.Get("X-Served-By"))
			}
			if want == "" {
				want = got
			} else if got != want {
				return false, fmt.Sprintf("%s on the master %s, %s on %s", want, master, got, n)
			}
		}
		return true, ""
	})
}

func TestReplicasConvergeToTheMaster(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	type docRef struct{ user, id string }
	var docs []docRef
	for u := 0; u < 6; u++ {
		user := fmt.Sprintf("r%d", u)
		for i := 0; i < 8; i++ {
			id := fmt.Sprintf("d%d", i)
			via := c.Nodes[(u+i)%3].Client(token)
			path := fmt.Sprintf("/v1/users/%s/collections/c/documents/%s", user, id)
			if r := via.Do("PUT", path, fmt.Sprintf(`{"i":%d,"big":12345678901234,"f":1.5}`, i)); r.Status != 201 {
				t.Fatalf("PUT %s: %d %s", path, r.Status, r.Body)
			}
			switch i % 3 {
			case 1:
				via.Do("PATCH", path, `{"patched":true}`)
			case 2:
				via.Do("DELETE", path, nil)
			}
			docs = append(docs, docRef{user, id})
		}
	}
	waitConverged(t, c, 20*time.Second)
	for _, d := range docs {
		sameEverywhere(t, c, token, d.user, d.id)
	}
	m := string(c.Nodes[0].Client("").Do("GET", "/metrics", nil).Body)
	for _, want := range []string{"shoal_replication_behind_changes{replica=", "shoal_replication_lag_seconds{replica="} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}

func TestReplicaRestartedMidStreamCatchesUp(t *testing.T) {
	testReplicaCatchesUp(t, testcluster.Start(t, 3))
}

// With queues of a few documents, every burst overflows them: the replicas
// must still end identical, caught up from the store.
func TestOverflowedQueuesStillConverge(t *testing.T) {
	testReplicaCatchesUp(t, testcluster.Start(t, 3, testcluster.ReplicationQueue(3)))
}

func testReplicaCatchesUp(t *testing.T, c *testcluster.Cluster) {
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	replica := c.Node("node1").Placement(p).Responsible[1]
	var stop atomic.Bool
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := c.Node("node1").Client(token)
		for i := 0; !stop.Load(); i++ {
			path := fmt.Sprintf("/v1/users/%s/collections/c/documents/k%d", user, i%40)
			if r, err := cl.TryDo("PUT", path, fmt.Sprintf(`{"i":%d}`, i)); err == nil && r.Status < 300 {
				written.Add(1)
			}
			if i%7 == 0 {
				cl.TryDo("DELETE", fmt.Sprintf("/v1/users/%s/collections/c/documents/k%d", user, (i+3)%40), nil)
			}
		}
	}()
	testnode.Eventually(t, 30*time.Second, "writes flowing", func() (bool, string) { return written.Load() > 50, "" })
	c.Restart(replica)
	atRestart := written.Load()
	testnode.Eventually(t, 60*time.Second, "more writes after the restart", func() (bool, string) {
		return written.Load() > atRestart+50, fmt.Sprint(written.Load() - atRestart)
	})
	stop.Store(true)
	wg.Wait()
	waitConverged(t, c, 30*time.Second)
	c.WaitForReplicas(20 * time.Second)
	for i := 0; i < 40; i++ {
		sameEverywhere(t, c, token, user, fmt.Sprintf("k%d", i))
	}
}

func TestMajorityWritesWaitForAReplica(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node2")
	replica := c.Node("node2").Placement(p).Responsible[1]
	cl := c.Node("node2").Client(token)
	path := "/v1/users/" + user + "/collections/c/documents/"
	if r := cl.Do("PUT", path+"a", `{}`, "X-Write-Concern", "majority"); r.Status != 201 {
		t.Fatalf("majority write: %d %s", r.Status, r.Body)
	}
	c.Faults.Cut("node2", replica)
	r := cl.Do("PUT", path+"b", `{}`, "X-Write-Concern", "majority", "X-Write-Timeout", "700ms")
	if r.Status != 504 || !strings.Contains(string(r.Body), "1 of 2 copies") {
		t.Fatalf("majority write with its replica cut off: %d %s", r.Status, r.Body)
	}
	// The master shows the replica behind, in changes and in time.
	view, err := cl.API().Cluster(context.Background())
	if err != nil {
		t.Fatalf("GET /v1/cluster: %v", err)
	}
	shown := false
	for _, l := range view.Replication {
		if l.Replica == replica && l.Partition == p && l.Behind > 0 && l.LagMs >= 500 {
			shown = true
		}
	}
	if !shown {
		t.Fatalf("/v1/cluster does not show %s behind on partition %d: %+v", replica, p, view.Replication)
	}
	c.Faults.HealAll()
	if r := cl.Do("PUT", path+"c", `{}`, "X-Write-Concern", "all", "X-Write-Timeout", "10s"); r.Status != 201 {
		t.Fatalf("write concern all after healing: %d %s", r.Status, r.Body)
	}
	// b was applied on the master though not confirmed, and reached the
	// replica once healed.
	waitConverged(t, c, 20*time.Second)
	c.WaitForReplicas(20 * time.Second)
	sameEverywhere(t, c, token, user, "b")
}

// The master is cut off while clients stream majority writes through every
// node: every write acknowledged with majority is readable afterwards from
// the new master, with its acknowledged version or a later one.
func TestMajorityWritesSurviveTheLossOfTheMaster(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	var mu sync.Mutex
	acked := map[string]float64{} // document -> acknowledged version
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func(n *testcluster.Node) {
			defer wg.Done()
			cl := n.Client(token)
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("%s-%d", n.ID, i)
				r, err := cl.TryDo("PUT", "/v1/users/"+user+"/collections/c/documents/"+id, `{}`, "X-Write-Concern", "majority", "X-Write-Timeout", "2s")
				if err == nil && r.Status == 201 {
					mu.Lock()
					acked[id] = r.JSON(t)["_version"].(float64)
					mu.Unlock()
				}
			}
		}(n)
	}
	testnode.Eventually(t, 30*time.Second, "majority writes flowing", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > 30, fmt.Sprint(len(acked))
	})
	c.Faults.Isolate("node1", c.IDs())
	testnode.Eventually(t, 20*time.Second, "another master for the partition", func() (bool, string) {
		m := ""
		for _, n := range c.Nodes[1:] {
			if _, ok := n.Leases().Holds(p); ok {
				m = n.ID
			}
		}
		return m != "", "none yet"
	})
	mu.Lock()
	atTakeover := len(acked)
	mu.Unlock()
	testnode.Eventually(t, 30*time.Second, "majority writes acknowledged by the new master", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) > atTakeover+10, fmt.Sprint(len(acked) - atTakeover)
	})
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	reader := c.Node("node2").Client(token)
	lost := 0
	for id, v := range acked {
		r := reader.Do("GET", "/v1/users/"+user+"/collections/c/documents/"+id, nil)
		if r.Status != 200 || r.JSON(t)["_version"].(float64) < v {
			lost++
			t.Errorf("acknowledged majority write %s (version %v) reads %d %s", id, v, r.Status, r.Body)
		}
	}
	t.Logf("%d majority writes acknowledged, %d lost", len(acked), lost)
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes at once:\n%s", strings.Join(o, "\n"))
	}
}

// A read that presents the token of a write never sees an older version,
// whichever node and copy serve it; and a read fails over to the replica
// when the master does not answer.
func TestReadsHonourTokensAndFailOver(t *testing.T) {
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	replica := c.Node("node1").Placement(p).Responsible[1]
	other := "node2"
	if replica == "node2" {
		other = "node3"
	}
	path := "/v1/users/" + user + "/collections/c/documents/tok"
	master := c.Node("node1").Client(token)
	for i := 1; i <= 20; i++ {
		w := master.Do("PUT", path, fmt.Sprintf(`{"i":%d}`, i))
		tok := w.Header.Get("X-Consistency-Token")
		for _, via := range []string{replica, other} {
			r := c.Node(via).Client(token).Do("GET", path, nil, "X-Consistency-Token", tok, "X-Read-Preference", "nearest")
			if r.Status != 200 || r.JSON(t)["_version"].(float64) < float64(i) {
				t.Fatalf("read %d via %s with token %s: %d %s (served by %s)", i, via, tok, r.Status, r.Body, r.Header.Get("X-Served-By"))
			}
		}
	}
	// A token of another partition is refused.
	if r := c.Node(other).Client(token).Do("GET", path, nil, "X-Consistency-Token", "9999:1.1"); r.Status != 400 {
		t.Fatalf("a foreign token: %d", r.Status)
	}
	waitConverged(t, c, 20*time.Second)
	c.Faults.Cut(other, "node1")
	r := c.Node(other).Client(token).Do("GET", path, nil)
	if r.Status != 200 || r.Header.Get("X-Served-By") != replica || r.JSON(t)["i"].(float64) != 20 {
		t.Fatalf("read with the master unreachable: %d by %s: %s", r.Status, r.Header.Get("X-Served-By"), r.Body)
	}
}

// Invariant 3: the master is cut off while clients write to it with write
// concern 1; some of those writes never reach its replica, which takes
// over. When the old master is back, every write it acknowledged is on the
// current master or listed in its rollback collection, and its copy ends
// identical to the master's.
func TestUnreplicatedWritesOfAnOldMasterAreRolledBackNotLost(t *testing.T) {
	t.Parallel() // a long test that checks what is kept, not how fast (see README, tests)
	c := testcluster.Start(t, 3)
	token := testnode.AdminToken(t)
	user, p := userMasteredBy(t, c, "node1")
	replica := c.Node("node1").Placement(p).Responsible[1]
	old := c.Node("node1").Client(token)
	base := "/v1/users/" + user + "/collections/c/documents/"
	for i := 0; i < 5; i++ {
		old.Do("PUT", fmt.Sprintf("%sbefore%d", base, i), `{"v":1}`)
	}
	waitConverged(t, c, 20*time.Second)

	c.Faults.Isolate("node1", c.IDs())
	acked := map[string]float64{}
	for i := 0; ; i++ {
		r, err := old.TryDo("PUT", fmt.Sprintf("%sisolated%d", base, i), `{"v":2}`)
		if err != nil || r.Status != 201 {
			break // the lease ran out: the old master stopped taking writes
		}
		acked[fmt.Sprintf("isolated%d", i)] = r.JSON(t)["_version"].(float64)
	}
	if r, _ := old.TryDo("PATCH", base+"before0", `{"v":3}`); r != nil && r.Status == 200 {
		t.Log("a patch slipped in before the lease ran out")
	}
	if len(acked) == 0 {
		t.Fatal("the isolated master acknowledged no write before its lease ran out; the test proves nothing")
	}
	testnode.Eventually(t, 20*time.Second, "the replica takes over", func() (bool, string) {
		_, ok := c.Node(replica).Leases().Holds(p)
		return ok, ""
	})
	c.Node(replica).Client(token).Do("PUT", base+"after", `{"v":4}`)
	c.Faults.HealAll()
	// node1, the preferred master, is copied the partition again (its
	// unreplicated writes go to its rollback collection on the way) and
	// is handed it back.
	waitMoved(t, c, 30*time.Second)
	c.WaitForMasters(30 * time.Second)
	c.WaitForReplicas(30 * time.Second)
	waitConverged(t, c, 30*time.Second)

	// A fast store acknowledges more than the default page of 1,000
	// writes before the lease runs out.
	kept, err := old.API().Rollbacks(t.Context(), 10000)
	if err != nil {
		t.Fatalf("rollback list: %v", err)
	}
	if kept.More {
		t.Fatalf("the rollback collection holds more than the %d documents read", len(kept.RolledBack))
	}
	inRollback := map[string]bool{}
	for _, k := range kept.RolledBack {
		inRollback[k.ID] = true
	}
	// The preferred master may be taking its partition back right now.
	var masterID string
	testnode.Eventually(t, 20*time.Second, "a master for the partition", func() (bool, string) {
		masterID = c.MasterOf(p)
		return masterID != "", "none"
	})
	master := c.Node(masterID).Client(token)
	onMaster, rolledBack := 0, 0
	for id, v := range acked {
		r := master.Do("GET", base+id, nil)
		switch {
		case r.Status == 200 && r.JSON(t)["_version"].(float64) >= v:
			onMaster++
		case inRollback[id]:
			rolledBack++
		default:
			t.Errorf("write %s acknowledged by the old master is neither on the master (%d) nor in its rollback", id, r.Status)
		}
	}
	t.Logf("%d writes acknowledged while cut off: %d on the current master, %d in the old master's rollback", len(acked), onMaster, rolledBack)
	for _, id := range []string{"before0", "before1", "after", "isolated0"} {
		sameEverywhere(t, c, token, user, id)
	}
}

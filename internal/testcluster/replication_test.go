package testcluster_test

import (
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
// local, on every member of its partition's responsible list.
func sameEverywhere(t *testing.T, c *testcluster.Cluster, token, user, id string) string {
	t.Helper()
	p := shard.PartitionOf(user, testcluster.Partitions)
	master := c.MasterOf(p)
	path := fmt.Sprintf("/v1/users/%s/collections/c/documents/%s", user, id)
	want := ""
	for _, n := range c.Node(master).Placement(p).Responsible {
		r := c.Node(n).Client(token).Do("GET", path, nil, "X-Read-Preference", "local")
		got := fmt.Sprintf("%d %s", r.Status, strings.TrimSpace(string(r.Body)))
		if r.Status == 404 {
			got = "404"
		}
		if r.Header.Get("X-Served-By") != n {
			t.Fatalf("a local read on %s was served by %s", n, r.Header.Get("X-Served-By"))
		}
		if want == "" {
			want = got
		} else if got != want {
			t.Fatalf("%s reads %s on the master %s but %s on %s (whose placement is %+v)", path, want, master, got, n, c.Node(n).Placement(p))
		}
	}
	return want
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
	testnode.Eventually(t, 10*time.Second, "writes flowing", func() (bool, string) { return written.Load() > 50, "" })
	c.Restart(replica)
	testnode.Eventually(t, 10*time.Second, "more writes after the restart", func() (bool, string) {
		return written.Load() > 150, fmt.Sprint(written.Load())
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
	testnode.Eventually(t, 10*time.Second, "majority writes flowing", func() (bool, string) {
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
	testnode.Eventually(t, 10*time.Second, "majority writes acknowledged by the new master", func() (bool, string) {
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

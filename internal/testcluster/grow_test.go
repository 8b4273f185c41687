package testcluster_test

import (
	"context"
	"fmt"
	"maps"
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

// load writes continuously through every given node, alternating write
// concerns 1 and majority, to users spread over every partition, and
// remembers every acknowledged version.
type load struct {
	t     *testing.T
	users []string
	stop  atomic.Bool
	wg    sync.WaitGroup

	mu       sync.Mutex
	majority map[string]float64 // "user/id" -> acknowledged version
	one      map[string]float64
	failed   map[string]int // status or error -> count
	slowest  time.Duration  // the slowest acknowledged write
}

func startLoad(t *testing.T, c *testcluster.Cluster, token string, via []*testcluster.Node) *load {
	l := &load{t: t, majority: map[string]float64{}, one: map[string]float64{}, failed: map[string]int{}}
	covered := map[int]bool{}
	for i := 0; len(covered) < testcluster.Partitions; i++ {
		u := fmt.Sprintf("grow%d", i)
		if p := shard.PartitionOf(u, testcluster.Partitions); !covered[p] {
			covered[p] = true
			l.users = append(l.users, u)
		}
	}
	for _, n := range via {
		for w, concern := range []string{"1", "majority"} {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				cl := n.Client(token)
				for i := 0; !l.stop.Load(); i++ {
					user := l.users[(i*7+w)%len(l.users)]
					id := fmt.Sprintf("%s-%s-%d", n.ID, concern, i)
					began := time.Now()
					r, err := cl.TryDo("PUT", "/v1/users/"+user+"/collections/c/documents/"+id, `{"n":1}`,
						"X-Write-Concern", concern, "X-Write-Timeout", "3s")
					took := time.Since(began)
					l.mu.Lock()
					if err == nil && r.Status == 201 {
						l.slowest = max(l.slowest, took)
					}
					switch {
					case err != nil:
						l.failed[err.Error()]++
					case r.Status != 201:
						detail, _ := r.JSON(t)["detail"].(string)
						l.failed[fmt.Sprint(r.Status, " ", detail)]++
						t.Logf("%s: %s %d %s", time.Now().Format("15:04:05.000"), id, r.Status, detail)
					case concern == "majority":
						l.majority[user+"/"+id] = r.JSON(t)["_version"].(float64)
					default:
						l.one[user+"/"+id] = r.JSON(t)["_version"].(float64)
					}
					l.mu.Unlock()
				}
			}()
		}
	}
	return l
}

func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.majority) + len(l.one)
}

func (l *load) end() {
	l.stop.Store(true)
	l.wg.Wait()
}

// check reads every acknowledged write from its partition's master, and
// checks every user's documents on the master are exactly those written.
// It reports each acknowledged write missing or older on the master (a
// w=1 write in a running node's rollback collection was rolled back, as
// w=1 allows, not lost), and returns how the writes fared, for the test's
// summary line.
func (l *load) check(c *testcluster.Cluster, token string) (outcome string) {
	t := l.t
	t.Helper()
	rolled := rolledBackOn(t, c, token)
	lost, older, rolledBack := 0, 0, 0
	byUser := map[string]map[string]float64{}
	for _, m := range []map[string]float64{l.majority, l.one} {
		for k, v := range m {
			user, id, _ := strings.Cut(k, "/")
			if byUser[user] == nil {
				byUser[user] = map[string]float64{}
			}
			byUser[user][id] = v
		}
	}
	for _, user := range l.users {
		p := shard.PartitionOf(user, testcluster.Partitions)
		var master string // a handoff or a lapse on a starved machine leaves it briefly without one
		testnode.Eventually(t, 30*time.Second, fmt.Sprintf("partition %d has a master", p), func() (bool, string) {
			master = c.MasterOf(p)
			return master != "", "none"
		})
		cl := c.Node(master).Client(token)
		held := map[string]bool{}
		for cursor := ""; ; {
			r := cl.Do("GET", "/v1/users/"+user+"/collections/c/documents?limit=1000"+cursor, nil, "X-Read-Preference", "local")
			if r.Status != 200 {
				t.Fatalf("listing %s on its master %s: %d %s", user, master, r.Status, r.Body)
			}
			page := r.JSON(t)
			for _, d := range page["documents"].([]any) {
				doc := d.(map[string]any)
				id := doc["_id"].(string)
				held[id] = true
				if want, ok := byUser[user][id]; ok && doc["_version"].(float64) < want {
					older++
					t.Errorf("%s/%s: version %v on master %s, %v was acknowledged", user, id, doc["_version"], master, want)
				}
			}
			next, _ := page["next"].(string)
			if next == "" {
				break
			}
			cursor = "&after=" + next
		}
		for id := range byUser[user] {
			_, one := l.one[user+"/"+id]
			switch {
			case held[id]:
			case one && rolled[user+"/"+id]:
				rolledBack++ // w=1 promises no more: on the master or rolled back
			default:
				lost++
				t.Errorf("acknowledged write %s/%s is not on the master %s of partition %d", user, id, master, p)
			}
		}
	}
	if lost == 0 && older == 0 {
		return fmt.Sprintf("none lost, %d w=1 rolled back", rolledBack)
	}
	return fmt.Sprintf("%d LOST and %d older on the master, %d w=1 rolled back", lost, older, rolledBack)
}

// rolledBackOn is every document ("user/id") in the rollback collection of
// a running node of c.
func rolledBackOn(t *testing.T, c *testcluster.Cluster, token string) map[string]bool {
	t.Helper()
	rolled := map[string]bool{}
	for _, n := range c.Nodes {
		if n.Stopped() {
			continue
		}
		keys, err := rollbackKeys(n.Client(token))
		if err != nil {
			t.Fatalf("%s's rollback list: %v", n.ID, err)
		}
		maps.Copy(rolled, keys)
	}
	return rolled
}

// rollbackKeys is every document ("user/id") in the rollback collection of
// the node cl asks.
func rollbackKeys(cl *testnode.Client) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kept, err := cl.API().Rollbacks(ctx, 0)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for _, k := range kept.RolledBack {
		keys[k.User+"/"+k.ID] = true
	}
	return keys, nil
}

// waitMoved waits until every partition is mastered by its preferred master
// as every running node's ring has it, with no move in progress.
func waitMoved(t *testing.T, c *testcluster.Cluster, timeout time.Duration) time.Duration {
	t.Helper()
	return testnode.Eventually(t, timeout, "every partition on its preferred master", func() (bool, string) {
		for p := 0; p < testcluster.Partitions; p++ {
			m := c.MasterOf(p)
			for _, n := range c.Nodes {
				if n.Stopped() {
					continue
				}
				if pm := n.Placement(p).PreferredMaster; pm != m {
					return false, fmt.Sprintf("partition %d: master %q, %s's preferred master %s", p, m, n.ID, pm)
				}
			}
		}
		return true, ""
	})
}

// A fourth node added to the peer list under a continuous write load: about
// a quarter of the partitions move to it (copied first, then handed over),
// none moves between the old members, and no acknowledged write is lost.
func TestGrowingMovesAQuarterToTheNewNodeAndLosesNothing(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.Tolerant())
	token := testnode.AdminToken(t)
	l := startLoad(t, c, token, c.Nodes)
	testnode.Eventually(t, 60*time.Second, "writes flowing", func() (bool, string) { return l.acked() > 50, fmt.Sprint(l.acked()) })
	before := make([]string, testcluster.Partitions)
	epochs := make([]uint64, testcluster.Partitions)
	for p := range before {
		before[p] = c.MasterOf(p)
		epochs[p] = c.Node(before[p]).Placement(p).Epoch
	}
	voters, _ := c.Node("node1").Leases().VoterSets()
	c.AddNode()
	took := waitMoved(t, c, 90*time.Second)
	atEnd := l.acked()
	testnode.Eventually(t, 60*time.Second, "writes flowing after the moves", func() (bool, string) {
		return l.acked() > atEnd+50, fmt.Sprint(l.acked() - atEnd)
	})
	l.end()
	moved := 0
	for p := range before {
		after := c.MasterOf(p)
		if after == before[p] {
			continue
		}
		moved++
		if after != "node4" {
			t.Errorf("partition %d moved from %s to %s, between old members", p, before[p], after)
		}
	}
	// A node that is not a voter joining touches no other lease.
	for p := range before {
		if after := c.MasterOf(p); after == before[p] {
			if e := c.Node(after).Placement(p).Epoch; e != epochs[p] {
				t.Errorf("partition %d stayed on %s but its epoch went from %d to %d", p, after, epochs[p], e)
			}
		}
	}
	if now, target := c.Node("node1").Leases().VoterSets(); !slices.Equal(now, voters) || !slices.Equal(target, voters) {
		t.Errorf("voters were %v, are %v heading for %v after adding a non-voter", voters, now, target)
	}
	outcome := l.check(c, token)
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes at once:\n%s", strings.Join(o, "\n"))
	}
	t.Logf("3 -> 4 nodes: %d of %d partitions moved (%.0f%%) in %s, all to node4; %d majority and %d w=1 writes acknowledged, %s; slowest %s; refused: %v; %s",
		moved, testcluster.Partitions, 100*float64(moved)/testcluster.Partitions, took.Round(time.Millisecond), len(l.majority), len(l.one),
		outcome, l.slowest.Round(time.Millisecond), l.failed, writePauses(t, c, token))
	if moved == 0 {
		t.Fatal("no partition moved to the new node")
	}
}

// A node taken out of the peer list under a continuous write load drains:
// each partition it masters is copied to its new preferred master and
// handed over, each copy it holds is made again elsewhere, and in the end
// it holds nothing, with no acknowledged write lost and no partition moved
// between the remaining members.
func TestRemovedNodeDrainsAndLosesNothing(t *testing.T) {
	c := testcluster.Start(t, 4, testcluster.Voters(3), testcluster.Tolerant())
	token := testnode.AdminToken(t)
	l := startLoad(t, c, token, c.Nodes[:3])
	testnode.Eventually(t, 60*time.Second, "writes flowing", func() (bool, string) { return l.acked() > 50, fmt.Sprint(l.acked()) })
	before := make([]string, testcluster.Partitions)
	had := 0
	for p := range before {
		before[p] = c.MasterOf(p)
		if before[p] == "node4" {
			had++
		}
	}
	if had == 0 {
		t.Fatal("node4 masters nothing before its removal; the test proves nothing")
	}
	c.RemoveFromPeers("node4")
	drained := testnode.Eventually(t, 90*time.Second, "node4 holds nothing", func() (bool, string) {
		for p := 0; p < testcluster.Partitions; p++ {
			if _, ok := c.Node("node4").Leases().Holds(p); ok {
				return false, fmt.Sprintf("node4 still masters partition %d", p)
			}
			for _, n := range c.Nodes[:3] {
				if slices.Contains(n.Placement(p).Responsible, "node4") {
					return false, fmt.Sprintf("%s lists node4 for partition %d", n.ID, p)
				}
			}
		}
		return true, ""
	})
	waitMoved(t, c, 30*time.Second)
	atEnd := l.acked()
	testnode.Eventually(t, 60*time.Second, "writes flowing after the drain", func() (bool, string) {
		return l.acked() > atEnd+50, fmt.Sprint(l.acked() - atEnd)
	})
	l.end()
	for p := range before {
		if after := c.MasterOf(p); before[p] != "node4" && after != before[p] {
			t.Errorf("partition %d moved from %s to %s, between remaining members", p, before[p], after)
		}
	}
	outcome := l.check(c, token)
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes at once:\n%s", strings.Join(o, "\n"))
	}
	t.Logf("4 -> 3 nodes: node4's %d partitions moved to their new preferred masters, drained in %s; %d majority and %d w=1 writes acknowledged, %s; slowest %s; refused: %v; %s",
		had, drained.Round(time.Millisecond), len(l.majority), len(l.one), outcome, l.slowest.Round(time.Millisecond), l.failed, writePauses(t, c, token))
}

// A move interrupted by stopping the receiving node in the middle of its
// copy resumes after the node restarts, and ends complete: every document
// is on the new master, and each partition has exactly one master.
func TestInterruptedMoveResumesAfterARestart(t *testing.T) {
	// Copy chunks of at most 5 documents: 300 documents take 60, long
	// enough to be seen under way (polled every 20 ms; with chunks of 20
	// a whole copy sometimes fell between two polls).
	c := testcluster.Start(t, 3, testcluster.MaxConcurrentMoves(1), testcluster.ReplicationBatch(5), testcluster.Tolerant())
	token := testnode.AdminToken(t)
	// The partitions node4 will own: fill some of them, so their copy
	// takes several chunks.
	ring := ringOf(t, 4)
	var users []string
	for i := 0; len(users) < 3; i++ {
		u := fmt.Sprintf("big%d", i)
		if ring.Owner(shard.PartitionOf(u, testcluster.Partitions)) == "node4" {
			users = append(users, u)
		}
	}
	const perUser = 300
	filled := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.Nodes[w%3].Client(token)
			for i := w; i < perUser*len(users); i += 8 {
				user := users[i%len(users)]
				// POST: the id is generated, so the store is not searched for it.
				if r := cl.Do("POST", "/v1/users/"+user+"/collections/c/documents", `{"pad":"0123456789012345678901234567890123456789"}`); r.Status != 201 {
					t.Errorf("filling %s: %d %s", user, r.Status, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("filled in %s", time.Since(filled).Round(time.Millisecond))

	c.AddNode()
	var interrupted string
	testnode.Eventually(t, 60*time.Second, "a copy to node4 under way", func() (bool, string) {
		for _, n := range c.Nodes[:3] {
			for _, m := range n.Moves() {
				if m.To == "node4" && m.Phase == "copying" && m.DocumentsCopied > 0 && m.DocumentsCopied < m.DocumentsTotal {
					interrupted = fmt.Sprintf("partition %d from %s at %d of %d documents", m.Partition, m.From, m.DocumentsCopied, m.DocumentsTotal)
					return true, ""
				}
			}
		}
		return false, "no copy in progress"
	})
	c.Node("node4").Stop()
	c.Restart("node4")
	took := waitMoved(t, c, 90*time.Second)
	t.Logf("stopped node4 while copying %s; the moves completed %s after its restart", interrupted, took.Round(time.Millisecond))
	for p := 0; p < testcluster.Partitions; p++ {
		holders := 0
		for _, n := range c.Nodes {
			if _, ok := n.Leases().Holds(p); ok {
				holders++
			}
		}
		if holders != 1 {
			t.Errorf("partition %d has %d masters", p, holders)
		}
	}
	for _, user := range users {
		p := shard.PartitionOf(user, testcluster.Partitions)
		if m := c.MasterOf(p); m != "node4" {
			t.Fatalf("partition %d of %s is mastered by %s, not node4", p, user, m)
		}
		cl := c.Node("node4").Client(token)
		seen := 0
		for cursor := ""; ; {
			r := cl.Do("GET", "/v1/users/"+user+"/collections/c/documents?limit=1000"+cursor, nil, "X-Read-Preference", "local")
			if r.Status != 200 {
				t.Fatalf("listing %s on node4: %d %s", user, r.Status, r.Body)
			}
			page := r.JSON(t)
			seen += len(page["documents"].([]any))
			next, _ := page["next"].(string)
			if next == "" {
				break
			}
			cursor = "&after=" + next
		}
		if seen != perUser {
			t.Errorf("%s: node4 holds %d documents, %d were written", user, seen, perUser)
		}
	}
}

// writePauses sums up, over the running nodes, how long writes paused for
// the handoffs they made (from /metrics).
func writePauses(t *testing.T, c *testcluster.Cluster, token string) string {
	var sum float64
	var count, over int
	for _, n := range c.Nodes {
		if n.Stopped() {
			continue
		}
		for _, line := range metricLines(t, n.Client(token), "shoal_partition_move_write_pause_seconds_") {
			var v float64
			switch {
			case strings.HasPrefix(line, "shoal_partition_move_write_pause_seconds_sum "):
				fmt.Sscan(strings.Fields(line)[1], &v)
				sum += v
			case strings.HasPrefix(line, "shoal_partition_move_write_pause_seconds_count "):
				fmt.Sscan(strings.Fields(line)[1], &v)
				count += int(v)
			case strings.HasPrefix(line, `shoal_partition_move_write_pause_seconds_bucket{le="0.512"} `):
				fmt.Sscan(strings.Fields(line)[1], &v)
				over -= int(v)
			}
		}
	}
	over += count
	if count == 0 {
		return "no handoff recorded"
	}
	return fmt.Sprintf("%d handoffs, writes paused %.0f ms on average, %d over 512 ms", count, 1000*sum/float64(count), over)
}

// ringOf is the ring of a cluster of n sharding nodes node1..nodeN, as the
// nodes will build it.
func ringOf(t *testing.T, n int) *shard.Ring {
	t.Helper()
	var members []shard.Member
	for i := 1; i <= n; i++ {
		members = append(members, shard.Member{ID: fmt.Sprintf("node%d", i), Sharding: true, Replica: true})
	}
	ring, err := shard.NewRing(members, testcluster.Partitions)
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// A node taken out of the peer list while a replica is down (seed 2002:
// kill-replica and remove-node overlapping, RF 3) drains under a
// continuous write load once the replica is back: the masters stop
// listing it, and no acknowledged write is lost.
func TestRemovedNodeDrainsWhileAReplicaIsDown(t *testing.T) {
	c := testcluster.Start(t, 4, testcluster.Voters(3), testcluster.Tolerant(), testcluster.ReplicationFactor(3))
	token := testnode.AdminToken(t)
	l := startLoad(t, c, token, c.Nodes[1:3])
	testnode.Eventually(t, 60*time.Second, "writes flowing", func() (bool, string) { return l.acked() > 50, fmt.Sprint(l.acked()) })
	c.Node("node1").Stop()
	c.RemoveFromPeers("node4")
	testnode.Eventually(t, 30*time.Second, "node4 out of the others' peer lists", func() (bool, string) {
		for _, n := range c.Nodes[1:3] {
			for _, m := range n.Cluster().View().Members {
				if m.ID == "node4" && m.InPeerList {
					return false, n.ID + " still lists node4"
				}
			}
		}
		return true, ""
	})
	c.Restart("node1")
	drained := testnode.Eventually(t, 60*time.Second, "node4 holds nothing", func() (bool, string) {
		for p := 0; p < testcluster.Partitions; p++ {
			if _, ok := c.Node("node4").Leases().Holds(p); ok {
				return false, fmt.Sprintf("node4 still masters partition %d", p)
			}
			for _, n := range c.Nodes[:3] {
				if r := n.Placement(p).Responsible; slices.Contains(r, "node4") {
					return false, fmt.Sprintf("%s lists node4 for partition %d: %v", n.ID, p, r)
				}
			}
		}
		return true, ""
	})
	l.end()
	outcome := l.check(c, token)
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes at once:\n%s", strings.Join(o, "\n"))
	}
	t.Logf("node4 drained %s after node1's restart; %d majority and %d w=1 writes acknowledged, %s; refused: %v",
		drained.Round(time.Millisecond), len(l.majority), len(l.one), outcome, l.failed)
}

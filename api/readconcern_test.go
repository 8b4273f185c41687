package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// leaseView is a node's lease holder as routing sees it: the partitions
// it holds (at epoch), and its guess of the master otherwise.
type leaseView struct {
	mu     sync.Mutex
	holds  bool
	epoch  uint64
	likely string
}

func (l *leaseView) Holds(int) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.holds
}

func (l *leaseView) LikelyMaster(int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.likely
}

func (l *leaseView) set(holds bool, epoch uint64, likely string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holds, l.epoch, l.likely = holds, epoch, likely
}

// concernNode is one node of a three-node test cluster: the API over a
// real store, real membership and real HTTP, with its lease holder and
// partition table set by the test.
type concernNode struct {
	id     string
	url    string
	leases *leaseView
	table  *shard.Table
	writer *store.Writer
	server *http.Server
}

const concernPartitions = 4

// threeNodes starts nodes a, b and c, each holding a copy of every
// partition, none of them master until the test says so; copies, if
// given, is how many copies each partition should have (none of them
// replicates: a state is never known to be on more than one).
func threeNodes(t *testing.T, copies ...int) map[string]*concernNode {
	t.Helper()
	ids := []string{"a", "b", "c"}
	ports := testnode.FreePorts(t, 2*len(ids))
	var peers []map[string]any
	for i, id := range ids {
		peers = append(peers, map[string]any{"id": id, "url": fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]), "gossip": fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])})
	}
	dir := t.TempDir()
	data, _ := json.Marshal(map[string]any{"peers": peers})
	peersFile := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(peersFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*concernNode{}
	for i, id := range ids {
		logger := testnode.Logger(t).With("node", id)
		cl, st, w := startNodeParts(t, id, filepath.Join(dir, id), peersFile, ports[2*i+1], concernPartitions, logger)
		n := &concernNode{id: id, url: peers[i]["url"].(string), leases: &leaseView{}, table: shard.NewTable(concernPartitions), writer: w}
		cfg := api.Config{NodeID: id, PartitionCount: concernPartitions, MaxBodyBytes: 1 << 20, AuthSecret: []byte(testnode.Secret),
			Logger: logger, Cluster: cl, Leases: n.leases, Table: n.table, ReadTryTimeout: 2 * time.Second}
		if len(copies) > 0 {
			cfg.Copies = func() int { return copies[0] }
		}
		srv := api.New(cfg, st, w)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[2*i]))
		if err != nil {
			t.Fatal(err)
		}
		n.server = &http.Server{Handler: srv}
		go n.server.Serve(l)
		t.Cleanup(func() { n.server.Close() })
		nodes[id] = n
	}
	return nodes
}

// put stores a state of the document directly in node n's copy.
func (n *concernNode) put(t *testing.T, partition int, user, id string, body map[string]any) *store.Doc {
	t.Helper()
	res := n.writer.Do(context.Background(), store.Op{Partition: partition, User: user, Coll: "c", ID: id,
		Mutate: func(*store.Doc) (store.Next, error) { return store.Next{Body: body, Size: 16}, nil }})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return res.Doc
}

// assign tells node n's table who masters the partition.
func (n *concernNode) assign(partition int, master string, epoch uint64) {
	n.table.Merge(shard.Assignment{Partition: partition, Master: master, Epoch: epoch, Responsible: responsible(master)})
}

// responsible is the partition's copies, master first.
func responsible(master string) []string {
	out := []string{master}
	for _, id := range []string{"a", "b", "c"} {
		if id != master {
			out = append(out, id)
		}
	}
	return out
}

// handedOff is the state right after b handed the partition of user to c
// by an orderly handoff, and c acknowledged a write b never got: b knows
// it (its table names c at epoch 2), a does not yet (its table still names
// b at epoch 1). Every node holds a copy.
func handedOff(t *testing.T) (nodes map[string]*concernNode, user string, p int) {
	nodes = threeNodes(t)
	user = "alice"
	p = shard.PartitionOf(user, concernPartitions)
	for _, n := range nodes {
		n.put(t, p, user, "d", map[string]any{"v": 57})
	}
	nodes["c"].put(t, p, user, "d", map[string]any{"v": 58})
	nodes["a"].assign(p, "b", 1)
	nodes["a"].leases.set(false, 0, "b")
	nodes["b"].assign(p, "c", 2)
	nodes["b"].leases.set(false, 0, "c")
	nodes["c"].assign(p, "c", 2)
	nodes["c"].leases.set(true, 2, "c")
	return nodes, user, p
}

// After an orderly handoff from b to c, a read through a, whose table still
// names b, reached b, which no longer masters the partition, and b served
// its own copy as if it were the master's: version 57 after version 58 had
// been acknowledged by c. The try aimed at the master is now marked: b
// answers it 421 naming c, and a reads from c.
func TestAReadAfterAHandoffIsNotServedByTheOldMaster(t *testing.T) {
	nodes, user, p := handedOff(t)
	c := testnode.NewClient(t, nodes["a"].url, testnode.Token(t, user))
	path := "/v1/users/" + user + "/collections/c/documents/d"
	for _, concern := range []string{"", "local", "majority", "linearizable"} {
		r := c.Do("GET", path, nil, "X-Read-Concern", concern)
		if r.Status != http.StatusOK {
			t.Fatalf("read concern %q: %d %s", concern, r.Status, r.Body)
		}
		if v := r.JSON(t)["v"]; v != 58.0 {
			t.Errorf("read concern %q through a, whose table names the old master b: v=%v (served by %s); want 58, the new master c's", concern, v, r.Header.Get("X-Served-By"))
		}
	}
	if m := nodes["a"].table.Get(p).Master; m != "c" {
		t.Errorf("a did not learn the new master from b's 421: its table names %q", m)
	}
}

// A read that does not ask for the master (nearest, local) may still be
// served by any copy: the old master's copy, too.
func TestNearestReadsMayUseAnyCopy(t *testing.T) {
	nodes, user, _ := handedOff(t)
	c := testnode.NewClient(t, nodes["b"].url, testnode.Token(t, user))
	path := "/v1/users/" + user + "/collections/c/documents/d"
	r := c.Do("GET", path, nil, "X-Read-Preference", "local")
	if r.Status != http.StatusOK || r.JSON(t)["v"] != 57.0 {
		t.Fatalf("a local-preference read on b: %d %s; want b's own copy (v 57)", r.Status, r.Body)
	}
}

// An unknown read concern is refused, and so is a linearizable read that
// asks for a copy other than the master.
func TestReadConcernIsChecked(t *testing.T) {
	nodes, user, _ := handedOff(t)
	c := testnode.NewClient(t, nodes["a"].url, testnode.Token(t, user))
	for _, path := range []string{"/v1/users/" + user + "/collections/c/documents/d", "/v1/users/" + user + "/collections/c/documents", "/v1/users/" + user + "/collections"} {
		for _, h := range [][]string{
			{"X-Read-Concern", "snapshot"}, {"X-Read-Concern", "Majority"}, {"X-Read-Concern", "available"},
			{"X-Read-Concern", "linearizable", "X-Read-Preference", "nearest"},
			{"X-Read-Concern", "linearizable", "X-Read-Preference", "local"},
		} {
			r := c.Do("GET", path, nil, h...)
			if r.Status != http.StatusBadRequest || r.JSON(t)["type"] != api.TypeInvalidHeader {
				t.Errorf("GET %s with %v: %d %s; want 400 %s", path, h, r.Status, r.Body, api.TypeInvalidHeader)
			}
		}
	}
}

// With the master gone, a local read fails over to a replica's copy; a
// linearizable one never does: it answers 503 with Retry-After once no
// master could serve it in time.
func TestALinearizableReadNeverFailsOverToAReplica(t *testing.T) {
	nodes, user, _ := handedOff(t)
	nodes["c"].server.Close()
	c := testnode.NewClient(t, nodes["b"].url, testnode.Token(t, user))
	path := "/v1/users/" + user + "/collections/c/documents/d"
	if r := c.Do("GET", path, nil, "X-Read-Concern", "local"); r.Status != http.StatusOK {
		t.Fatalf("a local read with the master gone: %d %s; want a copy's answer", r.Status, r.Body)
	}
	for _, p := range []string{path, "/v1/users/" + user + "/collections/c/documents", "/v1/users/" + user + "/collections"} {
		r := c.Do("GET", p, nil, "X-Read-Concern", "linearizable")
		if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
			t.Errorf("a linearizable read of %s with the master gone: %d (Retry-After %q) %s; want 503 with Retry-After", p, r.Status, r.Header.Get("Retry-After"), r.Body)
		}
	}
}

// A replica serves a majority read only of a state it knows to be on a
// majority of copies; knowing nothing, it leaves the read to the master
// (here gone: 503), and a local read still gets its copy.
func TestAReplicaServesMajorityReadsOnlyOfCommittedStates(t *testing.T) {
	nodes, user, _ := handedOff(t)
	nodes["c"].server.Close()
	c := testnode.NewClient(t, nodes["b"].url, testnode.Token(t, user))
	path := "/v1/users/" + user + "/collections/c/documents/d"
	for _, pref := range []string{"local", "nearest", ""} {
		r := c.Do("GET", path, nil, "X-Read-Concern", "majority", "X-Read-Preference", pref)
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("a majority read (preference %q) of a state no copy knows to be majority-held: %d %s; want 503", pref, r.Status, r.Body)
		}
	}
}

// A conditional write refused by the master's state (412, 409, 404) with
// write concern majority is answered only once that state is on a
// majority of copies, as a linearizable read would be: refused at once,
// the refusal could rest on a write that a failover rolls back (a
// compare-and-set refused against version 2, and the next master, which
// never had it, acknowledging another version 2). Here the master
// replicates to no one, so no state is ever majority-held: the refusals
// answer 503 and nothing is written; with write concern 1 they stand.
func TestARefusalWaitsForTheStateItRestsOn(t *testing.T) {
	nodes := threeNodes(t, 3)
	user := "alice"
	p := shard.PartitionOf(user, concernPartitions)
	c := nodes["c"]
	c.put(t, p, user, "d", map[string]any{"v": 1})
	c.put(t, p, user, "d", map[string]any{"v": 2})
	c.assign(p, "c", 2)
	c.leases.set(true, 2, "c")
	cl := testnode.NewClient(t, c.url, testnode.Token(t, user))
	path := "/v1/users/" + user + "/collections/c/documents/"
	cases := []struct {
		method, path string
		body         any
		headers      []string
		refused      int
	}{
		{"PUT", path + "d", `{"v":3}`, []string{"If-Match", `"1"`}, http.StatusPreconditionFailed},
		{"PATCH", path + "d", `{"v":3}`, []string{"If-Match", `"1"`}, http.StatusPreconditionFailed},
		{"DELETE", path + "d", nil, []string{"If-Match", `"1"`}, http.StatusPreconditionFailed},
		{"POST", path, `{"_id":"d","v":3}`, nil, http.StatusConflict},
		{"DELETE", path + "absent", nil, nil, http.StatusNotFound},
	}
	for _, tc := range cases {
		strong := cl.Do(tc.method, tc.path, tc.body, append([]string{"X-Write-Concern", "majority"}, tc.headers...)...)
		if strong.Status != http.StatusServiceUnavailable || strong.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s %v with write concern majority, refused by a state on one copy of 3: %d %s; want 503 with Retry-After",
				tc.method, tc.path, tc.headers, strong.Status, strong.Body)
		}
		if weak := cl.Do(tc.method, tc.path, tc.body, tc.headers...); weak.Status != tc.refused {
			t.Errorf("%s %s %v with write concern 1: %d %s; want %d at once", tc.method, tc.path, tc.headers, weak.Status, weak.Body, tc.refused)
		}
	}
	if d, err := c.writer.Get(context.Background(), p, store.DocKey(user, "c", "d")); err != nil || d.Version != 2 {
		t.Fatalf("the document after the refusals: %+v %v; want version 2, untouched", d, err)
	}
}

// A node whose own tenure just ended (its table still names it, its lease
// is gone) holds a copy all the same: a read that asks for this node's
// copy is served from it, not answered 421 as by a node without one.
func TestALapsedMasterStillServesItsOwnCopy(t *testing.T) {
	nodes := threeNodes(t)
	user := "alice"
	p := shard.PartitionOf(user, concernPartitions)
	b := nodes["b"]
	b.put(t, p, user, "d", map[string]any{"v": 1})
	b.assign(p, "b", 1)
	b.leases.set(false, 0, "c")
	cl := testnode.NewClient(t, b.url, testnode.Token(t, user))
	r := cl.Do("GET", "/v1/users/"+user+"/collections/c/documents/d", nil, "X-Read-Preference", "local")
	if r.Status != http.StatusOK || r.JSON(t)["v"] != 1.0 {
		t.Fatalf("a local-preference read on the lapsed master b: %d %s; want its own copy (v 1)", r.Status, r.Body)
	}
}

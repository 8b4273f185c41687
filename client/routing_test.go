package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// userMasteredBy is a user whose partition node masters, and the
// partition.
func userMasteredBy(t *testing.T, c *testcluster.Cluster, node string) (string, int) {
	t.Helper()
	for i := range 10000 {
		u := fmt.Sprintf("user%d", i)
		if p := shard.PartitionOf(u, testcluster.Partitions); c.MasterOf(p) == node {
			return u, p
		}
	}
	t.Fatalf("no user mastered by %s", node)
	return "", 0
}

// served counts the document requests (the routes under
// .../documents) a node answered, by method and status code, from its
// /metrics (shoal_http_requests_total). A request one node forwards to
// another is counted by both.
type served map[string]int // "PUT 201" -> count

func servedBy(t *testing.T, nodeURL string) served {
	t.Helper()
	resp, err := http.Get(nodeURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := served{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "shoal_http_requests_total{") || !strings.Contains(line, `/documents`) {
			continue
		}
		label := func(name string) string {
			_, v, _ := strings.Cut(line, name+`="`)
			v, _, _ = strings.Cut(v, `"`)
			return v
		}
		n, _ := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
		out[label("method")+" "+label("code")] += n
	}
	return out
}

// method sums a method's counts over every status ("" for every method).
func (s served) method(m string) int {
	n := 0
	for k, v := range s {
		if m == "" || strings.HasPrefix(k, m+" ") {
			n += v
		}
	}
	return n
}

// since is the counts of s that came after before.
func (s served) since(before served) served {
	out := served{}
	for k, v := range s {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// countsAt is every node's counts, by node id.
func countsAt(t *testing.T, c *testcluster.Cluster) map[string]served {
	t.Helper()
	out := map[string]served{}
	for _, n := range c.Nodes {
		if !n.Stopped() {
			out[n.ID] = servedBy(t, n.URL())
		}
	}
	return out
}

func sinceAll(now, before map[string]served) map[string]served {
	out := map[string]served{}
	for id, s := range now {
		if d := s.since(before[id]); len(d) > 0 {
			out[id] = d
		}
	}
	return out
}

// documents lists the ids in a collection, read from its master.
func documents(t *testing.T, c *client.Client, user, coll string) []string {
	t.Helper()
	var ids []string
	for d, err := range c.Documents(context.Background(), user, coll, client.Query{}, client.ReadOptions{}) {
		if err != nil {
			t.Fatalf("listing %s: %v", coll, err)
		}
		ids = append(ids, d.ID)
	}
	return ids
}

// A client of three nodes on a real cluster: writes and reads go to the
// partition's master itself, never through another node; a local read
// sent to a node without a copy is answered 421 and follows the master
// it names; a write whose write concern is not confirmed (504: applied on
// the master) is not sent again; and when the master is cut off and
// another node takes the partition, the write that finds the old master
// (503: nothing written) is sent to the new one, and the next writes go
// there straight.
func TestAClientOfSeveralNodesRoutesToTheMaster(t *testing.T) {
	c := testcluster.Start(t, 3)
	user, p := userMasteredBy(t, c, "node2")
	ctx := t.Context()
	cl := client.New(c.Nodes[0].URL(), testnode.Token(t, user), client.WithNodes(c.Nodes[1].URL(), c.Nodes[2].URL()))

	// Writes and reads to the master only: node1, first in the list and
	// the node a client of one node would ask, sees none.
	before := countsAt(t, c)
	for i := range 5 {
		if _, _, err := cl.Put(ctx, user, "notes", fmt.Sprint("d", i), map[string]any{"i": i}, client.WriteOptions{Concern: "majority"}); err != nil {
			t.Fatal(err)
		}
		if d, err := cl.Get(ctx, user, "notes", fmt.Sprint("d", i), client.ReadOptions{Concern: "majority"}); err != nil || d.Version != 1 {
			t.Fatalf("read back: %+v, %v", d, err)
		}
	}
	if got, want := sinceAll(countsAt(t, c), before), map[string]served{"node2": {"PUT 201": 5, "GET 200": 5}}; !equal(got, want) {
		t.Errorf("requests answered %v, want %v (each once, by the master)", got, want)
	}

	// A write through a node that forwards it keeps Prefer: the master's
	// minimal answer comes back through node1.
	one := client.New(c.Nodes[0].URL(), testnode.Token(t, user))
	if d, _, err := one.Put(ctx, user, "notes", "d0", map[string]any{"i": 10}, client.WriteOptions{Minimal: true}); err != nil || d.ID != "d0" || d.Version != 2 || d.Fields != nil {
		t.Fatalf("a forwarded write answered minimally: %+v, %v", d, err)
	}

	// A local read, the first call of a new client whose first node holds
	// no copy: 421, and the read is served by a copy.
	pl := c.Node("node2").Placement(p)
	var noCopy *testcluster.Node
	for _, n := range c.Nodes {
		if !slices.Contains(pl.Responsible, n.ID) {
			noCopy = n
		}
	}
	if noCopy == nil {
		t.Fatalf("every node holds a copy: %v", pl.Responsible)
	}
	_, err := client.New(noCopy.URL(), testnode.Token(t, user)).Get(ctx, user, "notes", "d0", client.ReadOptions{Preference: "local"})
	var he *client.HTTPError
	if !errors.As(err, &he) || !errors.Is(err, client.ErrMisdirected) || he.Master != "node2" || he.Epoch != pl.Epoch || he.ServedBy != noCopy.ID {
		t.Fatalf("a client of one node reading locally where there is no copy: %v (%+v), want a 421 naming node2 at epoch %d", err, he, pl.Epoch)
	}
	var others []string
	for _, n := range c.Nodes {
		if n != noCopy {
			others = append(others, n.URL())
		}
	}
	local := client.New(noCopy.URL(), testnode.Token(t, user), client.WithNodes(others...))
	before = countsAt(t, c)
	if d, err := local.Get(ctx, user, "notes", "d1", client.ReadOptions{Preference: "local"}); err != nil || d.Fields["i"] != json.Number("1") {
		t.Fatalf("local read: %+v, %v", d, err)
	}
	got := sinceAll(countsAt(t, c), before)
	if got[noCopy.ID]["GET 421"] != 1 || len(got[noCopy.ID]) != 1 {
		t.Errorf("%s answered %v, want one 421", noCopy.ID, got[noCopy.ID])
	}
	servedLocally := 0
	for _, id := range pl.Responsible {
		servedLocally += got[id]["GET 200"]
	}
	if servedLocally != 1 {
		t.Errorf("requests answered %v: want one 200 from a copy (%v)", got, pl.Responsible)
	}
	// The next local read goes to a copy at once.
	before = countsAt(t, c)
	if _, err := local.Get(ctx, user, "notes", "d1", client.ReadOptions{Preference: "local"}); err != nil {
		t.Fatal(err)
	}
	if got := sinceAll(countsAt(t, c), before); got[noCopy.ID] != nil {
		t.Errorf("the second local read reached %s again: %v", noCopy.ID, got)
	}

	// A write concern not confirmed in time: 504, the write is on the
	// master, and it is not sent again (a POST without _id would create a
	// second document).
	replica := pl.Responsible[1]
	c.Faults.CutCalls("node2", replica)
	before = countsAt(t, c)
	_, err = cl.Create(ctx, user, "once", map[string]any{"title": "once"}, client.WriteOptions{Concern: "majority", Timeout: 300 * time.Millisecond})
	c.Faults.HealAll()
	if !errors.As(err, &he) || he.StatusCode != 504 || he.Problem == nil || he.Problem.Type != api.TypeTimeout ||
		!errors.Is(err, client.ErrTimeout) || !errors.Is(err, client.ErrOutcomeUnknown) {
		t.Fatalf("a majority write with its replica cut off: %v, want a 504 whose outcome is unknown", err)
	}
	if got, want := sinceAll(countsAt(t, c), before), map[string]served{"node2": {"POST 504": 1}}; !equal(got, want) {
		t.Errorf("requests answered %v, want %v: sent once", got, want)
	}
	if ids := documents(t, cl, user, "once"); len(ids) != 1 {
		t.Errorf("documents created: %v, want exactly the one", ids)
	}

	// The master cut off from the cluster (clients still reach it): once
	// another node holds the partition, a write to the old master answers
	// 503 (it knows no master it can reach; nothing is written), and the
	// client looks the placement up elsewhere and writes to the new one.
	c.Faults.Isolate("node2", c.IDs())
	var standIn string
	testnode.Eventually(t, 30*time.Second, "a stand-in master known to the other nodes", func() (bool, string) {
		standIn = c.MasterOf(p)
		if standIn == "" || standIn == "node2" {
			return false, "master " + standIn
		}
		for _, n := range c.Nodes {
			if n.ID != "node2" && n.Placement(p).Master != standIn {
				return false, n.ID + " knows " + n.Placement(p).Master
			}
		}
		return true, ""
	})
	before = countsAt(t, c)
	if _, _, err := cl.Put(ctx, user, "notes", "after", map[string]any{"i": 1}, client.WriteOptions{}); err != nil {
		t.Fatalf("a write after the master changed: %v", err)
	}
	got = sinceAll(countsAt(t, c), before)
	if got["node2"]["PUT 503"] != 1 || got["node2"].method("PUT") != 1 || got[standIn]["PUT 201"] != 1 || got[standIn].method("PUT") != 1 {
		t.Errorf("requests answered %v: want one 503 from node2, then one 201 from %s", got, standIn)
	}
	before = countsAt(t, c)
	for i := range 3 {
		if _, _, err := cl.Put(ctx, user, "notes", fmt.Sprint("later", i), map[string]any{"i": i}, client.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sinceAll(countsAt(t, c), before), map[string]served{standIn: {"PUT 201": 3}}; !equal(got, want) {
		t.Errorf("requests answered %v, want %v: to the new master straight", got, want)
	}
	c.Faults.HealAll()
}

func equal(a, b map[string]served) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for kk, vv := range v {
			if w[kk] != vv {
				return false
			}
		}
	}
	return true
}

// A stopped node is passed over: a new client whose first node is down
// reads and writes through the others, and when the master stops, a
// write to it (refused: never sent, so safe to send again even as a POST
// without _id) goes to the partition's next master once there is one,
// and is applied once.
func TestAClientOfSeveralNodesSkipsAStoppedNode(t *testing.T) {
	c := testcluster.Start(t, 3)
	user, p := userMasteredBy(t, c, "node1")
	tok := testnode.Token(t, user)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Every POST try: where it went, and what came of it.
	var mu sync.Mutex
	var tries []string
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if r.Method == "POST" {
			what := fmt.Sprint(err)
			if err == nil {
				what = resp.Status
			}
			mu.Lock()
			tries = append(tries, "http://"+r.URL.Host+" "+what)
			mu.Unlock()
		}
		return resp, err
	})}
	cl := client.New(c.Nodes[0].URL(), tok, client.WithNodes(c.Nodes[1].URL(), c.Nodes[2].URL()), client.WithHTTPClient(hc),
		client.WithRetry(client.Retry{Attempts: 30, MaxBackoff: 500 * time.Millisecond}))
	if _, err := cl.Create(ctx, user, "notes", map[string]any{"_id": "first"}, client.WriteOptions{Concern: "majority"}); err != nil {
		t.Fatal(err)
	}

	c.Nodes[0].Stop()
	mu.Lock()
	tries = nil
	mu.Unlock()
	if _, err := cl.Create(ctx, user, "notes", map[string]any{"n": 2}, client.WriteOptions{Concern: "majority"}); err != nil {
		t.Fatalf("a write while its master is stopped: %v", err)
	}
	mu.Lock()
	t.Logf("the POST's tries: %q", tries)
	// The first try goes to the stopped master and is refused; each try
	// but the last failed before anything was written (refused, or 503
	// unavailable); the last is applied.
	if len(tries) < 2 || !strings.HasPrefix(tries[0], c.Nodes[0].URL()+" ") || !strings.Contains(tries[0], "connection refused") ||
		!strings.HasSuffix(tries[len(tries)-1], " 201 Created") {
		t.Errorf("tries %q: want the stopped master refused first, a 201 last", tries)
	}
	for _, try := range tries[:len(tries)-1] {
		if !strings.Contains(try, "connection refused") && !strings.HasSuffix(try, " 503 Service Unavailable") {
			t.Errorf("try %q: a write sent again after it", try)
		}
	}
	mu.Unlock()
	master := c.MasterOf(p)
	if master == "" || master == "node1" {
		t.Fatalf("master %q after node1 stopped", master)
	}
	if ids := documents(t, cl, user, "notes"); len(ids) != 2 || !slices.Contains(ids, "first") {
		t.Errorf("documents %v: want first and the one created once", ids)
	}
	before := countsAt(t, c)
	if _, err := cl.Get(ctx, user, "notes", "first", client.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := sinceAll(countsAt(t, c), before), map[string]served{master: {"GET 200": 1}}; !equal(got, want) {
		t.Errorf("requests answered %v, want %v: to the new master straight", got, want)
	}

	// A new client, its first node stopped: every call goes through.
	fresh := client.New(c.Nodes[0].URL(), tok, client.WithNodes(c.Nodes[1].URL(), c.Nodes[2].URL()))
	for _, pref := range []string{"", "nearest", "local"} {
		if _, err := fresh.Get(ctx, user, "notes", "first", client.ReadOptions{Preference: pref}); err != nil {
			t.Errorf("read (preference %q) by a client whose first node is stopped: %v", pref, err)
		}
	}
	if _, _, err := fresh.Put(ctx, user, "notes", "second", map[string]any{}, client.WriteOptions{}); err != nil {
		t.Errorf("write by a client whose first node is stopped: %v", err)
	}
}

// front is a loopback proxy in front of a node, one connection per
// request. With drop set it passes a POST on and closes the client's
// connection as the node's answer begins: the node has the write, the
// client no answer. Close makes it refuse connections.
type front struct {
	l     net.Listener
	drop  atomic.Bool
	posts atomic.Int32
	wg    sync.WaitGroup
}

func newFront(t *testing.T, target string) *front {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{l: l}
	addr := strings.TrimPrefix(target, "http://")
	f.wg.Go(func() {
		for {
			cc, err := l.Accept()
			if err != nil {
				return
			}
			f.wg.Go(func() { f.pass(cc, addr) })
		}
	})
	t.Cleanup(func() { l.Close(); f.wg.Wait() })
	return f
}

func (f *front) URL() string { return "http://" + f.l.Addr().String() }

func (f *front) pass(cc net.Conn, addr string) {
	defer cc.Close()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	br := bufio.NewReader(cc)
	first, _ := br.Peek(5)
	post := string(first) == "POST "
	if post {
		f.posts.Add(1)
	}
	go io.Copy(up, br)
	if post && f.drop.Load() {
		io.ReadFull(up, make([]byte, 1)) // the answer begins: the write is done
		return
	}
	io.Copy(cc, up)
}

// A write whose connection broke after it was sent is not sent again,
// though another node could take it: its outcome is unknown. A write
// whose connection was refused is sent again (to another node), and is
// applied once.
func TestAWriteIsSentAgainOnlyWhenItWasNotSent(t *testing.T) {
	n := testnode.StartNew(t)
	tok := testnode.Token(t, "alice")
	ctx := t.Context()
	var mu sync.Mutex
	var posts []string // the nodes each POST was sent to
	tr := &http.Transport{DisableKeepAlives: true}
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method == "POST" {
			mu.Lock()
			posts = append(posts, "http://"+r.URL.Host)
			mu.Unlock()
		}
		return tr.RoundTrip(r)
	})}
	sentTo := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := posts
		posts = nil
		return out
	}

	// A front that answers as the node, first in the list: the client
	// learns it, then it refuses connections. The write's dial is refused,
	// nothing was sent, and the client sends it to the node by its other
	// URL, once.
	f := newFront(t, n.URL())
	cl := client.New(f.URL(), tok, client.WithNodes(n.URL()), client.WithHTTPClient(hc))
	if _, err := cl.Collections(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	f.l.Close()
	before := servedBy(t, n.URL())
	d, err := cl.Create(ctx, "alice", "notes", map[string]any{"title": "first"}, client.WriteOptions{})
	if err != nil || d.Version != 1 {
		t.Fatalf("a write whose first node refuses connections: %+v, %v", d, err)
	}
	if got := sentTo(); !slices.Equal(got, []string{f.URL(), n.URL()}) {
		t.Errorf("the POST was sent to %v, want the front, then the node", got)
	}
	if got := servedBy(t, n.URL()).since(before); got["POST 201"] != 1 || got.method("POST") != 1 {
		t.Errorf("the node answered %v, want one 201", got)
	}
	// A client of one node does not try again: the refused dial is
	// http.Client's error as it is.
	_, err = client.New(f.URL(), tok).Create(ctx, "alice", "notes", map[string]any{}, client.WriteOptions{})
	if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, client.ErrOutcomeUnknown) {
		t.Errorf("a refused write to a client of one node: %v", err)
	}

	// A front that cuts the answer off: the node applied the write, the
	// client does not know it, and does not send it again though it knows
	// another way to the node.
	f = newFront(t, n.URL())
	cl = client.New(f.URL(), tok, client.WithNodes(n.URL()), client.WithHTTPClient(hc))
	if _, err := cl.Collections(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	f.drop.Store(true)
	before = servedBy(t, n.URL())
	_, err = cl.Create(ctx, "alice", "notes", map[string]any{"title": "second"}, client.WriteOptions{})
	var ue *client.UnansweredError
	if !errors.As(err, &ue) || !errors.Is(err, client.ErrOutcomeUnknown) || ue.NodeURL != f.URL() || ue.Method != "POST" {
		t.Fatalf("a write whose answer was cut off: %v, want an *UnansweredError", err)
	}
	if got := sentTo(); !slices.Equal(got, []string{f.URL()}) || f.posts.Load() != 1 {
		t.Errorf("the POST was sent to %v (the front passed %d): want once, to the front", got, f.posts.Load())
	}
	if got := servedBy(t, n.URL()).since(before); got["POST 201"] != 1 || got.method("POST") != 1 {
		t.Errorf("the node answered %v, want one 201", got)
	}
	if ids := documents(t, client.New(n.URL(), tok), "alice", "notes"); len(ids) != 2 {
		t.Errorf("documents %v, want the two, each once", ids)
	}
}

// placementLookups is how many placement lookups (GET
// /v1/users/{user}/placement and GET /v1/placement) the cluster's nodes
// answered, from their /metrics.
func placementLookups(t *testing.T, c *testcluster.Cluster) int {
	t.Helper()
	n := 0
	for _, node := range c.Nodes {
		resp, err := http.Get(node.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "shoal_http_requests_total{") && (strings.Contains(line, `route="/v1/users/{user}/placement"`) || strings.Contains(line, `route="/v1/placement"`)) {
				v, _ := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
				n += v
			}
		}
		resp.Body.Close()
	}
	return n
}

// A client writing as many users (a service with an admin token) learns
// every partition's placement at once (GET /v1/placement) and works out
// each user's partition itself: a few lookups in all, however many users.
// Each user's first write cost a lookup before, and past 4,096 users
// every write did (the client forgot them all and learnt again).
func TestAClientOfManyUsersLearnsEveryPartitionAtOnce(t *testing.T) {
	c := testcluster.Start(t, 3)
	ctx := t.Context()
	cl := client.New(c.Nodes[0].URL(), testnode.AdminToken(t), client.WithNodes(c.Nodes[1].URL(), c.Nodes[2].URL()))
	before := placementLookups(t, c)
	const users = 600
	for i := range users {
		if _, _, err := cl.Put(ctx, fmt.Sprint("many", i), "notes", "d", map[string]any{"i": i}, client.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The table, then a lookup for a user whose master's URL the client
	// has not learnt the id of yet (one per node at most), and one for
	// each call that failed (a lease that lapsed under load): a few,
	// where the client before looked each user up.
	most := testcluster.Partitions / 2
	if n := placementLookups(t, c) - before; n == 0 || n > most {
		t.Errorf("%d placement lookups for %d users in %d partitions, want at most %d", n, users, testcluster.Partitions, most)
	}
}

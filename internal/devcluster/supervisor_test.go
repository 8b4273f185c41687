package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
)

// These tests run the supervisor against fake processes: a fake node
// listens on its HTTP_ADDR and answers /readyz, and ends when it is told
// to (or when the test makes it crash). The real processes are tested in
// cmd/shoal.

// watchedOutput collects what the supervisor prints and lets a test wait
// for a line without polling.
type watchedOutput struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newWatchedOutput() *watchedOutput { return &watchedOutput{changed: make(chan struct{})} }

func (o *watchedOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
	return o.buf.Write(p)
}

func (o *watchedOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitFor waits until the output holds want.
func (o *watchedOutput) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		o.mu.Lock()
		found, changed := strings.Contains(o.buf.String(), want), o.changed
		o.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no %q in the output:\n%s", want, o.String())
		}
	}
}

// fakeNode says how a fake node behaves.
type fakeNode struct {
	startErr   error    // Start fails with it
	print      []string // lines it prints as it starts
	exitAtOnce *Exit    // it ends as soon as it started, never ready
	notReady   bool     // /readyz answers 503
	noWrites   bool     // a write answers 503
	ignoreTerm bool     // SIGTERM does not stop it
}

// fakeStarter starts fakeProcesses.
type fakeStarter struct {
	t     *testing.T
	nodes map[string]fakeNode // by id; a missing id behaves well

	mu      sync.Mutex
	started []*fakeProcess // in order
}

func (f *fakeStarter) Start(spec ProcessSpec) (Process, error) {
	b := f.nodes[spec.ID]
	if b.startErr != nil {
		return nil, b.startErr
	}
	f.mu.Lock()
	p := &fakeProcess{spec: spec, pid: 1000 + len(f.started), ignoreTerm: b.ignoreTerm,
		exit: make(chan Exit, 1), served: make(chan struct{})}
	f.started = append(f.started, p)
	f.mu.Unlock()
	for _, l := range b.print {
		fmt.Fprintln(spec.Stdout, l)
	}
	if b.exitAtOnce != nil {
		close(p.served)
		p.end(*b.exitAtOnce)
		return p, nil
	}
	l, err := net.Listen("tcp", envValue(spec.Env, "HTTP_ADDR"))
	if err != nil {
		f.t.Errorf("fake %s cannot listen: %v", spec.ID, err)
		close(p.served)
		p.end(Exit{Code: 1, Text: "exit status 1"})
		return p, nil
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe := "/v1/users/shoal-dev-probe/collections/probe/documents/" + spec.ID
		switch {
		case r.URL.Path == "/readyz" && !b.notReady:
		case r.URL.Path == probe && !b.noWrites && r.Method == http.MethodPut:
			p.probes.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"_id":%q,"_version":1}`, spec.ID)
		case r.URL.Path == probe && !b.noWrites && r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type":"urn:shoal:problem:unavailable","title":"Service unavailable","status":503,"detail":"no master yet"}`)
		}
	})}
	go func() { p.srv.Serve(l); close(p.served) }()
	return p, nil
}

// processes returns the processes started for id, in order.
func (f *fakeStarter) processes(id string) []*fakeProcess {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []*fakeProcess
	for _, p := range f.started {
		if p.spec.ID == id {
			ps = append(ps, p)
		}
	}
	return ps
}

// only returns the one process started for id.
func (f *fakeStarter) only(t *testing.T, id string) *fakeProcess {
	t.Helper()
	ps := f.processes(id)
	if len(ps) != 1 {
		t.Fatalf("%d processes started for %s, want 1", len(ps), id)
	}
	return ps[0]
}

func envValue(env []string, key string) string {
	for _, kv := range slices.Backward(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

type fakeProcess struct {
	spec       ProcessSpec
	pid        int
	ignoreTerm bool
	srv        *http.Server  // nil when it never listened
	probes     atomic.Int32  // probe writes it took
	served     chan struct{} // closed when srv stopped serving
	exit       chan Exit     // holds how it ended, once it did

	mu              sync.Mutex
	ended           bool
	terms, kills    int
	terminatedFirst bool // SIGTERM came before any SIGKILL
}

func (p *fakeProcess) Pid() int { return p.pid }

func (p *fakeProcess) Terminate() error {
	p.mu.Lock()
	p.terms++
	if p.kills == 0 {
		p.terminatedFirst = true
	}
	p.mu.Unlock()
	if !p.ignoreTerm {
		p.end(Exit{Code: 0, Text: "exit status 0"})
	}
	return nil
}

func (p *fakeProcess) Kill() error {
	p.mu.Lock()
	p.kills++
	p.mu.Unlock()
	p.end(Exit{Code: -1, Text: "signal: killed"})
	return nil
}

// end makes the process end with e, unless it ended already.
func (p *fakeProcess) end(e Exit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	if p.srv != nil {
		p.srv.Close()
	}
	p.exit <- e
}

func (p *fakeProcess) Wait() Exit {
	e := <-p.exit
	<-p.served
	return e
}

func (p *fakeProcess) signals() (terms, kills int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.terms, p.kills
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func testPeer(t *testing.T, i int) cluster.Peer {
	return cluster.Peer{ID: "node" + strconv.Itoa(i), URL: "http://" + freeAddr(t), Gossip: freeAddr(t),
		Sharding: true, Replica: true, Voter: i <= firstVoters}
}

// supervised is a Supervisor running fake nodes in a test.
type supervised struct {
	t       *testing.T
	s       *Supervisor
	setup   Setup
	starter *fakeStarter
	out     *watchedOutput
	sigs    chan os.Signal
	code    chan int
	asked   *askedNodes
}

// askedNodes answers the supervisor's GET /v1/cluster questions from a map
// the test changes while it runs.
type askedNodes struct {
	mu      sync.Mutex
	answers map[string]*drainAnswers
}

func (a *askedNodes) set(url string, answers ...api.ClusterAnswer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.answers[url] = &drainAnswers{answers: answers}
}

func (a *askedNodes) ask(ctx context.Context, base string) (api.ClusterAnswer, error) {
	a.mu.Lock()
	d := a.answers[base]
	a.mu.Unlock()
	if d == nil {
		return api.ClusterAnswer{}, errors.New("connection refused")
	}
	return d.next()
}

// runFakes runs a supervisor over n fake nodes behaving as nodes says;
// tune sets its timeouts before it starts.
func runFakes(t *testing.T, n int, nodes map[string]fakeNode, tune func(*Supervisor)) *supervised {
	t.Helper()
	dir := t.TempDir()
	var list cluster.PeerList
	for i := 1; i <= n; i++ {
		list.Peers = append(list.Peers, testPeer(t, i))
	}
	setup := Setup{Dir: dir, PeersPath: filepath.Join(dir, "peers.json"), List: list, PeersData: FormatPeerList(list),
		Secrets:    Secrets{Auth: "auth-secret-0123456789", Cluster: "cluster-secret-0123456789"},
		AdminToken: "admin-token", UserTokenPath: filepath.Join(dir, "alice.token")}
	if err := os.WriteFile(setup.PeersPath, setup.PeersData, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &supervised{t: t, setup: setup, starter: &fakeStarter{t: t, nodes: nodes}, out: newWatchedOutput(),
		sigs: make(chan os.Signal, 2), code: make(chan int, 1), asked: &askedNodes{answers: map[string]*drainAnswers{}}}
	r.s = NewSupervisor(setup, r.starter, r.asked.ask, r.out)
	r.s.watchInterval = 10 * time.Millisecond
	if tune != nil {
		tune(r.s)
	}
	local, _ := LocalNodes(list)
	go func() { r.code <- r.s.Run(local, r.sigs) }()
	t.Cleanup(func() {
		select {
		case code := <-r.code: // Run ended; put it back for nobody
			r.code <- code
		default:
			r.sigs <- syscall.SIGTERM
			r.sigs <- syscall.SIGTERM // the second one kills every fake
			<-r.code
		}
		if t.Failed() {
			t.Logf("output:\n%s", r.out.String())
		}
	})
	return r
}

// exitCode waits for Run to return.
func (r *supervised) exitCode() int {
	r.t.Helper()
	select {
	case code := <-r.code:
		r.code <- code
		return code
	case <-time.After(30 * time.Second):
		r.t.Fatalf("Run did not return; output:\n%s", r.out.String())
		return 0
	}
}

// stopWith sends sig and returns Run's exit code.
func (r *supervised) stopWith(sig os.Signal) int {
	r.t.Helper()
	r.sigs <- sig
	return r.exitCode()
}

// lineIndex is where a line containing want starts in the output, or -1.
func (r *supervised) lineIndex(want string) int { return strings.Index(r.out.String(), want) }

func (r *supervised) url(i int) string { return r.setup.List.Peers[i-1].URL }

func TestSupervisorStartsEveryNodeAndStopsThemOnASignal(t *testing.T) {
	nodes := map[string]fakeNode{}
	for i := 1; i <= 3; i++ {
		nodes["node"+strconv.Itoa(i)] = fakeNode{print: []string{fmt.Sprintf("hello from node%d", i)}}
	}
	r := runFakes(t, 3, nodes, nil)
	r.out.waitFor(t, "Ctrl-C stops every node.")

	for i, p := range r.setup.List.Peers {
		proc := r.starter.only(t, p.ID)
		spec := proc.spec
		dataDir := filepath.Join(r.setup.Dir, p.ID)
		if !slices.Equal(spec.Args, []string{"serve"}) || spec.Dir != dataDir {
			t.Errorf("%s started as %q in %s, want serve in %s", p.ID, spec.Args, spec.Dir, dataDir)
		}
		for k, want := range map[string]string{
			"NODE_ID": p.ID, "HTTP_ADDR": strings.TrimPrefix(p.URL, "http://"), "GOSSIP_ADDR": p.Gossip, "DATA_DIR": dataDir,
			"PEERS_ENDPOINT": r.setup.PeersPath, "PEERS_REFRESH": PeersRefresh, "AUTH_SECRET": r.setup.Secrets.Auth,
			"CLUSTER_SECRET": r.setup.Secrets.Cluster, "TOKEN_AUDIENCE": "shoal", "TOKEN_MAX_TTL": "720h0m0s", "LOG_LEVEL": "info",
		} {
			if got := envValue(spec.Env, k); got != want {
				t.Errorf("%s's %s = %q, want %q", p.ID, k, got, want)
			}
		}
		if proc.probes.Load() == 0 {
			t.Errorf("the banner came before a probe write through %s", p.ID)
		}
		if got := readTrim(t, filepath.Join(r.setup.Dir, p.ID+".pid")); got != strconv.Itoa(proc.pid) {
			t.Errorf("%s.pid holds %q, want %d", p.ID, got, proc.pid)
		}
		if want := fmt.Sprintf("%s | hello from node%d\n", p.ID, i+1); !strings.Contains(r.out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
		if want := fmt.Sprintf("  %s  %s  gossip %s  roles S R V  data %s\n", p.ID, p.URL, p.Gossip, dataDir); !strings.Contains(r.out.String(), want) {
			t.Errorf("the banner lacks %q", want)
		}
	}
	if !strings.Contains(r.out.String(), "  admin token: admin-token\n") {
		t.Errorf("the banner does not show the admin token")
	}

	if code := r.stopWith(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	last := -1
	for _, p := range r.setup.List.Peers {
		proc := r.starter.only(t, p.ID)
		if terms, kills := proc.signals(); terms != 1 || kills != 0 {
			t.Errorf("%s got %d SIGTERMs and %d SIGKILLs, want 1 and 0", p.ID, terms, kills)
		}
		i := r.lineIndex(fmt.Sprintf("dev   | stopping %s (SIGTERM to pid %d)", p.ID, proc.pid))
		if i < last {
			t.Errorf("%s was not stopped in id order", p.ID)
		}
		last = i
		if !strings.Contains(r.out.String(), p.ID+" stopped (exit status 0)") {
			t.Errorf("no stop of %s in the output", p.ID)
		}
		if _, err := os.Stat(filepath.Join(r.setup.Dir, p.ID+".pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s.pid left behind: %v", p.ID, err)
		}
	}
	if !strings.Contains(r.out.String(), "dev   | terminated: stopping every node\n") ||
		!strings.HasSuffix(r.out.String(), "dev   | every node stopped cleanly\n") {
		t.Errorf("the stop is not reported")
	}
}

func TestSupervisorReportsANodeThatExitsAndDoesNotRestartIt(t *testing.T) {
	killed := Exit{Code: -1, Text: "signal: killed"}
	for _, tc := range []struct {
		name  string
		exits map[string]Exit
		want  []string
		code  int // after SIGTERM
	}{
		{"killed", map[string]Exit{"node2": killed}, []string{
			"node2 exited unexpectedly (signal: killed); the other nodes keep running and it is not restarted",
			"every node is stopped; not cleanly: node2 (signal: killed)",
		}, 1},
		{"exits 0", map[string]Exit{"node2": {Code: 0, Text: "exit status 0"}}, []string{
			"node2 exited unexpectedly (exit status 0); the other nodes keep running and it is not restarted",
			"every node stopped cleanly",
		}, 0},
		{"every node", map[string]Exit{"node1": killed, "node2": {Code: 2, Text: "exit status 2"}}, []string{
			"node1 exited unexpectedly (signal: killed)",
			"node2 exited unexpectedly (exit status 2)",
			"no node is running any more: press Ctrl-C to quit",
			"every node is stopped; not cleanly: node1 (signal: killed), node2 (exit status 2)",
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFakes(t, 2, nil, nil)
			r.out.waitFor(t, "Ctrl-C stops every node.")
			for _, id := range []string{"node1", "node2"} {
				if e, ok := tc.exits[id]; ok {
					r.starter.only(t, id).end(e)
					r.out.waitFor(t, id+" exited unexpectedly")
				}
			}
			if code := r.stopWith(syscall.SIGTERM); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.out.String(), w) {
					t.Errorf("the output lacks %q", w)
				}
			}
			if len(tc.exits) < 2 && strings.Contains(r.out.String(), "no node is running any more") {
				t.Errorf("says no node runs while node1 does")
			}
			for _, id := range []string{"node1", "node2"} {
				proc := r.starter.only(t, id) // not restarted
				terms, _ := proc.signals()
				if _, exited := tc.exits[id]; exited == (terms != 0) {
					t.Errorf("%s got %d SIGTERMs; a node is sent one exactly when it still runs at the stop", id, terms)
				}
			}
		})
	}
}

func TestSupervisorKillsNodesThatDoNotStop(t *testing.T) {
	t.Run("after the stop timeout", func(t *testing.T) {
		r := runFakes(t, 2, map[string]fakeNode{"node2": {ignoreTerm: true}}, func(s *Supervisor) { s.stopTimeout = 50 * time.Millisecond })
		r.out.waitFor(t, "Ctrl-C stops every node.")
		if code := r.stopWith(os.Interrupt); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		for _, w := range []string{"interrupt: stopping every node", "some nodes did not stop within 50ms: killing them (SIGKILL)",
			"node1 stopped (exit status 0)", "node2 stopped (signal: killed)", "every node is stopped; not cleanly: node2 (signal: killed)"} {
			if !strings.Contains(r.out.String(), w) {
				t.Errorf("the output lacks %q", w)
			}
		}
		p := r.starter.only(t, "node2")
		if terms, kills := p.signals(); terms != 1 || kills != 1 || !p.terminatedFirst {
			t.Errorf("node2 got %d SIGTERMs and %d SIGKILLs (SIGTERM first: %v), want one of each, SIGTERM first", terms, kills, p.terminatedFirst)
		}
	})
	t.Run("on a second signal", func(t *testing.T) {
		r := runFakes(t, 2, map[string]fakeNode{"node2": {ignoreTerm: true}}, func(s *Supervisor) { s.stopTimeout = time.Hour })
		r.out.waitFor(t, "Ctrl-C stops every node.")
		r.sigs <- syscall.SIGTERM
		r.out.waitFor(t, "node1 stopped (exit status 0)")
		if code := r.stopWith(os.Interrupt); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
		for _, w := range []string{"interrupt again: killing every node now (SIGKILL)", "node2 stopped (signal: killed)"} {
			if !strings.Contains(r.out.String(), w) {
				t.Errorf("the output lacks %q", w)
			}
		}
		if _, kills := r.starter.only(t, "node1").signals(); kills != 0 {
			t.Errorf("node1, already stopped, got %d SIGKILLs", kills)
		}
	})
}

func TestSupervisorGivesUpWhenANodeDoesNotComeUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		node2 fakeNode
		tune  func(*Supervisor)
		want  func(r *supervised) []string
	}{
		{"exits before it is ready", fakeNode{print: []string{"opening the store", "cannot open the store"}, exitAtOnce: &Exit{Code: 1, Text: "exit status 1"}}, nil,
			func(r *supervised) []string {
				return []string{
					"dev   | node2 did not come up: it exited before it was ready (exit status 1)\n" +
						"dev   | its last 2 log lines:\n" +
						"dev   |     opening the store\n" +
						"dev   |     cannot open the store\n",
					"every node is stopped; not cleanly: node2 (exit status 1)",
				}
			}},
		{"does not answer /readyz", fakeNode{notReady: true}, func(s *Supervisor) { s.readyTimeout = 300 * time.Millisecond },
			func(r *supervised) []string {
				return []string{
					"dev   | node2 did not come up: it did not answer " + r.url(2) + "/readyz within 300ms\n" +
						"dev   | node2 printed nothing\n",
					"stopping node1 (SIGTERM to pid", "stopping node2 (SIGTERM to pid",
				}
			}},
		{"takes no write", fakeNode{noWrites: true}, func(s *Supervisor) { s.readyTimeout = 300 * time.Millisecond },
			func(r *supervised) []string {
				return []string{"dev   | node2 did not come up: it answered /readyz but took no write within 300ms (the last try: ",
					"no master yet", "stopping node1 (SIGTERM to pid"}
			}},
		{"cannot be started", fakeNode{startErr: errors.New("exec: no such file")}, nil,
			func(r *supervised) []string {
				return []string{"could not start node2: exec: no such file", "stopping node1 (SIGTERM to pid", "node1 stopped (exit status 0)"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runFakes(t, 2, map[string]fakeNode{"node2": tc.node2}, tc.tune)
			if code := r.exitCode(); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			for _, w := range tc.want(r) {
				if !strings.Contains(r.out.String(), w) {
					t.Errorf("the output lacks %q", w)
				}
			}
			for _, w := range []string{"Ctrl-C stops every node.", "every node stopped cleanly"} {
				if strings.Contains(r.out.String(), w) {
					t.Errorf("the output has %q", w)
				}
			}
		})
	}
}

func TestSupervisorFollowsThePeerList(t *testing.T) {
	r := runFakes(t, 2, nil, nil)
	r.out.waitFor(t, "Ctrl-C stops every node.")
	write := func(l cluster.PeerList) {
		t.Helper()
		if err := writePeerList(r.setup.PeersPath, l, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	node1, node2, node3 := r.setup.List.Peers[0], r.setup.List.Peers[1], testPeer(t, 3)

	// An added loopback peer is started; one elsewhere is not.
	far := cluster.Peer{ID: "far", URL: "http://far.example:8080", Gossip: "far.example:7946", Sharding: true}
	write(cluster.PeerList{Peers: []cluster.Peer{node1, node2, node3, far}})
	r.out.waitFor(t, "node3 is ready at "+node3.URL)
	r.out.waitFor(t, "far joined the peer list but is not started here: its url http://far.example:8080 is not on loopback; start it yourself")
	if want := fmt.Sprintf("node3 joined the peer list: starting it (HTTP %s, gossip %s, data %s)",
		strings.TrimPrefix(node3.URL, "http://"), node3.Gossip, filepath.Join(r.setup.Dir, "node3")); !strings.Contains(r.out.String(), want) {
		t.Errorf("the output lacks %q", want)
	}
	if ps := r.starter.processes("far"); len(ps) != 0 {
		t.Errorf("far was started")
	}

	// A changed entry is only reported.
	changed := node1
	changed.Voter = false
	write(cluster.PeerList{Peers: []cluster.Peer{changed, node2, node3, far}})
	r.out.waitFor(t, "node1's entry changed in the peer list (url "+node1.URL+", gossip "+node1.Gossip+"); its process keeps running as it started")

	// A content the nodes' loader refuses is reported once.
	if err := os.WriteFile(r.setup.PeersPath, []byte(`{"peers":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	r.out.waitFor(t, "changed but is not a valid peer list")

	// A removed node keeps running until it holds nothing, then is stopped.
	holding := api.ClusterAnswer{View: cluster.View{Node: "node2"}, Partitions: &api.PartitionSummary{Count: 4, Masters: map[string]int{"node1": 3, "node2": 1}}}
	empty := api.ClusterAnswer{View: cluster.View{Node: "node2"}, Partitions: &api.PartitionSummary{Count: 4, Masters: map[string]int{"node1": 4}}}
	r.asked.set(node2.URL, holding, holding, empty)
	write(cluster.PeerList{Peers: []cluster.Peer{changed, node3, far}})
	r.out.waitFor(t, "node2 left the peer list: it keeps running while it hands its partitions and copies over, and is stopped once it holds nothing")
	r.out.waitFor(t, "node2 drained and was stopped (exit status 0); it does not start again unless it is back in the peer list")
	p2 := r.starter.only(t, "node2")
	if i, j := r.lineIndex("node2 drains: masters 1 partition, holds 0 copies"), r.lineIndex(fmt.Sprintf(
		"node2 drained: it masters no partition and holds no copy; stopping it (SIGTERM to pid %d); its data stays in %s",
		p2.pid, filepath.Join(r.setup.Dir, "node2"))); i < 0 || j < i {
		t.Errorf("the drain's progress and end are not reported in order")
	}
	if n := strings.Count(r.out.String(), "changed but is not a valid peer list"); n != 1 {
		t.Errorf("the invalid peer list was reported %d times, want once", n)
	}

	if code := r.stopWith(syscall.SIGTERM); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if terms, _ := p2.signals(); terms != 1 {
		t.Errorf("node2 got %d SIGTERMs, want 1 (when it drained)", terms)
	}
	if strings.Contains(r.out.String(), "stopping node2") {
		t.Errorf("the stop signalled node2 again after it drained")
	}
	for _, id := range []string{"node1", "node2", "node3"} {
		if n := len(r.starter.processes(id)); n != 1 {
			t.Errorf("%d processes of %s, want 1", n, id)
		}
	}
	if !strings.HasSuffix(r.out.String(), "every node stopped cleanly\n") {
		t.Errorf("no clean stop")
	}
}

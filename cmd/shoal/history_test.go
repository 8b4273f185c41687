package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/testnode"
)

// The history test: a few documents used as registers by several clients
// doing majority puts of unique values, compare-and-sets (If-Match on the
// version a read returned) and reads, through random nodes of a 3-node
// cluster of real `shoal serve` processes at REPLICATION_FACTOR 3, while
// the documents' master is killed (kill -9) and restarted on its data,
// paused (SIGSTOP) for longer than LEASE_TTL and resumed, and each time
// handed its partition back by an orderly handoff. Every document's
// history, with the linearizable reads, must be linearizable (porcupine);
// the same writes with the `local` reads taken in the same run are checked
// too, and porcupine's verdict on them is only logged: `local` may return
// a write that is later rolled back, or a copy that is behind.
//
// SHOAL_HISTORY_LONG=1 runs six rounds of faults instead of two;
// SHOAL_HISTORY_DIR=dir keeps the porcupine visualizations there.
func TestHistoryUnderMasterFaults(t *testing.T) {
	rounds := 2
	if os.Getenv("SHOAL_HISTORY_LONG") == "1" {
		rounds = 6
	}
	began := time.Now()
	nodes, peersFile := startProcClusterWith(t, 3, []string{"REPLICATION_FACTOR=3", "PARTITION_COUNT=8", "STORE_SYNC=normal"})
	token, err := api.MintToken([]byte(procAuthSecret), api.TokenSpec{Admin: true, Audience: config.Defaults().TokenAudience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitStates(t, nodes, token, n.id, cluster.Up, 60*time.Second)
	}
	const user = "registers"
	// Every node names the preferred master as the partition's master,
	// with all three copies: the faults below take its mastership away
	// and the handoff gives it back.
	var victim *procNode
	var pl histPlacement
	testnode.Eventually(t, 60*time.Second, "the preferred master masters the partition on every node, with 3 copies", func() (bool, string) {
		p, why := agreedPlacement(nodes, token, user)
		if why != "" {
			return false, why
		}
		if p.Master != p.PreferredMaster || len(p.Responsible) != 3 {
			return false, fmt.Sprintf("master %s, preferred %s, responsible %v", p.Master, p.PreferredMaster, p.Responsible)
		}
		pl = p
		return true, ""
	})
	for _, n := range nodes {
		if n.id == pl.Master {
			victim = n
		}
	}
	others := slices.DeleteFunc(slices.Clone(nodes), func(n *procNode) bool { return n == victim })
	t.Logf("cluster ready after %s: partition %d of %s mastered by %s at epoch %d", time.Since(began).Round(time.Millisecond), pl.Partition, user, victim.id, pl.Epoch)

	w := newWorkload(nodes, token, user)
	w.round(1)
	w.start(10)
	stopped := false
	stopWorkload := func() {
		if !stopped {
			stopped = true
			w.stop()
		}
	}
	t.Cleanup(stopWorkload) // before the processes are killed (cleanups run last first)
	progress := func(what string, more int) {
		t.Helper()
		from := w.definite()
		testnode.Eventually(t, 30*time.Second, what, func() (bool, string) {
			n := w.definite()
			return n >= from+more, fmt.Sprintf("%d of %d more definite operations", n-from, more)
		})
	}
	progress("the workload running", 200)
	epoch := pl.Epoch
	for round := 1; round <= rounds; round++ {
		if round > 1 {
			w.round(round)
			w.mark(fmt.Sprintf("round %d: documents %s", round, strings.Join(*w.docs.Load(), ", ")))
			progress("the workload on the new documents", 200)
		}
		// kill -9 the master; another node takes over; restarted on its
		// data, the preferred master is handed its partition back.
		handed := handoffsTo(others, victim.id, pl.Partition)
		w.mark(fmt.Sprintf("kill -9 %s", victim.id))
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		victim.cmd.Wait()
		epoch = waitTakeover(t, w, others, token, user, victim.id, epoch)
		progress("writes flowing to the stand-in", 30)
		w.mark("restart " + victim.id)
		victim.start(t, peersFile)
		waitStates(t, nodes, token, victim.id, cluster.Up, 60*time.Second)
		epoch = waitHandback(t, w, nodes, token, user, victim.id, epoch)
		testnode.Eventually(t, 10*time.Second, "an orderly handoff to "+victim.id+" logged", func() (bool, string) {
			return handoffsTo(others, victim.id, pl.Partition) > handed, "no node logged handing partition " + strconv.Itoa(pl.Partition) + " over"
		})
		progress("the workload after the handoff", 100)

		// SIGSTOP the master past LEASE_TTL: another node takes over;
		// resumed, it finds its lease lapsed and gets the partition back
		// by a handoff.
		handed = handoffsTo(others, victim.id, pl.Partition)
		w.mark("SIGSTOP " + victim.id)
		if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		epoch = waitTakeover(t, w, others, token, user, victim.id, epoch)
		progress("writes flowing to the stand-in while the master is paused", 30)
		w.mark("SIGCONT " + victim.id)
		if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		epoch = waitHandback(t, w, nodes, token, user, victim.id, epoch)
		testnode.Eventually(t, 10*time.Second, "an orderly handoff to "+victim.id+" logged", func() (bool, string) {
			return handoffsTo(others, victim.id, pl.Partition) > handed, "no node logged handing partition " + strconv.Itoa(pl.Partition) + " over"
		})
		progress("the workload after the handoff", 100)
	}
	stopWorkload()
	ran := time.Since(w.t0)
	h := w.history()
	t.Logf("workload: %s, %d operations (%s); %d orderly handoffs back to %s", ran.Round(time.Millisecond), len(h.ops), h.counts(), handoffsTo(others, victim.id, pl.Partition), victim.id)
	if h.definiteReads[readLinearizable] == 0 || h.definiteWrites == 0 {
		t.Fatalf("the history has %d definite writes and %d definite linearizable reads: nothing to check", h.definiteWrites, h.definiteReads[readLinearizable])
	}

	checkStart := time.Now()
	res, why, path := h.check(t, readLinearizable)
	t.Logf("with linearizable reads: porcupine says %s in %s", res, time.Since(checkStart).Round(time.Millisecond))
	switch res {
	case porcupine.Illegal:
		t.Errorf("the history with X-Read-Concern: linearizable is not linearizable (visualization: %s):\n%s", path, why)
	case porcupine.Unknown:
		t.Logf("porcupine did not decide within its timeout: no verdict (visualization: %s)", path)
	}
	checkStart = time.Now()
	res, why, path = h.check(t, readLocal)
	t.Logf("with local reads (allowed to fail): porcupine says %s in %s (visualization: %s)", res, time.Since(checkStart).Round(time.Millisecond), path)
	if res == porcupine.Illegal {
		t.Logf("why the local reads are not linearizable:\n%s", why)
	}
	t.Logf("whole test: %s", time.Since(began).Round(time.Millisecond))
}

// histPlacement is what a node's /placement says of the partition.
type histPlacement struct {
	Partition       int      `json:"partition"`
	Master          string   `json:"master"`
	PreferredMaster string   `json:"preferred_master"`
	Epoch           uint64   `json:"epoch"`
	Responsible     []string `json:"responsible"`
}

func histPlacementOf(n *procNode, token, user string) (histPlacement, bool) {
	req, _ := http.NewRequest("GET", n.url()+"/v1/users/"+user+"/placement", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return histPlacement{}, false
	}
	defer resp.Body.Close()
	var v histPlacement
	return v, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil
}

// agreedPlacement is the placement every one of nodes names, or why there
// is none.
func agreedPlacement(nodes []*procNode, token, user string) (histPlacement, string) {
	var first histPlacement
	for i, n := range nodes {
		p, ok := histPlacementOf(n, token, user)
		if !ok {
			return histPlacement{}, n.id + " did not answer"
		}
		if i == 0 {
			first = p
		} else if p.Master != first.Master || p.Epoch != first.Epoch {
			return histPlacement{}, fmt.Sprintf("%s names %s at %d, %s names %s at %d", nodes[0].id, first.Master, first.Epoch, n.id, p.Master, p.Epoch)
		}
	}
	return first, ""
}

// waitTakeover waits until every one of observers names a master other
// than victim at an epoch above epoch, and returns that epoch.
func waitTakeover(t *testing.T, w *workload, observers []*procNode, token, user, victim string, epoch uint64) uint64 {
	t.Helper()
	var p histPlacement
	took := testnode.Eventually(t, procLeaseTTL+20*time.Second, "another master takes over from "+victim, func() (bool, string) {
		var why string
		p, why = agreedPlacement(observers, token, user)
		if why != "" {
			return false, why
		}
		return p.Master != victim && p.Epoch > epoch, fmt.Sprintf("master %s at %d", p.Master, p.Epoch)
	})
	w.mark(fmt.Sprintf("%s took over from %s at epoch %d, %s after the fault", p.Master, victim, p.Epoch, took.Round(time.Millisecond)))
	return p.Epoch
}

// waitHandback waits until every node names victim the master again, at
// an epoch above epoch, and returns that epoch.
func waitHandback(t *testing.T, w *workload, nodes []*procNode, token, user, victim string, epoch uint64) uint64 {
	t.Helper()
	var p histPlacement
	took := testnode.Eventually(t, 60*time.Second, victim+" handed its partition back", func() (bool, string) {
		var why string
		p, why = agreedPlacement(nodes, token, user)
		if why != "" {
			return false, why
		}
		return p.Master == victim && p.Epoch > epoch, fmt.Sprintf("master %s at %d", p.Master, p.Epoch)
	})
	w.mark(fmt.Sprintf("%s master again at epoch %d, after %s", victim, p.Epoch, took.Round(time.Millisecond)))
	return p.Epoch
}

// handoffsTo counts the orderly handoffs of partition to victim that the
// other nodes logged.
func handoffsTo(others []*procNode, victim string, partition int) int {
	n := 0
	for _, o := range others {
		n += strings.Count(o.logs.String(), fmt.Sprintf(`msg="handed partition over" node=%s partition=%d to=%s `, o.id, partition, victim))
	}
	return n
}

// The register model. A document is a register: absent, or a value at a
// version; a put writes the next version, a compare-and-set only when
// its If-Match names the current version, and a read returns the value
// and version or 404.

type opKind int

const (
	opPut opKind = iota
	opCAS
	opRead
)

type readConcern string

const (
	readLinearizable readConcern = "linearizable"
	readLocal        readConcern = "local"
)

type outcome int

const (
	resultDone    outcome = iota // 2xx (or a read's 404)
	resultRefused                // 412: the compare-and-set did not match
	resultUnknown                // timed out, 503, 504, connection lost: may or may not have been applied
)

type regInput struct {
	Doc     string
	Kind    opKind
	Value   string      // put, cas
	Expect  int64       // cas: the If-Match version
	Concern readConcern // read
}

type regOutput struct {
	Outcome outcome
	Found   bool   // read
	Value   string // read
	Version int64  // read; put and cas when done
}

type regState struct {
	Exists  bool
	Value   string
	Version int64
}

// opMeta is an operation's details for the log and the visualization.
type opMeta struct {
	id       int
	client   int
	asked    string // the node the request went to
	servedBy string
	status   int
	err      string
}

func (m *opMeta) String() string {
	s := fmt.Sprintf("op %d, client %d, via %s", m.id, m.client, m.asked)
	if m.servedBy != "" {
		s += ", served by " + m.servedBy
	}
	if m.status != 0 {
		s += fmt.Sprintf(", status %d", m.status)
	}
	if m.err != "" {
		s += ", " + m.err
	}
	return s
}

func stepRegister(st, in, out any) (bool, any) {
	s, i, o := st.(regState), in.(regInput), out.(regOutput)
	switch i.Kind {
	case opRead:
		if !o.Found {
			return !s.Exists, s
		}
		return s.Exists && s.Value == o.Value && s.Version == o.Version, s
	case opPut:
		next := regState{Exists: true, Value: i.Value, Version: s.Version + 1}
		return o.Outcome == resultUnknown || o.Version == next.Version, next
	default: // opCAS
		match := s.Exists && s.Version == i.Expect
		next := regState{Exists: true, Value: i.Value, Version: s.Version + 1}
		switch o.Outcome {
		case resultRefused:
			return !match, s
		case resultDone:
			return match && o.Version == next.Version, next
		default:
			if match {
				return true, next
			}
			return true, s
		}
	}
}

func describeOp(in, out any) string {
	i, o := in.(regInput), out.(regOutput)
	var res string
	switch o.Outcome {
	case resultUnknown:
		res = "unknown"
	case resultRefused:
		res = "412"
	default:
		res = "v" + strconv.FormatInt(o.Version, 10)
	}
	switch i.Kind {
	case opPut:
		return fmt.Sprintf("put(%s, %q) -> %s", i.Doc, i.Value, res)
	case opCAS:
		return fmt.Sprintf("cas(%s, if v%d, %q) -> %s", i.Doc, i.Expect, i.Value, res)
	}
	if !o.Found {
		return fmt.Sprintf("read-%s(%s) -> 404", i.Concern, i.Doc)
	}
	return fmt.Sprintf("read-%s(%s) -> %q v%d", i.Concern, i.Doc, o.Value, o.Version)
}

func describeState(st any) string {
	s := st.(regState)
	if !s.Exists {
		return "absent"
	}
	return fmt.Sprintf("%q v%d", s.Value, s.Version)
}

// registerModel checks each of docs (in this order) as its own partition.
func registerModel(docs []string) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			for _, op := range h {
				d := op.Input.(regInput).Doc
				by[d] = append(by[d], op)
			}
			var out [][]porcupine.Operation
			for _, d := range docs {
				out = append(out, by[d])
			}
			return out
		},
		Init:                      func() any { return regState{} },
		Step:                      stepRegister,
		DescribeOperation:         describeOp,
		DescribeState:             describeState,
		DescribeOperationMetadata: func(m any) string { return m.(*opMeta).String() },
	}
}

// workload runs the clients and records what they did.
type workload struct {
	nodes []*procNode
	token string
	user  string
	// docs are the registers of the current round of faults; every round
	// has its own, so that porcupine checks each round's apart (an unknown
	// write may take effect at any later time, and a long history with
	// many of them is beyond its search).
	docs atomic.Pointer[[]string]
	all  []string // every round's, in order (guarded by mu)
	t0   time.Time

	stopping  atomic.Bool
	wg        sync.WaitGroup
	nDefinite atomic.Int64
	nextID    atomic.Int64

	mu    sync.Mutex
	ops   []porcupine.Operation
	marks []porcupine.Annotation
	notes []string
}

func newWorkload(nodes []*procNode, token, user string) *workload {
	return &workload{nodes: nodes, token: token, user: user, t0: time.Now()}
}

// round makes the clients use new documents from now on.
func (w *workload) round(r int) {
	docs := []string{fmt.Sprintf("a%d", r), fmt.Sprintf("b%d", r), fmt.Sprintf("c%d", r)}
	w.mu.Lock()
	w.all = append(w.all, docs...)
	w.mu.Unlock()
	w.docs.Store(&docs)
}

func (w *workload) now() int64 { return int64(time.Since(w.t0)) }

// mark notes a fault (or the end of one) on the timeline.
func (w *workload) mark(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.marks = append(w.marks, porcupine.Annotation{Tag: "faults", Start: w.now(), Description: what})
	w.notes = append(w.notes, fmt.Sprintf("%8.3fs %s", time.Since(w.t0).Seconds(), what))
}

func (w *workload) definite() int { return int(w.nDefinite.Load()) }

func (w *workload) start(clients int) {
	w.t0 = time.Now()
	for c := 0; c < clients; c++ {
		w.wg.Add(1)
		go w.client(c)
	}
}

func (w *workload) stop() {
	w.stopping.Store(true)
	w.wg.Wait()
}

// Timeouts of one request: a write waits X-Write-Timeout for its copies
// on the master, plus the forwarding; a paused node holds a request until
// the client gives up.
const (
	histWriteTimeout  = 2 * time.Second
	histWriteDeadline = 6 * time.Second
	histReadDeadline  = 4 * time.Second
)

// histClient is one client: it sends one request at a time to a random
// node, avoiding for a while a node that just failed it (as a driver's
// server selection does), so that a paused node does not hold every
// client.
type histClient struct {
	id    int
	rng   *rand.Rand
	hc    *http.Client
	avoid map[string]time.Time
}

// histAvoidFor is how long a client avoids a node that failed it.
const histAvoidFor = 5 * time.Second

func (w *workload) pick(cl *histClient) *procNode {
	var ok []*procNode
	for _, n := range w.nodes {
		if time.Now().After(cl.avoid[n.id]) {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		ok = w.nodes
	}
	return ok[cl.rng.IntN(len(ok))]
}

func (w *workload) client(c int) {
	defer w.wg.Done()
	cl := &histClient{id: c, rng: rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano()))),
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}, avoid: map[string]time.Time{}}
	defer cl.hc.CloseIdleConnections()
	for seq := 0; !w.stopping.Load(); seq++ {
		docs := *w.docs.Load()
		doc := docs[cl.rng.IntN(len(docs))]
		value := fmt.Sprintf("c%d-%d", c, seq)
		switch r := cl.rng.IntN(100); {
		case r < 30:
			w.write(cl, regInput{Doc: doc, Kind: opPut, Value: value})
		case r < 55:
			// Compare-and-set on the version a linearizable read returns.
			if o, ok := w.read(cl, doc, readLinearizable); ok && o.Found {
				w.write(cl, regInput{Doc: doc, Kind: opCAS, Value: value, Expect: o.Version})
			}
		case r < 78:
			w.read(cl, doc, readLinearizable)
		default:
			w.read(cl, doc, readLocal)
		}
	}
}

func (w *workload) record(op porcupine.Operation, definite bool) {
	w.mu.Lock()
	w.ops = append(w.ops, op)
	w.mu.Unlock()
	if definite {
		w.nDefinite.Add(1)
	}
}

func (w *workload) docURL(n *procNode, doc string) string {
	return n.url() + "/v1/users/" + w.user + "/collections/registers/documents/" + doc
}

// write puts in.Value, with If-Match for a compare-and-set, as a majority
// write through a random node. A write refused before it was sent (the
// connection was refused) is not recorded: it was never invoked.
func (w *workload) write(cl *histClient, in regInput) {
	n := w.pick(cl)
	meta := &opMeta{id: int(w.nextID.Add(1)), client: cl.id, asked: n.id}
	body, _ := json.Marshal(map[string]string{"v": in.Value})
	req, _ := http.NewRequest("PUT", w.docURL(n, in.Doc), strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Write-Concern", "majority")
	req.Header.Set("X-Write-Timeout", histWriteTimeout.String())
	if in.Kind == opCAS {
		req.Header.Set("If-Match", strconv.Quote(strconv.FormatInt(in.Expect, 10)))
	}
	call := w.now()
	status, hdr, _, err := w.do(cl, n, req, histWriteDeadline)
	ret := w.now()
	if unsent(err) {
		return
	}
	out := regOutput{Outcome: resultUnknown}
	meta.status = status
	if err != nil {
		meta.err = err.Error()
	} else {
		meta.servedBy = hdr.Get("X-Served-By")
	}
	switch {
	case err != nil:
	case status == 200 || status == 201:
		v, perr := strconv.ParseInt(strings.Trim(hdr.Get("ETag"), `"`), 10, 64)
		if perr != nil {
			meta.err = "no version in the ETag " + hdr.Get("ETag")
			break
		}
		out = regOutput{Outcome: resultDone, Version: v}
	case status == 412 && in.Kind == opCAS:
		out = regOutput{Outcome: resultRefused}
	}
	if out.Outcome == resultUnknown {
		ret = -1 // pending: returns at the end of the history
	}
	w.record(porcupine.Operation{ClientId: cl.id, Input: in, Call: call, Output: out, Return: ret, Metadata: meta}, out.Outcome != resultUnknown)
}

// unsent reports whether err means the request never left: the
// connection could not be made.
func unsent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// read reads doc through a random node; a failed read is not recorded
// (ok false): it returned nothing to check.
func (w *workload) read(cl *histClient, doc string, concern readConcern) (regOutput, bool) {
	n := w.pick(cl)
	meta := &opMeta{id: int(w.nextID.Add(1)), client: cl.id, asked: n.id}
	req, _ := http.NewRequest("GET", w.docURL(n, doc), nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	req.Header.Set("X-Read-Concern", string(concern))
	call := w.now()
	status, hdr, body, err := w.do(cl, n, req, histReadDeadline)
	ret := w.now()
	if err != nil {
		return regOutput{}, false
	}
	meta.status, meta.servedBy = status, hdr.Get("X-Served-By")
	var out regOutput
	switch status {
	case 200:
		var d struct {
			V       string `json:"v"`
			Version int64  `json:"_version"`
		}
		if json.Unmarshal(body, &d) != nil || d.Version == 0 {
			return regOutput{}, false
		}
		out = regOutput{Outcome: resultDone, Found: true, Value: d.V, Version: d.Version}
	case 404:
		var p struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(body, &p) != nil || p.Type != api.TypeNotFound {
			return regOutput{}, false
		}
		out = regOutput{Outcome: resultDone}
	default:
		return regOutput{}, false
	}
	w.record(porcupine.Operation{ClientId: cl.id, Input: regInput{Doc: doc, Kind: opRead, Concern: concern}, Call: call, Output: out, Return: ret, Metadata: meta}, true)
	return out, true
}

// do sends req to n and reads the answer; a node that does not answer is
// avoided for a while.
func (w *workload) do(cl *histClient, n *procNode, req *http.Request, timeout time.Duration) (int, http.Header, []byte, error) {
	cl.hc.Timeout = timeout
	resp, err := cl.hc.Do(req)
	if err != nil {
		cl.avoid[n.id] = time.Now().Add(histAvoidFor)
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.avoid[n.id] = time.Now().Add(histAvoidFor)
		return resp.StatusCode, resp.Header, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}

// recorded is the history once the clients stopped.
type recorded struct {
	docs           []string
	ops            []porcupine.Operation
	marks          []porcupine.Annotation
	notes          []string
	end            int64
	definiteWrites int
	unknownWrites  int
	refused        int
	definiteReads  map[readConcern]int
	unknownWhy     map[string]int // why writes have an unknown outcome
}

func (w *workload) history() *recorded {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &recorded{docs: slices.Clone(w.all), marks: w.marks, notes: w.notes, end: w.now() + 1, definiteReads: map[readConcern]int{}, unknownWhy: map[string]int{}}
	for _, op := range w.ops {
		if op.Return < 0 {
			op.Return = h.end
		}
		h.ops = append(h.ops, op)
		in, out := op.Input.(regInput), op.Output.(regOutput)
		switch {
		case in.Kind == opRead:
			h.definiteReads[in.Concern]++
		case out.Outcome == resultUnknown:
			h.unknownWrites++
			h.unknownWhy[unknownReason(op.Metadata.(*opMeta))]++
		case out.Outcome == resultRefused:
			h.refused++
		default:
			h.definiteWrites++
		}
	}
	return h
}

func (h *recorded) counts() string {
	var why []string
	for k, n := range h.unknownWhy {
		why = append(why, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(why)
	return fmt.Sprintf("%d writes done, %d compare-and-sets refused, %d writes of unknown outcome (%s), %d linearizable and %d local reads",
		h.definiteWrites, h.refused, h.unknownWrites, strings.Join(why, ", "), h.definiteReads[readLinearizable], h.definiteReads[readLocal])
}

// unknownReason classes why a write's outcome is unknown.
func unknownReason(m *opMeta) string {
	switch {
	case strings.Contains(m.err, "Client.Timeout"):
		return "client timeout"
	case m.err != "":
		return "connection lost"
	}
	return strconv.Itoa(m.status)
}

// with is the history of the writes and the reads of one concern.
func (h *recorded) with(concern readConcern) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range h.ops {
		if in := op.Input.(regInput); in.Kind != opRead || in.Concern == concern {
			out = append(out, op)
		}
	}
	return out
}

// check runs porcupine on the writes and the reads of concern, writes the
// visualization and returns the verdict, why it is Illegal, and the
// visualization's path.
func (h *recorded) check(t *testing.T, concern readConcern) (porcupine.CheckResult, string, string) {
	t.Helper()
	model := registerModel(h.docs)
	ops, dropped := reduce(h.with(concern))
	t.Logf("with %s reads: %d operations to check; %d writes of unknown outcome left out as no linearization needs them", concern, len(ops), dropped)
	timeout := 60 * time.Second
	if concern != readLinearizable {
		timeout = 20 * time.Second // informational only
	}
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	info.AddAnnotations(h.marks)
	dir := os.Getenv("SHOAL_HISTORY_DIR")
	if dir == "" && res == porcupine.Illegal && concern == readLinearizable {
		// A failure's evidence outlives the test.
		var err error
		if dir, err = os.MkdirTemp("", "shoal-history-"); err != nil {
			t.Fatal(err)
		}
	}
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("history-%s.html", concern))
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		t.Errorf("writing the visualization: %v", err)
	}
	if res != porcupine.Illegal {
		return res, "", path
	}
	var why []string
	why = append(why, "faults:\n"+strings.Join(h.notes, "\n"))
	partials := info.PartialLinearizationsOperations()
	for p, doc := range h.docs {
		if line := blockingOp(model, doc, model.Partition(ops)[p], partials[p]); line != "" {
			why = append(why, line)
		}
	}
	why = append(why, anomalies(ops)...)
	return res, strings.Join(why, "\n"), path
}

// blockingOp says where porcupine's longest linearization of doc's history
// stops: the state reached and the operation that cannot follow it.
func blockingOp(model porcupine.Model, doc string, ops []porcupine.Operation, partials [][]porcupine.Operation) string {
	var longest []porcupine.Operation
	for _, l := range partials {
		if len(l) > len(longest) {
			longest = l
		}
	}
	if len(longest) == len(ops) {
		return "" // this document's history is linearizable
	}
	in := map[int]bool{}
	var st any = regState{}
	for _, op := range longest {
		in[op.Metadata.(*opMeta).id] = true
		_, st = stepRegister(st, op.Input, op.Output)
	}
	var rest []porcupine.Operation
	for _, op := range ops {
		if !in[op.Metadata.(*opMeta).id] {
			rest = append(rest, op)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Return < rest[j].Return })
	first := rest[0]
	var tail []string
	for _, op := range longest[max(0, len(longest)-5):] {
		tail = append(tail, fmt.Sprintf("    %s [%s, %.3fs..%.3fs]", describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return)))
	}
	return fmt.Sprintf("document %s: porcupine linearizes at most %d of its %d operations; the longest ends with\n%s\n  in state %s, and cannot place next\n    %s [%s, %.3fs..%.3fs]",
		doc, len(longest), len(ops), strings.Join(tail, "\n"), describeState(st), describeOp(first.Input, first.Output), first.Metadata, secs(first.Call), secs(first.Return))
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// anomalies names, in the register's terms, reads and writes that no
// linearization can explain: a read older than a write acknowledged
// before it began, a read of a state another acknowledged write
// contradicts (rolled back), and two acknowledged writes at one version.
func anomalies(ops []porcupine.Operation) []string {
	const most = 8
	type write struct {
		op      porcupine.Operation
		version int64
	}
	acked := map[string][]write{}               // doc -> writes done
	byValue := map[string]porcupine.Operation{} // value -> the write of it
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind == opRead {
			continue
		}
		byValue[in.Value] = op
		if out.Outcome == resultDone {
			acked[in.Doc] = append(acked[in.Doc], write{op, out.Version})
		}
	}
	var stale, rolledBack, twice, dirtyRefusal []string
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if in.Kind == opCAS && out.Outcome == resultRefused {
			// Its If-Match came from a read that returned in.Expect before
			// it began, so the version was past in.Expect when it was
			// refused: a later read of in.Expect, or a later write made
			// version in.Expect+1, went back in time.
			for _, r := range ops {
				ri, ro := r.Input.(regInput), r.Output.(regOutput)
				later := ri.Doc == in.Doc && ro.Outcome == resultDone && r.Call > op.Return
				if later && (ri.Kind == opRead && ro.Found && ro.Version == in.Expect || ri.Kind != opRead && ro.Version == in.Expect+1) {
					dirtyRefusal = append(dirtyRefusal, fmt.Sprintf("  %s [%s, %.3fs..%.3fs], yet later %s [%s, %.3fs..%.3fs]",
						describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return), describeOp(r.Input, r.Output), r.Metadata, secs(r.Call), secs(r.Return)))
					break
				}
			}
		}
		if in.Kind != opRead {
			continue
		}
		for _, w := range acked[in.Doc] {
			if w.op.Return < op.Call && (!out.Found || w.version > out.Version) {
				stale = append(stale, fmt.Sprintf("  %s [%s, %.3fs..%.3fs] began after %s [%s] was acknowledged at %.3fs",
					describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), secs(op.Return), describeOp(w.op.Input, w.op.Output), w.op.Metadata, secs(w.op.Return)))
				break
			}
		}
		if !out.Found {
			continue
		}
		for _, w := range acked[in.Doc] {
			if w.version == out.Version && w.op.Input.(regInput).Value != out.Value {
				src := byValue[out.Value]
				rolledBack = append(rolledBack, fmt.Sprintf("  %s [%s, %.3fs] read the write %s [%s], but version %d is %s [%s]: the state read was rolled back",
					describeOp(op.Input, op.Output), op.Metadata, secs(op.Call), describeOp(src.Input, src.Output), src.Metadata, out.Version, describeOp(w.op.Input, w.op.Output), w.op.Metadata))
				break
			}
		}
	}
	for doc, ws := range acked {
		seen := map[int64]write{}
		for _, w := range ws {
			if o, ok := seen[w.version]; ok {
				twice = append(twice, fmt.Sprintf("  %s: %s [%s] and %s [%s] were both acknowledged at version %d",
					doc, describeOp(o.op.Input, o.op.Output), o.op.Metadata, describeOp(w.op.Input, w.op.Output), w.op.Metadata, w.version))
			}
			seen[w.version] = w
		}
	}
	var out []string
	for _, k := range []struct {
		what  string
		lines []string
	}{{"stale reads (older than an acknowledged write that returned before the read began)", stale},
		{"reads of rolled-back states", rolledBack}, {"acknowledged writes sharing a version", twice},
		{"compare-and-sets refused (412) on a version a later read still returned, or that a later write followed: the refusal compared against a state that did not last", dirtyRefusal}} {
		if len(k.lines) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s, e.g.:", len(k.lines), k.what))
		out = append(out, k.lines[:min(most, len(k.lines))]...)
	}
	return out
}

// reduce drops from a history the writes of unknown outcome that no
// linearization needs, which porcupine would otherwise try in every order
// (unknown writes are interchangeable version bumpers to it, and a few
// dozen of them make the search explode). A document's unknown write W
// goes when
//   - no operation observed its value (no read returned it), and
//   - it was invoked after every gap in the observed versions was closed:
//     let Mv be the highest version a read or an acknowledged write
//     observed, g the highest version below Mv that no operation observed
//     (if any); W was invoked after some operation observing a version
//     above g returned; and
//   - no refused compare-and-set names a version >= Mv.
//
// Then H is linearizable iff H without W is: W's return is at the end of
// the history, so a linearization without it takes W last. Conversely, in
// a linearization of H where W takes effect, at version v: if v <= Mv, v
// is observed (by an operation that must come after W and would see W's
// value) or a gap (but W would have been invoked after an operation that
// observed a later version returned): neither can be; so v > Mv, and after
// W come only refused compare-and-sets (each names a version below
// Mv, which the state without W still differs from) and unknown writes,
// which can go last. So the rest is a linearization without W.
func reduce(ops []porcupine.Operation) ([]porcupine.Operation, int) {
	type docInfo struct {
		name     string
		observed map[int64]bool  // versions some operation observed
		values   map[string]bool // values some operation observed
		mv       int64
		keepAll  bool
		closedAt int64 // when the last gap below mv was closed
	}
	docs := map[string]*docInfo{}
	get := func(d string) *docInfo {
		if docs[d] == nil {
			docs[d] = &docInfo{name: d, observed: map[int64]bool{}, values: map[string]bool{}}
		}
		return docs[d]
	}
	observes := func(op porcupine.Operation) (int64, string, bool) {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		switch {
		case in.Kind == opRead && out.Found:
			return out.Version, out.Value, true
		case in.Kind != opRead && out.Outcome == resultDone:
			return out.Version, in.Value, true
		}
		return 0, "", false
	}
	for _, op := range ops {
		if v, val, ok := observes(op); ok {
			d := get(op.Input.(regInput).Doc)
			d.observed[v], d.values[val] = true, true
			d.mv = max(d.mv, v)
		}
	}
	for _, op := range ops {
		in, out := op.Input.(regInput), op.Output.(regOutput)
		if d := get(in.Doc); in.Kind == opCAS && out.Outcome == resultRefused && in.Expect >= d.mv {
			d.keepAll = true
		}
	}
	for _, d := range docs {
		var gap int64
		for v := d.mv - 1; v >= 1; v-- {
			if !d.observed[v] {
				gap = v
				break
			}
		}
		d.closedAt = -1
		if gap > 0 {
			d.closedAt = int64(^uint64(0) >> 1)
			for _, op := range ops {
				if v, _, ok := observes(op); ok && op.Input.(regInput).Doc == d.name && v > gap {
					d.closedAt = min(d.closedAt, op.Return)
				}
			}
		}
	}
	var out []porcupine.Operation
	dropped := 0
	for _, op := range ops {
		in, o := op.Input.(regInput), op.Output.(regOutput)
		if d := docs[in.Doc]; in.Kind != opRead && o.Outcome == resultUnknown && !d.keepAll && !d.values[in.Value] && op.Call > d.closedAt {
			dropped++
			continue
		}
		out = append(out, op)
	}
	return out, dropped
}

// The checker of the history test, on small histories whose verdicts are
// known: porcupine with the register model, reduce and anomalies.
func TestRegisterHistoryChecker(t *testing.T) {
	const end = 100
	id := 0
	op := func(call, ret int64, in regInput, out regOutput) porcupine.Operation {
		id++
		return porcupine.Operation{ClientId: id % 3, Input: in, Call: call, Output: out, Return: ret, Metadata: &opMeta{id: id, asked: "n"}}
	}
	put := func(call, ret int64, v string, version int64) porcupine.Operation {
		if version == 0 {
			return op(call, end, regInput{Doc: "a", Kind: opPut, Value: v}, regOutput{Outcome: resultUnknown})
		}
		return op(call, ret, regInput{Doc: "a", Kind: opPut, Value: v}, regOutput{Outcome: resultDone, Version: version})
	}
	read := func(call, ret int64, v string, version int64) porcupine.Operation {
		return op(call, ret, regInput{Doc: "a", Kind: opRead, Concern: readLinearizable}, regOutput{Outcome: resultDone, Found: v != "", Value: v, Version: version})
	}
	refused := func(call, ret int64, expect int64) porcupine.Operation {
		return op(call, ret, regInput{Doc: "a", Kind: opCAS, Value: fmt.Sprint("cas", call), Expect: expect}, regOutput{Outcome: resultRefused})
	}
	for _, c := range []struct {
		name    string
		ops     []porcupine.Operation
		want    porcupine.CheckResult
		dropped int
		anomaly string
	}{
		{"a read sees the last acknowledged write", []porcupine.Operation{read(0, 1, "", 0), put(2, 3, "x", 1), read(4, 5, "x", 1)}, porcupine.Ok, 0, ""},
		{"a stale read", []porcupine.Operation{put(0, 1, "x", 1), put(2, 3, "y", 2), read(4, 5, "x", 1)}, porcupine.Illegal, 0, "stale reads"},
		{"an unknown write that took effect", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "y", 2)}, porcupine.Ok, 0, ""},
		{"an unknown write nobody saw is left out", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "x", 1), read(5, 6, "x", 1)}, porcupine.Ok, 1, ""},
		// v2 is nobody's but the unknown write's: it must stay.
		{"an unknown write filling a gap is kept", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), put(3, 4, "z", 3), read(5, 6, "z", 3)}, porcupine.Ok, 0, ""},
		{"a read of a rolled-back write", []porcupine.Operation{put(0, 1, "x", 1), put(2, 0, "y", 0), read(3, 4, "y", 2), put(5, 6, "z", 2)}, porcupine.Illegal, 0, "rolled-back"},
		// Refused against the unknown write, which a later read shows
		// never took effect.
		{"a refusal on a state that did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), refused(4, 5, 1), read(6, 7, "x", 1)}, porcupine.Illegal, 0, "refused (412)"},
		{"a refusal on a state a later write shows did not last", []porcupine.Operation{put(0, 1, "x", 1), read(2, 3, "x", 1), put(3, 0, "y", 0), refused(4, 5, 1), put(6, 7, "z", 2)}, porcupine.Illegal, 1, "refused (412)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops, dropped := reduce(c.ops)
			res := porcupine.CheckOperations(registerModel([]string{"a"}), ops)
			if want := c.want == porcupine.Ok; res != want || dropped != c.dropped {
				t.Fatalf("linearizable %v with %d left out, want %v with %d", res, dropped, want, c.dropped)
			}
			if full := porcupine.CheckOperations(registerModel([]string{"a"}), c.ops); full != res {
				t.Fatalf("reduce changed the verdict: %v on the whole history, %v once reduced", full, res)
			}
			found := strings.Join(anomalies(ops), "\n")
			if (c.anomaly == "") != (found == "") || !strings.Contains(found, c.anomaly) {
				t.Fatalf("anomalies %q, want one about %q", found, c.anomaly)
			}
		})
	}
}

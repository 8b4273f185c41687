package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// The pure rule: the need-th newest acknowledgement, capped at the
// master's last position, counts only if it is of the master's epoch.
func TestMajorityIsTheNeedthNewestAcknowledgementOfTheEpoch(t *testing.T) {
	for _, c := range []struct {
		name  string
		last  store.Position
		epoch uint64
		acked []store.Position
		need  int
		want  store.Position
	}{
		{"one copy: the master's history", pos(3, 9), 3, nil, 0, pos(3, 9)},
		{"one copy, before a write of the tenure", pos(2, 9), 3, nil, 0, pos(2, 9)},
		{"rf 2", pos(3, 9), 3, []store.Position{pos(3, 7)}, 1, pos(3, 7)},
		{"rf 3, one replica behind", pos(3, 9), 3, []store.Position{pos(3, 4), pos(3, 8)}, 1, pos(3, 8)},
		{"rf 3, one not heard from", pos(3, 9), 3, []store.Position{pos(3, 4)}, 1, pos(3, 4)},
		{"rf 3, none heard from", pos(3, 9), 3, nil, 1, store.Position{}},
		{"rf 5", pos(3, 9), 3, []store.Position{pos(3, 1), pos(3, 8), pos(3, 5), pos(3, 6)}, 2, pos(3, 6)},
		{"rf 5, one heard from", pos(3, 9), 3, []store.Position{pos(3, 8)}, 2, store.Position{}},
		{"never past the master", pos(3, 5), 3, []store.Position{pos(3, 8)}, 1, pos(3, 5)},
		{"an older epoch's position", pos(3, 9), 3, []store.Position{pos(2, 8), pos(3, 9)}, 2, store.Position{}},
		{"a tenure with no write yet", pos(2, 8), 3, []store.Position{pos(2, 8), pos(2, 8)}, 1, store.Position{}},
	} {
		if got := majority(c.last, c.epoch, c.acked, c.need); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// trio is a master and its replicas, each with a real store; the shipper
// reaches each replica's own HTTP server on loopback, whose handler
// decodes, validates and applies as a node's does.
type trio struct {
	master   *store.Writer
	shipper  *Shipper
	replicas map[string]*replicaNode
	mu       sync.Mutex
	sent     map[string][]WireBatch // every batch each replica answered
	tried    map[string]int         // requests sent to each replica, answered or not
	// slowOver: a request carrying more documents than this (0: no
	// bound) times out, as to a replica too loaded to take it in time.
	slowOver atomic.Int32
	failed   map[string]int // requests that got no answer
	// The master's tenure: its epoch (1 unless a test moves it on) and
	// where it started (nil: the zero position).
	epoch atomic.Uint64
	start atomic.Pointer[store.Position]
	// uncounted is Mastership.Uncounted (nil: none).
	uncounted atomic.Pointer[[]string]
}

type replicaNode struct {
	writer *store.Writer
	srv    *httptest.Server
	mu     sync.Mutex
	cut    bool     // answers 503 to every request
	over   []string // every time its committed position was above its applied one
}

func newTrio(t *testing.T, names []string, maxBatchDocs int) *trio {
	t.Helper()
	ctx := context.Background()
	open := func() *store.Store {
		s, err := store.Open(ctx, store.Options{Database: "shoal", DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(ctx) })
		return s
	}
	tr := &trio{replicas: map[string]*replicaNode{}, sent: map[string][]WireBatch{}, tried: map[string]int{}, failed: map[string]int{}}
	tr.epoch.Store(1)
	for _, name := range names {
		rn := &replicaNode{writer: store.NewWriter(open(), 1, store.WriterOptions{CacheBytes: 1 << 20})}
		rn.srv = httptest.NewServer(http.HandlerFunc(rn.serve))
		tr.replicas[name] = rn
		t.Cleanup(func() {
			rn.srv.Close()
			rn.writer.Close(ctx)
		})
	}
	mstore := open()
	tr.shipper = New((&wiring{
		replicas: func(int) []string { return names },
		copies:   func() int { return len(names) + 1 },
		uncounted: func(int) []string {
			if u := tr.uncounted.Load(); u != nil {
				return *u
			}
			return nil
		},
		epoch:      func(int) (uint64, bool) { return tr.epoch.Load(), true },
		epochStart: tr.epochStart,
		last:       func(p int) store.Position { return tr.master.Position(p) },
		horizon:    func(p int) store.Position { return tr.master.Horizon(p) },
		scan:       mstore.ScanAfter,
		scanKeys:   mstore.ScanKeys,
		get:        func(ctx context.Context, p int, k string) (*store.Doc, error) { return tr.master.Get(ctx, p, k) },
		send:       tr.send,
	}).config(Config{MaxBatchDocs: maxBatchDocs}))
	tr.master = store.NewWriter(mstore, 1, store.WriterOptions{CacheBytes: 1 << 20, OnCommitted: tr.shipper.Committed})
	t.Cleanup(func() {
		tr.shipper.Close()
		tr.master.Close(ctx)
	})
	return tr
}

// epochStart is where the master's epoch e started.
func (tr *trio) epochStart(_ int, e uint64) store.Position {
	if at := tr.start.Load(); at != nil && e == tr.epoch.Load() {
		return *at
	}
	return store.Position{}
}

func (rn *replicaNode) serve(w http.ResponseWriter, r *http.Request) {
	rn.mu.Lock()
	cut := rn.cut
	rn.mu.Unlock()
	if cut {
		http.Error(w, "cut", http.StatusServiceUnavailable)
		return
	}
	req, err := DecodeValid(r.Body, 1)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := Apply(r.Context(), rn.writer, req)
	if c, a := rn.writer.Committed(0), rn.writer.Applied(0); c.Compare(a) > 0 {
		rn.mu.Lock()
		rn.over = append(rn.over, fmt.Sprintf("committed %s above applied %s", c, a))
		rn.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}

func (rn *replicaNode) setCut(cut bool) {
	rn.mu.Lock()
	rn.cut = cut
	rn.mu.Unlock()
}

// send posts a request to the replica's server, as nodes do.
func (tr *trio) send(ctx context.Context, replica string, req Request) (Response, error) {
	tr.mu.Lock()
	tr.tried[replica]++
	tr.mu.Unlock()
	docs := 0
	for _, b := range req.Batches {
		docs += len(b.Docs)
	}
	if n := int(tr.slowOver.Load()); n > 0 && docs > n {
		tr.mu.Lock()
		tr.failed[replica]++
		tr.mu.Unlock()
		return Response{}, fmt.Errorf("posting %d documents: %w", docs, context.DeadlineExceeded)
	}
	resp, err := tr.post(ctx, tr.replicas[replica].srv.URL+"/internal/v1/replicate", req)
	tr.mu.Lock()
	if err != nil {
		tr.failed[replica]++
	} else {
		tr.sent[replica] = append(tr.sent[replica], req.Batches...)
	}
	tr.mu.Unlock()
	return resp, err
}

func (tr *trio) post(ctx context.Context, url string, req Request) (Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return Response{}, fmt.Errorf("replica answered %s", res.Status)
	}
	var out Response
	return out, json.NewDecoder(res.Body).Decode(&out)
}

func (tr *trio) write(t *testing.T, id string) store.Position {
	t.Helper()
	r := tr.master.Do(context.Background(), store.Op{Partition: 0, User: "u", Coll: "c", ID: id,
		Mutate: func(*store.Doc) (store.Next, error) { return store.Next{Body: map[string]any{"id": id}, Size: 16}, nil }})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r.Doc.Pos
}

// await polls cond (a condition on state that other goroutines move, with
// no signal to wait on) until it holds, or fails the test with what after
// 30 s.
func await(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// knows waits until replica knows at least want as committed.
func (tr *trio) knows(t *testing.T, replica string, want store.Position) {
	t.Helper()
	w := tr.replicas[replica].writer
	await(t, func() string {
		return fmt.Sprintf("%s knows %s as committed (it knows %s, applied %s)", replica, want, w.Committed(0), w.Applied(0))
	}, func() bool { return w.Committed(0).Compare(want) >= 0 })
}

// acked waits until the shipper has replica's acknowledgement of want.
func (tr *trio) acked(t *testing.T, replica string, want store.Position) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tr.shipper.WaitReplicated(ctx, 0, want, func() []string { return []string{replica} }, 1); err != nil {
		got, _ := tr.shipper.Acked(replica, 0)
		t.Fatalf("%s did not acknowledge %s (it is at %s): %v", replica, want, got, err)
	}
}

func (tr *trio) checkNeverAbove(t *testing.T) {
	t.Helper()
	for name, rn := range tr.replicas {
		rn.mu.Lock()
		over := rn.over
		rn.mu.Unlock()
		if len(over) > 0 {
			t.Errorf("replica %s: %v", name, over)
		}
	}
}

// notices counts the batches that carried a committed position alone.
func (tr *trio) notices(replica string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, b := range tr.sent[replica] {
		if len(b.Docs) == 0 && !b.Restore && !b.Full && b.From == b.UpTo && b.Committed != (store.Position{}) {
			n++
		}
	}
	return n
}

// Replicas learn the committed position with the batches that carry
// writes, and, on a partition that goes idle after its last write, from
// the notice the master sends once that write's acknowledgements are in:
// at most one notice per replica for it. New behaviour: before, nothing
// told a replica what a majority holds.
func TestReplicasLearnTheCommittedPosition(t *testing.T) {
	tr := newTrio(t, []string{"a", "b"}, 500)
	first := tr.write(t, "k1")
	// Idle after k1: only a notice can tell the replicas k1 is committed
	// (the batch that carried k1 was sent before anyone acknowledged it).
	tr.knows(t, "a", first)
	tr.knows(t, "b", first)
	if got := tr.shipper.MajorityHeld(0); got != first {
		t.Fatalf("the master's majority-committed position is %s, want %s", got, first)
	}
	for _, r := range []string{"a", "b"} {
		if n := tr.notices(r); n > 1 {
			t.Errorf("replica %s got %d notices for one write, want at most 1", r, n)
		}
	}
	// The batch carrying the next write carries k1 as committed.
	second := tr.write(t, "k2")
	tr.knows(t, "a", second)
	tr.knows(t, "b", second)
	tr.acked(t, "a", second) // the batches with k2 are answered
	tr.acked(t, "b", second)
	tr.mu.Lock()
	for _, r := range []string{"a", "b"} {
		carried := false
		for _, b := range tr.sent[r] {
			if len(b.Docs) > 0 && b.Docs[len(b.Docs)-1].Pos == second && b.Committed.Compare(first) >= 0 {
				carried = true
			}
		}
		if !carried {
			t.Errorf("replica %s: the batch with k2 did not carry k1's position %s as committed", r, first)
		}
	}
	tr.mu.Unlock()
	tr.checkNeverAbove(t)
}

// With three copies a majority is the master and one replica: one
// replica down, the committed position still advances with the other's
// acknowledgement; both down, it stays below the write that neither
// acknowledged. New behaviour (no committed position before).
func TestTheCommittedPositionNeedsAMajorityOfTheCopies(t *testing.T) {
	tr := newTrio(t, []string{"a", "b"}, 500)
	tr.replicas["b"].srv.Close()
	first := tr.write(t, "k1")
	tr.knows(t, "a", first)
	if got := tr.shipper.MajorityHeld(0); got != first {
		t.Fatalf("with b down the master's committed position is %s, want %s (a acknowledged it)", got, first)
	}
	tr.mu.Lock()
	triedA := tr.tried["a"]
	tr.mu.Unlock()
	tr.replicas["a"].srv.Close()
	second := tr.write(t, "k2")
	// Wait until a sender tried to deliver k2 to a and failed.
	await(t, func() string { return "the shipper tried a after k2" }, func() bool {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.tried["a"] > triedA && tr.failed["a"] > 0
	})
	if got := tr.shipper.MajorityHeld(0); got.Compare(second) >= 0 || got != first {
		t.Fatalf("with both replicas down the committed position is %s, want %s (k2 at %s is on the master alone)", got, first, second)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := tr.shipper.WaitMajorityHeld(ctx, 0, second); err == nil || got != first {
		t.Fatalf("WaitMajorityHeld of k2 with both replicas down: %s %v", got, err)
	}
	if got, err := tr.shipper.WaitMajorityHeld(context.Background(), 0, first); err != nil || got != first {
		t.Fatalf("WaitMajorityHeld of k1: %s %v", got, err)
	}
	tr.checkNeverAbove(t)
}

// A copy the master does not count (Mastership.Counted: one a swap
// replaces, while the voters may keep a list without it) makes no write
// majority-held, though it holds the write and is still shipped to; once
// it counts again, a count waiting for it ends (Recount) with no answer
// of a replica to wake it. New.
func TestAnUncountedCopyMakesNoWriteMajorityHeld(t *testing.T) {
	tr := newTrio(t, []string{"a", "b"}, 500)
	tr.replicas["a"].setCut(true)
	tr.uncounted.Store(&[]string{"b"})
	k1 := tr.write(t, "k1")
	tr.acked(t, "b", k1)
	if got := tr.shipper.MajorityHeld(0); got.Compare(k1) >= 0 {
		t.Fatalf("k1 (%s), held by the master and b only, is majority-held (%s) with b not counted", k1, got)
	}
	tr.uncounted.Store(nil)
	tr.shipper.Recount()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := tr.shipper.WaitMajorityHeld(ctx, 0, k1); err != nil || got != k1 {
		t.Fatalf("with b counted again, WaitMajorityHeld of k1: %s %v", got, err)
	}
}

// A replica that is behind learns the committed position from the chunks
// of its catch-up, never above what it has applied (the chunks move it
// only at the last one), and ends knowing the master's.
func TestALaggingReplicaNeverKnowsMoreThanItApplied(t *testing.T) {
	tr := newTrio(t, []string{"a", "b"}, 2)
	tr.replicas["b"].setCut(true)
	var last store.Position
	for i := range 9 {
		last = tr.write(t, fmt.Sprintf("k%d", i))
	}
	tr.knows(t, "a", last)
	tr.replicas["b"].setCut(false)
	tr.shipper.Ensure(1)
	tr.acked(t, "b", last) // every chunk of the catch-up answered
	tr.knows(t, "b", last)
	tr.checkNeverAbove(t)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	ahead := false // a chunk that carried a committed position beyond its end
	for _, b := range tr.sent["b"] {
		if len(b.Docs) > 0 && b.Committed.Compare(b.UpTo) > 0 {
			ahead = true
		}
	}
	if !ahead {
		for _, b := range tr.sent["b"] {
			t.Logf("batch from %s upto %s docs %d committed %s", b.From, b.UpTo, len(b.Docs), b.Committed)
		}
		t.Error("no batch to b carried a committed position beyond what it brought: the cap was not put to the test")
	}
}

// A batch's committed position is of its master's history: no later
// epoch than the batch's. New check: before, any position was accepted.
func TestACommittedPositionOfALaterEpochIsRefused(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"batches":[{"p":0,"e":3,"commit":{"epoch":3,"seq":9}}]}`: true,
		`{"batches":[{"p":0,"e":3,"commit":{"epoch":2,"seq":9}}]}`: true,
		`{"batches":[{"p":0,"e":3,"commit":{"epoch":4,"seq":1}}]}`: false,
	} {
		req, err := DecodeValid(strings.NewReader(body), 1)
		if ok && (err != nil || req.Batches[0].Committed.Seq != 9) {
			t.Errorf("%s: refused (%v) or lost the position (%+v)", body, err, req)
		}
		if !ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: accepted (%v)", body, err)
		}
	}
}

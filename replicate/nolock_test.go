package replicate

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/shoal-db/shoal/store"
)

// lockCheck implements Mastership, Source, Transport and Observer over a
// master's partitions held in memory, and a replica that takes every
// batch; each of its methods records whether it was called with the
// shipper's lock held.
//
// The check is sound because the test gives the lock no other holder:
// the replica's sender is registered as running before anything starts
// one, so no sender goroutine exists, and the test drives the sender's
// rounds (round, retireIfIdle) itself, on its own goroutine, as it
// drives Committed, Ensure, Lags and the rest. Only WaitReplicated runs
// on a goroutine of its own, and the test goroutine then holds no lock
// and is blocked on a channel, or has waited (synctest.Wait) until that
// goroutine is parked in the wait, which releases the lock. So when a
// method runs, the one goroutine that can hold s.mu is the one calling
// it: a TryLock that fails means the shipper called it under its lock.
type lockCheck struct {
	s *Shipper // set after New

	mu       sync.Mutex
	epochs   map[int]uint64 // the partitions mastered, at which epoch
	replicas map[int][]string
	copies   int
	docs     map[int][]*store.Doc // the master's history, per partition
	horizon  map[int]store.Position
	diverge  bool // the replica answers the next batch of partition 0 "diverged"
	calls    map[string]int
	// viewed counts the reads of each partition's view (Epoch calls);
	// nil: not counted.
	viewed map[int]int
	// held names the calls made under s.mu, by method and the shipper
	// function that made them, with the first chain of callers seen.
	held map[string]string
}

// check records a call of method and whether s.mu was held.
func (c *lockCheck) check(method string) {
	locked := false
	if c.s != nil {
		if c.s.mu.TryLock() {
			c.s.mu.Unlock()
		} else {
			locked = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	if locked {
		chain := shipperCallers()
		key := method + " outside the shipper"
		if len(chain) > 0 {
			key = method + " in " + chain[0]
		}
		if _, ok := c.held[key]; !ok {
			c.held[key] = strings.Join(chain, " < ")
		}
	}
}

// drive makes a shipper over c, with cfg's bounds, and the sender of
// replica "r" registered as running: nothing starts its goroutine, and
// the test runs its rounds with rounds (until one sends nothing). The
// shipper is closed when the test ends.
func (c *lockCheck) drive(t *testing.T, cfg Config) (s *Shipper, d *dest, rounds func()) {
	cfg.Mastership, cfg.Source, cfg.Transport, cfg.Observer = c, c, c, c
	cfg.Logger = slog.New(slog.DiscardHandler)
	s = New(cfg)
	c.s = s
	t.Cleanup(s.Close)
	d = &dest{id: "r", wake: make(chan struct{}, 1), parts: map[int]*progress{}, running: true}
	s.dests["r"] = d
	rounds = func() {
		t.Helper()
		for range 100 {
			progressed, err := s.round(d)
			if err != nil {
				t.Fatal(err)
			}
			if !progressed {
				return
			}
		}
		t.Fatal("the sender's rounds never ran out of work")
	}
	return s, d, rounds
}

// shipperCallers names the shipper's functions on the stack, innermost
// first (majorityLocked, committedLocked, ..., round).
func shipperCallers() []string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	var names []string
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "github.com/shoal-db/shoal/replicate.") && !strings.HasSuffix(f.File, "_test.go") {
			name := strings.TrimPrefix(f.Function, "github.com/shoal-db/shoal/replicate.")
			names = append(names, strings.TrimPrefix(name, "(*Shipper)."))
		}
		if !more {
			break
		}
	}
	return names
}

func (c *lockCheck) Epoch(p int) (uint64, bool) {
	c.check("Mastership.Epoch")
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.viewed != nil {
		c.viewed[p]++
	}
	e, ok := c.epochs[p]
	return e, ok
}

func (c *lockCheck) Replicas(p int) []string {
	c.check("Mastership.Replicas")
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.epochs[p]; !ok {
		return nil
	}
	return slices.Clone(c.replicas[p])
}

func (c *lockCheck) Counted(_ int, _ uint64, r []string) []string { return r }

func (c *lockCheck) Copies() int {
	c.check("Mastership.Copies")
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.copies
}

func (c *lockCheck) Last(p int) store.Position {
	c.check("Source.Last")
	c.mu.Lock()
	defer c.mu.Unlock()
	var last store.Position
	for _, d := range c.docs[p] {
		last = maxPosition(last, d.Pos)
	}
	return last
}

func (c *lockCheck) EpochStart(int, uint64) store.Position {
	c.check("Source.EpochStart")
	return store.Position{}
}

func (c *lockCheck) Epochs(int, uint64) []store.EpochStart {
	c.check("Source.Epochs")
	return []store.EpochStart{{Epoch: 1}}
}

func (c *lockCheck) Horizon(p int) store.Position {
	c.check("Source.Horizon")
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.horizon[p]
}

func (c *lockCheck) Get(_ context.Context, p int, key string) (*store.Doc, error) {
	c.check("Source.Get")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.docs[p] {
		if d.Key == key {
			return d, nil
		}
	}
	return nil, store.ErrNotFound
}

// sorted returns partition p's documents that keep accepts, in order, at
// most limit of them (0: all).
func (c *lockCheck) sorted(p int, order func(a, b *store.Doc) int, keep func(*store.Doc) bool, limit int) []*store.Doc {
	c.mu.Lock()
	defer c.mu.Unlock()
	docs := slices.SortedFunc(slices.Values(c.docs[p]), order)
	docs = slices.DeleteFunc(docs, func(d *store.Doc) bool { return !keep(d) })
	if limit > 0 && len(docs) > limit {
		docs = docs[:limit]
	}
	return docs
}

func (c *lockCheck) Scan(_ context.Context, p int, after store.Position, limit int) ([]*store.Doc, error) {
	c.check("Source.Scan")
	return c.sorted(p, func(a, b *store.Doc) int { return a.Pos.Compare(b.Pos) },
		func(d *store.Doc) bool { return d.Pos.Compare(after) > 0 }, limit), nil
}

func (c *lockCheck) ScanKeys(_ context.Context, p int, afterKey string, limit int) ([]*store.Doc, error) {
	c.check("Source.ScanKeys")
	return c.sorted(p, func(a, b *store.Doc) int { return cmp.Compare(a.Key, b.Key) },
		func(d *store.Doc) bool { return d.Key > afterKey }, limit), nil
}

func (c *lockCheck) Count(_ context.Context, p int, after store.Position) (int64, error) {
	c.check("Source.Count")
	return int64(len(c.sorted(p, func(a, b *store.Doc) int { return 0 }, func(d *store.Doc) bool { return d.Pos.Compare(after) > 0 }, 0))), nil
}

// Send is the replica: it takes every batch, holding its history up to
// the batch's end, but answers "diverged" once when told to.
func (c *lockCheck) Send(_ context.Context, _ string, req Request) (Response, error) {
	c.check("Transport.Send")
	c.mu.Lock()
	defer c.mu.Unlock()
	var resp Response
	for _, b := range req.Batches {
		r := Result{Partition: b.Partition, Applied: b.UpTo, Epoch: b.Epoch, Code: CodeOK}
		if c.diverge && b.Partition == 0 && len(b.Docs) > 0 {
			c.diverge = false
			r.Code, r.Applied, r.Diverged = CodeDiverged, b.From, []string{store.DocKey("u", "c", "x")}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

func (c *lockCheck) FullCopyStarted(int)            { c.check("Observer.FullCopyStarted") }
func (c *lockCheck) Copied(string, int, int, int64) { c.check("Observer.Copied") }

// No callback runs under the shipper's lock (issue 15, item 2): every
// call into Mastership, Source, Transport and Observer, and of
// WaitReplicated's replicas function, is made with Shipper.mu free, so
// the node's own locks (lease manager, partition table, partition writer)
// are never taken inside it. The test walks the shipper through the
// paths that call them: a write queued, Ensure, probes, live batches and
// notices, a catch-up, a full copy, a restore after a divergence, Lags,
// the majority-committed position, WaitReplicated woken by an
// acknowledgement, and a sender retiring. Before, Ensure, live, send,
// the majority count behind every stamp, catch-up's horizon check, Lags,
// retireIfIdle and WaitReplicated all called back under the lock.
func TestNoCallbackRunsUnderTheShippersLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &lockCheck{epochs: map[int]uint64{0: 1, 1: 1}, replicas: map[int][]string{0: {"r"}, 1: {"r"}}, copies: 2,
			docs: map[int][]*store.Doc{
				0: {stored("k1", pos(1, 1)), stored("k2", pos(1, 2))}, // k2 was stored by a commit whose lease ran out: a catch-up
				1: {stored("a", pos(1, 2)), stored("b", pos(1, 3)), stored("c", pos(1, 4))},
			},
			horizon: map[int]store.Position{1: pos(1, 1)}, // a tombstone of partition 1 purged: a full copy
			calls:   map[string]int{}, held: map[string]string{}}
		s, d, rounds := c.drive(t, Config{MaxBatchDocs: 2})

		s.Committed(store.Batch{Partition: 0, Epoch: 1, UpTo: pos(1, 1), Docs: []*store.Doc{stored("k1", pos(1, 1))}})
		s.Ensure(2)
		rounds()
		for p, want := range map[int]store.Position{0: pos(1, 2), 1: pos(1, 4)} {
			if acked, ok := s.Acked("r", p); !ok || acked != want {
				t.Fatalf("partition %d acknowledged at %s (known %v), want %s", p, acked, ok, want)
			}
		}

		// A write the replica answers "diverged": a restore, then a catch-up.
		k3 := stored("k3", pos(1, 3))
		c.mu.Lock()
		c.docs[0] = append(c.docs[0], k3)
		c.diverge = true
		c.mu.Unlock()
		s.Committed(store.Batch{Partition: 0, Epoch: 1, From: pos(1, 2), UpTo: pos(1, 3), Docs: []*store.Doc{k3}})
		rounds()
		if acked, _ := s.Acked("r", 0); acked != pos(1, 3) {
			t.Fatalf("partition 0 acknowledged at %s after the restore, want 1.3", acked)
		}

		for _, l := range s.Lags() {
			if l.Behind != 0 || l.CatchUp {
				t.Errorf("lag after every round: %+v", l)
			}
		}
		if held := s.MajorityHeld(0); held != pos(1, 3) {
			t.Errorf("majority-held %s, want 1.3", held)
		}
		if held, err := s.WaitMajorityHeld(context.Background(), 1, pos(1, 4)); err != nil || held != pos(1, 4) {
			t.Errorf("WaitMajorityHeld of partition 1: %s %v", held, err)
		}
		_ = s.Copy("r", 0)

		// WaitReplicated waits for a position the replica has not
		// acknowledged, and asks for the replicas again once it has.
		var asked atomic.Int32
		replicas := func() []string {
			c.check("WaitReplicated's replicas")
			asked.Add(1)
			return []string{"r"}
		}
		type waited struct {
			have int
			err  error
		}
		done := make(chan waited)
		go func() {
			have, err := s.WaitReplicated(context.Background(), 0, pos(1, 9), replicas, 1)
			done <- waited{have, err}
		}()
		synctest.Wait() // parked in the wait, the lock released
		if n := asked.Load(); n != 1 {
			t.Fatalf("WaitReplicated asked for the replicas %d times before waiting, want 1", n)
		}
		s.mu.Lock()
		d.parts[0].applied(pos(1, 9), pos(1, 9), store.Position{}) // as send takes an acknowledgement in
		s.changed.Broadcast()
		s.mu.Unlock()
		if w := <-done; w.have != 1 || w.err != nil {
			t.Fatalf("WaitReplicated: %d %v", w.have, w.err)
		}
		if n := asked.Load(); n != 2 {
			t.Fatalf("WaitReplicated asked for the replicas %d times, want 2 (again after the acknowledgement)", n)
		}

		// This node masters nothing any more: the sender retires.
		c.mu.Lock()
		c.epochs = map[int]uint64{}
		c.mu.Unlock()
		if !s.retireIfIdle(d) {
			t.Error("the sender of a node that replicates nothing did not retire")
		}

		c.mu.Lock()
		defer c.mu.Unlock()
		for _, m := range []string{"Mastership.Epoch", "Mastership.Replicas", "Mastership.Copies", "Source.Last", "Source.EpochStart",
			"Source.Epochs", "Source.Horizon", "Source.Get", "Source.Scan", "Source.ScanKeys", "Source.Count", "Transport.Send",
			"Observer.FullCopyStarted", "Observer.Copied", "WaitReplicated's replicas"} {
			if c.calls[m] == 0 {
				t.Errorf("%s was never called: the test does not cover it", m)
			}
		}
		for _, h := range slices.Sorted(maps.Keys(c.held)) {
			t.Errorf("called with Shipper.mu held: %s (%s)", h, c.held[h])
		}
	})
}

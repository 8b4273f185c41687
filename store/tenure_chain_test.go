package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// lease is a partition lease a test hands a writer and moves by hand.
type lease struct {
	mu    sync.Mutex
	epoch uint64
	held  bool
}

func (l *lease) set(epoch uint64, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch, l.held = epoch, held
}

func (l *lease) get(int) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch, l.held
}

// runs keeps the runs a master's writer hands to replication.
type runs struct {
	mu  sync.Mutex
	all []Batch
}

func (r *runs) add(b Batch) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, b)
}

func (r *runs) last(t *testing.T) Batch {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.all) == 0 {
		t.Fatal("no run was handed to replication")
	}
	return r.all[len(r.all)-1]
}

// stamped is a batch as the master's shipper sends it: its epoch's start
// and chain as the master's writer tells them.
func stamped(w *Writer, b Batch) Batch {
	b.EpochStart = w.EpochStart(b.Partition, b.Epoch)
	b.Epochs = w.Epochs(b.Partition, b.Epoch)
	return b
}

// Seed 1001 of the fault run, partition 7, in two nodes. Node C is master
// at epoch 10 and writes a (10.1) and k (10.2); k never leaves it. C
// takes epoch 11 (after a restart), from 10.2, writes x (11.3) and sends
// B its first batch (the probe) with its chain [10@0.0, 11@10.2]: B, at
// 10.1, finds nothing diverged and adopts that chain. C dies before its
// catch-up reaches B. B takes epoch 12 from 10.1, the position its copy
// is complete up to, and writes y (12.2). Its batches must carry a chain
// under which k, of epoch 10 and after 10.1, is not in its history: the
// chain B ships, [10@0.0, 11@10.2, 12@10.1], still says epoch 10 ran to
// 10.2, so C rolled back x only, kept k live, and after the restore and
// the catch-up both copies were at 12.2 with k on C alone, for good (C
// later took the partition back by a handoff and never resent k: B's
// position was past it).
func TestAWriteTheNextMasterNeverHadIsRolledBackWhenItsChainNamedALaterTenure(t *testing.T) {
	ctx := context.Background()
	key := func(id string) string { return DocKey("u", "c", id) }
	write := func(w *Writer, id string) {
		t.Helper()
		if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: id, Mutate: put(map[string]any{"v": id})}); r.Err != nil {
			t.Fatalf("writing %s: %v", id, r.Err)
		}
	}
	apply := func(w *Writer, b Batch) ApplyResult {
		t.Helper()
		r := w.Apply(ctx, b)
		if err := w.SyncApplied(ctx); err != nil {
			t.Fatal(err)
		}
		return r
	}

	sC, sB := openTestStore(t), openTestStore(t)
	var leaseC, leaseB lease
	var runsC, runsB runs
	c := NewWriter(sC, 1, WriterOptions{CacheBytes: 1 << 20, Lease: leaseC.get, OnCommitted: runsC.add})
	defer c.Close(ctx)
	b := NewWriter(sB, 1, WriterOptions{CacheBytes: 1 << 20, Lease: leaseB.get, OnCommitted: runsB.add})
	defer b.Close(ctx)

	// Epoch 10 on C: a reaches B, k does not.
	leaseC.set(10, true)
	write(c, "a")
	if r := apply(b, stamped(c, runsC.last(t))); r.Err != nil || r.Applied != at(10, 1) {
		t.Fatalf("B takes a: %+v", r)
	}
	write(c, "k")

	// Epoch 11 on C, from 10.2; its probe reaches B, nothing more does.
	leaseC.set(11, true)
	write(c, "x")
	if got := c.EpochStart(0, 11); got != at(10, 2) {
		t.Fatalf("epoch 11 starts at %s, want 10.2", got)
	}
	if r := apply(b, stamped(c, Batch{Partition: 0, Epoch: 11})); r.Err != nil || r.Applied != at(10, 1) {
		t.Fatalf("B takes epoch 11's probe: %+v", r)
	}

	// Epoch 12 on B, from 10.1; C is down, then back as a replica.
	leaseC.set(11, false)
	leaseB.set(12, true)
	write(b, "y")
	start := b.EpochStart(0, 12)
	if start != at(10, 1) {
		t.Fatalf("epoch 12 starts at %s, want 10.1", start)
	}
	chain := b.Epochs(0, 12)
	if boundary, ok := diverged(chain, at(10, 2)); !ok {
		t.Errorf("B ships the chain %v: under it k@10.2, of epoch 10 after epoch 12's start %s, is in B's history (boundary %s, not diverged); B never had it",
			chain, start, boundary)
	}

	// C takes B's first batch: whatever it holds that B never had goes
	// to the rollback collection, and B restores those documents.
	first := stamped(b, runsB.last(t))
	r := apply(c, first)
	if !errors.Is(r.Err, ErrDiverged) {
		t.Fatalf("C takes epoch 12's first batch: %+v, want diverged", r)
	}
	if want := []string{key("k"), key("x")}; !slices.Equal(r.Diverged, want) {
		t.Errorf("C rolled back %v, want %v: k@10.2 was written at epoch 10 after epoch 12's start (%s)", r.Diverged, want, start)
	}
	agreed := r.Applied
	restore := stamped(b, Batch{Partition: 0, Epoch: 12, From: agreed, UpTo: agreed, Restore: true})
	for _, k := range r.Diverged {
		d, err := b.Get(ctx, 0, k)
		switch {
		case errors.Is(err, ErrNotFound):
			restore.Absent = append(restore.Absent, k)
		case err != nil:
			t.Fatal(err)
		default:
			restore.Docs = append(restore.Docs, d)
		}
	}
	if r := apply(c, restore); r.Err != nil {
		t.Fatalf("restore: %+v", r)
	}
	// The catch-up from the agreement point, up to B's last position.
	docs, err := sB.ScanAfter(ctx, 0, agreed, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := b.Position(0)
	if r := apply(c, stamped(b, Batch{Partition: 0, Epoch: 12, From: agreed, UpTo: last, Docs: docs})); r.Err != nil || r.Applied != last {
		t.Fatalf("catch-up from %s: %+v", agreed, r)
	}

	// Both at B's position, with B's content; k is kept in C's rollback.
	if got := c.Applied(0); got != last {
		t.Fatalf("C holds the history up to %s, B's is at %s", got, last)
	}
	onC, err := sC.ScanKeys(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	onB, err := sB.ScanKeys(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(onC), ids(onB)) {
		t.Errorf("at the same position %s, C holds %v and its master B %v", last, ids(onC), ids(onB))
	}
	kept, err := sC.Rollbacks(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var rolled []string
	for _, k := range kept {
		rolled = append(rolled, k.ID+"@"+k.Position.String())
	}
	slices.Sort(rolled)
	if want := []string{"k@10.2", "x@11.3"}; !slices.Equal(rolled, want) {
		t.Errorf("C's rollback collection holds %v, want %v", rolled, want)
	}
}

// A new master's history starts where its copy is complete (1.2), not at
// a newer document a catch-up chunk stored out of order (e at 1.5). Such a
// document is in no history the new tenure's chain describes: left at
// 1.5, a replica complete beyond 1.2 in the new epoch would never be sent
// it (it is older than the replica's position: seed 1001's divergence at
// one position), and one that holds it at 1.5 would roll it back and be
// restored it, for ever (seed 7's restore loop). The new master carries it
// into its tenure instead: written again at a position of its epoch, with
// its content and version, and handed to replication like any write.
func TestANewMasterCarriesTheDocumentsItHoldsBeyondItsStart(t *testing.T) {
	ctx := context.Background()
	l := &lease{epoch: 2}
	var shipped runs
	w := NewWriter(openTestStore(t), 1, WriterOptions{Lease: l.get, OnCommitted: shipped.add})
	defer w.Close(ctx)
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: at(1, 2), Docs: []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 2, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// A chunk of a catch-up: e (version 3) and a tombstone d are stored,
	// but the copy is complete only up to 1.2 until the final chunk.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, From: at(1, 2), UpTo: at(1, 2),
		Docs: []*Doc{doc("d", 1, 4, 2, true), doc("e", 1, 5, 3, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	l.set(2, true)
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "x", Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := w.EpochStart(0, 2); got != at(1, 2) {
		t.Fatalf("epoch 2 starts at %s, want the complete position 1.2", got)
	}
	after, err := w.store.ScanAfter(ctx, 0, at(1, 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(after), []string{"d@2.6", "e@2.7", "x@2.8"}; !slices.Equal(got, want) {
		t.Fatalf("after the tenure's start the master holds %v, want %v", got, want)
	}
	for _, d := range after {
		if d.ID == "e" && (d.Version != 3 || d.Body["v"] != int64(3)) || d.ID == "d" && (!d.Deleted || d.Version != 2) {
			t.Fatalf("%s was carried over changed: %+v", d.ID, d)
		}
	}
	var sent []*Doc
	for _, b := range shipped.all {
		sent = append(sent, b.Docs...)
	}
	if got, want := ids(sent), []string{"d@2.6", "e@2.7", "x@2.8"}; !slices.Equal(got, want) {
		t.Fatalf("replication was handed %v, want %v", got, want)
	}
	// A replica complete up to 1.2 that applies what the master handed on
	// holds exactly the master's documents.
	r := NewWriter(openTestStore(t), 1, WriterOptions{})
	defer r.Close(ctx)
	if res := r.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: at(1, 2), Docs: []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 2, 1, false)}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, b := range shipped.all {
		if res := r.Apply(ctx, stamped(w, b)); res.Err != nil {
			t.Fatalf("the replica refused %+v: %v", b, res.Err)
		}
	}
	mine, _ := w.store.ScanKeys(ctx, 0, "", 0)
	theirs, _ := r.store.ScanKeys(ctx, 0, "", 0)
	if !slices.Equal(ids(mine), ids(theirs)) {
		t.Fatalf("the replica holds %v, its master %v", ids(theirs), ids(mine))
	}
}

// A carry cut short (the lease lost after its first page, or a crash) is
// finished by the next tenure: until a carry is complete the copy counts
// as complete only up to the tenure's start, so the next tenure starts
// there too and carries what is left (the reviewer's case: with pages of
// 3, epoch 3 started at 2.13 and five documents of epoch 1 stayed at
// 1.6-1.10 for good).
func TestACarryCutShortIsFinishedByTheNextTenure(t *testing.T) {
	ctx := context.Background()
	defer func(n int) { carryPage = n }(carryPage)
	carryPage = 3
	l := &lease{epoch: 2}
	checks := 0
	lease := func(p int) (uint64, bool) {
		e, held := l.get(p)
		if held && e == 2 {
			checks++
			if checks > 1 { // lost right after the first page
				return e, false
			}
		}
		return e, held
	}
	w := NewWriter(openTestStore(t), 1, WriterOptions{Lease: lease})
	defer w.Close(ctx)
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: at(1, 2), Docs: []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 2, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	var stray []*Doc
	for i := uint64(3); i <= 10; i++ {
		stray = append(stray, doc(fmt.Sprintf("s%d", i), 1, i, 1, false))
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, From: at(1, 2), UpTo: at(1, 2), Docs: stray}); r.Err != nil {
		t.Fatal(r.Err)
	}
	l.set(2, true)
	w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "x", Mutate: put(map[string]any{"n": int64(1)})}) // fails: the lease is lost mid-carry
	l.set(3, true)
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "y", Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := w.EpochStart(0, 3); got != at(1, 2) {
		t.Fatalf("epoch 3 starts at %s, want 1.2: the carry of epoch 2 was not finished", got)
	}
	after, err := w.store.ScanAfter(ctx, 0, at(1, 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range after {
		if d.Pos.Epoch != 3 {
			t.Fatalf("after the start of epoch 3 the master holds %v: %s is not of epoch 3", ids(after), d.ID)
		}
	}
	if len(after) != 9 {
		t.Fatalf("after the start the master holds %v, want the 8 carried and y", ids(after))
	}
}

// StartTenure carries what a new master holds beyond its tenure's start
// without a write: the node calls it once the tenure takes writes, so
// that a partition nobody writes to after a failover still ships those
// documents (before, they waited for the tenure's first write, or its
// tenure marker). The documents end at positions of the tenure's epoch,
// handed to replication; the record says the carry is done; a replica
// complete up to the start that applies what was handed on holds the
// master's documents. A tenure with nothing to carry stores nothing (its
// first write starts it, as before), and a call at an epoch the lease is
// not at changes nothing.
func TestStartTenureCarriesWithoutAWrite(t *testing.T) {
	ctx := context.Background()
	l := &lease{epoch: 2}
	var shipped runs
	w := NewWriter(openTestStore(t), 2, WriterOptions{Lease: l.get, OnCommitted: shipped.add})
	defer w.Close(ctx)
	complete := func(p int) Batch {
		return Batch{Partition: p, Epoch: 1, UpTo: at(1, 2), Docs: []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 2, 1, false)}}
	}
	for p := range 2 {
		if r := w.Apply(ctx, complete(p)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// Partition 0 also holds a chunk of a catch-up cut short.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, From: at(1, 2), UpTo: at(1, 2),
		Docs: []*Doc{doc("d", 1, 4, 2, true), doc("e", 1, 5, 3, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := w.StartTenure(ctx, 0, 2); !errors.Is(err, ErrNotMaster) {
		t.Fatalf("StartTenure without the lease: %v, want ErrNotMaster", err)
	}
	l.set(2, true)
	if err := w.StartTenure(ctx, 0, 3); !errors.Is(err, ErrNotMaster) {
		t.Fatalf("StartTenure at epoch 3 with the lease at 2: %v, want ErrNotMaster", err)
	}
	if len(shipped.all) != 0 || w.Tenure(0) != 0 {
		t.Fatalf("a refused StartTenure changed something: tenure %d, runs %+v", w.Tenure(0), shipped.all)
	}
	if err := w.StartTenure(ctx, 0, 2); err != nil {
		t.Fatal(err)
	}
	if got := w.EpochStart(0, 2); got != at(1, 2) {
		t.Fatalf("epoch 2 starts at %s, want the complete position 1.2", got)
	}
	after, err := w.store.ScanAfter(ctx, 0, at(1, 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(after), []string{"d@2.6", "e@2.7"}; !slices.Equal(got, want) {
		t.Fatalf("after the tenure's start the master holds %v, want %v", got, want)
	}
	var sent []*Doc
	for _, b := range shipped.all {
		sent = append(sent, b.Docs...)
	}
	if got, want := ids(sent), []string{"d@2.6", "e@2.7"}; !slices.Equal(got, want) {
		t.Fatalf("replication was handed %v, want %v", got, want)
	}
	rec, err := w.store.partitionRecord(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec.TenureEpoch != 2 || rec.Carrying {
		t.Fatalf("the stored record says tenure %d, carrying %v; want tenure 2, carried", rec.TenureEpoch, rec.Carrying)
	}
	r := NewWriter(openTestStore(t), 1, WriterOptions{})
	defer r.Close(ctx)
	if res := r.Apply(ctx, complete(0)); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, b := range shipped.all {
		if res := r.Apply(ctx, stamped(w, b)); res.Err != nil {
			t.Fatalf("the replica refused %+v: %v", b, res.Err)
		}
	}
	mine, _ := w.store.ScanKeys(ctx, 0, "", 0)
	theirs, _ := r.store.ScanKeys(ctx, 0, "", 0)
	if !slices.Equal(ids(mine), ids(theirs)) {
		t.Fatalf("the replica holds %v, its master %v", ids(theirs), ids(mine))
	}
	// Done: again, or with nothing to carry, nothing happens.
	before := len(shipped.all)
	for p := range 2 {
		if err := w.StartTenure(ctx, p, 2); err != nil {
			t.Fatal(err)
		}
	}
	if len(shipped.all) != before || w.Position(0) != at(2, 7) {
		t.Fatalf("a second StartTenure carried again: %d runs, position %s", len(shipped.all), w.Position(0))
	}
	if rec, _ := w.store.partitionRecord(ctx, 1); w.Tenure(1) != 0 || rec.TenureEpoch != 0 || w.Position(1) != at(1, 2) {
		t.Fatalf("a tenure with nothing to carry was started: tenure %d (stored %d), position %s", w.Tenure(1), rec.TenureEpoch, w.Position(1))
	}
}

// A run whose apply failed part way may have stored some of its
// documents beyond the copy's position (here c, inserted before the
// replace of b failed). If the master goes and this node takes the
// partition before the run comes again, its tenure carries them into its
// history as it carries a catch-up's: before, the writer kept its newest
// position where it was until a restart read it again, nothing was
// carried, and the new master held c at 1.3, in no history, never sent to
// its replicas.
func TestANewMasterCarriesWhatAFailedApplyStored(t *testing.T) {
	ctx := context.Background()
	l := &lease{epoch: 2}
	var shipped runs
	s := openTestStore(t)
	w := NewWriter(s, 1, WriterOptions{Lease: l.get, OnCommitted: shipped.add, CacheBytes: 1 << 20})
	defer w.Close(ctx)
	complete := Batch{Partition: 0, Epoch: 1, UpTo: at(1, 2), Docs: []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 2, 1, false)}}
	if r := w.Apply(ctx, complete); r.Err != nil {
		t.Fatal(r.Err)
	}
	working := s.deferring
	s.deferring = failingCommits{working}
	r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, From: at(1, 2), UpTo: at(1, 4),
		Docs: []*Doc{newDoc("c", 1, 3), doc("b", 1, 4, 2, false)}})
	s.deferring = working
	if r.Err == nil {
		t.Fatalf("the run was applied over failing commits: %+v", r)
	}
	if _, err := s.Get(ctx, 0, DocKey("u", "c", "c")); err != nil {
		t.Fatalf("c after the failed run: %v; the test expects its insert to have been stored", err)
	}
	l.set(2, true)
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "x", Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	after, err := s.ScanAfter(ctx, 0, at(1, 2), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(after), []string{"c@2.4", "x@2.5"}; !slices.Equal(got, want) {
		t.Fatalf("after the tenure's start (1.2) the master holds %v, want %v", got, want)
	}
	// A replica complete up to 1.2 that applies what the master handed on
	// holds exactly the master's documents.
	replica := NewWriter(openTestStore(t), 1, WriterOptions{})
	defer replica.Close(ctx)
	if res := replica.Apply(ctx, complete); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, b := range shipped.all {
		if res := replica.Apply(ctx, stamped(w, b)); res.Err != nil {
			t.Fatalf("the replica refused %+v: %v", b, res.Err)
		}
	}
	mine, _ := s.ScanKeys(ctx, 0, "", 0)
	theirs, _ := replica.store.ScanKeys(ctx, 0, "", 0)
	if !slices.Equal(ids(mine), ids(theirs)) {
		t.Fatalf("the replica holds %v, its master %v", ids(theirs), ids(mine))
	}
}

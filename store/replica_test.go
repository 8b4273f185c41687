package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/store/engine"
	"github.com/shoal-db/shoal/store/pebbleengine"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func doc(id string, epoch, seq uint64, version int64, deleted bool) *Doc {
	d := &Doc{Key: DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Version: version,
		Pos: Position{Epoch: epoch, Seq: seq}, Deleted: deleted, Updated: time.Unix(1, 0).UTC()}
	if !deleted {
		d.Body = map[string]any{"v": int64(version)}
	}
	return d
}

func TestApplyIsIdempotentFencedAndGapless(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)

	b1 := Batch{Partition: 0, Epoch: 2, From: Position{}, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false)}}
	if r := w.Apply(ctx, b1); r.Err != nil || r.Applied != (Position{Epoch: 2, Seq: 2}) {
		t.Fatalf("first batch: %+v", r)
	}
	// The same batch again changes nothing.
	if r := w.Apply(ctx, b1); r.Err != nil || r.Applied != (Position{Epoch: 2, Seq: 2}) {
		t.Fatalf("repeated batch: %+v", r)
	}
	// A batch that starts past what is held leaves a gap: refused.
	gap := Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 2, Seq: 5}, UpTo: Position{Epoch: 2, Seq: 6}, Docs: []*Doc{doc("c", 2, 6, 1, false)}}
	if r := w.Apply(ctx, gap); !errors.Is(r.Err, ErrGap) || r.Applied != (Position{Epoch: 2, Seq: 2}) {
		t.Fatalf("gap: %+v", r)
	}
	// A newer epoch: a delete and an update; an older document state is skipped.
	b2 := Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 2}, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 3, Seq: 4},
		Docs: []*Doc{doc("a", 3, 3, 2, true), doc("b", 2, 1, 0, false)}}
	if r := w.Apply(ctx, b2); r.Err != nil || r.Applied != (Position{Epoch: 3, Seq: 4}) || r.Epoch != 3 {
		t.Fatalf("epoch 3 batch: %+v", r)
	}
	a, _ := w.Get(ctx, 0, DocKey("u", "c", "a"))
	b, _ := w.Get(ctx, 0, DocKey("u", "c", "b"))
	if !a.Deleted || a.Version != 2 || b.Version != 1 {
		t.Fatalf("after epoch 3: a %+v, b %+v", a, b)
	}
	// A batch from an older epoch than seen: refused, answering the newest.
	stale := Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 3, Seq: 4}, UpTo: Position{Epoch: 3, Seq: 5}, Docs: []*Doc{doc("z", 2, 9, 1, false)}}
	if r := w.Apply(ctx, stale); !errors.Is(r.Err, ErrStaleEpoch) || r.Epoch != 3 {
		t.Fatalf("stale epoch: %+v", r)
	}
	if _, err := w.Get(ctx, 0, DocKey("u", "c", "z")); !errors.Is(err, ErrNotFound) {
		t.Fatal("a refused batch wrote a document")
	}
	// The applied position is durable once synced (a replica answers only
	// after SyncApplied).
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if p, seen, err := s.Applied(ctx, 0); err != nil || p != (Position{Epoch: 3, Seq: 4}) || seen != 3 {
		t.Fatalf("stored applied position %v, newest epoch %d, %v", p, seen, err)
	}
	// After a restart the newest epoch seen still refuses older masters.
	w2 := NewWriter(s, 1, WriterOptions{})
	defer w2.Close(ctx)
	if err := w2.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if r := w2.Apply(ctx, stale); !errors.Is(r.Err, ErrStaleEpoch) {
		t.Fatalf("stale epoch after a restart: %+v", r)
	}
	// A master takes no batches for its own partition.
	m := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 9, true }})
	defer m.Close(ctx)
	if r := m.Apply(ctx, Batch{Partition: 0, Epoch: 9, From: Position{Epoch: 3, Seq: 4}}); !errors.Is(r.Err, ErrIsMaster) {
		t.Fatalf("master applied a batch: %+v", r)
	}
}

func TestScanAfterReturnsTheLogInPositionOrder(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{})
	defer w.Close(ctx)
	w.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: Position{Epoch: 2, Seq: 3},
		Docs: []*Doc{doc("x", 2, 3, 1, false), doc("y", 1, 7, 1, false), doc("z", 2, 1, 1, true)}})
	docs, err := s.ScanAfter(ctx, 0, Position{Epoch: 1, Seq: 7}, 10)
	if err != nil || len(docs) != 2 || docs[0].ID != "z" || docs[1].ID != "x" {
		t.Fatalf("scan after 1.7: %v %v", ids(docs), err)
	}
}

func ids(ds []*Doc) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID+"@"+d.Pos.String())
	}
	return out
}

// A node that was master at epoch 2 holds a change (2.3) its successor,
// whose epoch 3 started from 2.2, never had: the change is kept in the
// rollback collection, the master restores the document, and the node then
// holds exactly the master's state.
func TestDivergedChangesAreRolledBackAndRestored(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false)}})
	// Its own unreplicated writes as master at epoch 2: b changed, c created.
	w.Apply(ctx, Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 2, Seq: 4},
		Docs: []*Doc{doc("b", 2, 3, 2, false), doc("c", 2, 4, 1, false)}})

	probe := Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 2}}
	r := w.Apply(ctx, probe)
	if !errors.Is(r.Err, ErrDiverged) || len(r.Diverged) != 2 || r.Applied != (Position{Epoch: 2, Seq: 2}) {
		t.Fatalf("probe from the new master: %+v", r)
	}
	kept, err := s.Rollbacks(ctx, 10)
	if err != nil || len(kept) != 2 || kept[0].Body == nil {
		t.Fatalf("rollback collection: %+v %v", kept, err)
	}
	// Kept once even if the probe is repeated.
	w.Apply(ctx, probe)
	if again, _ := s.Rollbacks(ctx, 10); len(again) != 2 {
		t.Fatalf("rollback records after a repeated probe: %d", len(again))
	}
	// The master's states: b as it had it (version 1 at 2.2), c unknown.
	restore := Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 2}, From: Position{Epoch: 2, Seq: 2},
		UpTo: Position{Epoch: 2, Seq: 2}, Restore: true, Docs: []*Doc{doc("b", 2, 2, 1, false)}, Absent: []string{DocKey("u", "c", "c")}}
	if r := w.Apply(ctx, restore); r.Err != nil || r.Applied != (Position{Epoch: 2, Seq: 2}) {
		t.Fatalf("restore: %+v", r)
	}
	if b, _ := w.Get(ctx, 0, DocKey("u", "c", "b")); b == nil || b.Version != 1 {
		t.Fatalf("b after restore: %+v", b)
	}
	if _, err := w.Get(ctx, 0, DocKey("u", "c", "c")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("c after restore: %v", err)
	}
	// Then the new epoch's changes apply as usual.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 2}, From: Position{Epoch: 2, Seq: 2},
		UpTo: Position{Epoch: 3, Seq: 3}, Docs: []*Doc{doc("a", 3, 3, 2, false)}}); r.Err != nil {
		t.Fatalf("after the rollback: %+v", r)
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 2}, From: Position{Epoch: 3, Seq: 3},
		UpTo: Position{Epoch: 3, Seq: 4}, Docs: []*Doc{doc("b", 3, 4, 2, false)}}); r.Err != nil {
		t.Fatalf("b's next version: %+v", r)
	}
	// The same restore arriving late (its request held up, by a pause of
	// this node or the network) is refused: it would write b's older state
	// over the newer one and move the partition back to 2.2.
	if r := w.Apply(ctx, restore); !errors.Is(r.Err, ErrGap) || r.Applied != (Position{Epoch: 3, Seq: 4}) {
		t.Fatalf("a late restore: %+v", r)
	}
	if b, _ := w.Get(ctx, 0, DocKey("u", "c", "b")); b == nil || b.Version != 2 {
		t.Fatalf("b after a late restore: %+v", b)
	}
	if got := w.Applied(0); got != (Position{Epoch: 3, Seq: 4}) {
		t.Fatalf("applied after a late restore: %v", got)
	}
}

// The records of the partitions survive a restart through the mongo
// engine's applied log, across its compactions, the newest entry winning.
func TestAppliedLogSurvivesRestartsAndCompactions(t *testing.T) {
	ctx := context.Background()
	s := openMongoStore(t)
	w := NewWriter(s, 8, WriterOptions{})
	for i := 1; i <= appliedCompactEvery+100; i++ {
		w.setRecord(appliedDoc{Partition: i % 8, Epoch: 2, Seq: uint64(i), Seen: 2})
		if err := w.SyncApplied(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w.Close(ctx)
	var n int64
	var err error
	for _, name := range appliedCollections {
		c, cerr := s.db.Collection(name).CountDocuments(ctx, bson.D{})
		n, err = n+c, errors.Join(err, cerr)
	}
	if err != nil || n > appliedCompactEvery+1 {
		t.Fatalf("the applied log holds %d entries (%v); compaction should keep it under %d", n, err, appliedCompactEvery+1)
	}
	w2 := NewWriter(s, 8, WriterOptions{})
	defer w2.Close(ctx)
	if err := w2.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	last := appliedCompactEvery + 100
	for p := 0; p < 8; p++ {
		// The last i with i%8 == p.
		want := last - ((last - p) % 8)
		if got := w2.Applied(p); got != (Position{Epoch: 2, Seq: uint64(want)}) {
			t.Errorf("partition %d: applied %s after a restart, want 2.%d", p, got, want)
		}
	}
}

// A master cut off deletes a document (write concern 1, never
// replicated), stays away longer than the tombstone retention and purges
// the tombstone; back as a replica of the new master, which still has the
// document, it must not keep lacking it: it asks for a full copy, takes
// nothing else until the copy's last chunk, and ends with the document.
func TestPurgedDeletesOfAnAbandonedHistoryAskForAFullCopy(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	w := NewWriter(s, 1, WriterOptions{Epoch: 2, CacheBytes: 1 << 20})
	defer w.Close(ctx)
	put1 := put(map[string]any{"n": int64(1)})
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "d", Mutate: put1}); r.Err != nil || r.Doc.Pos != (Position{Epoch: 2, Seq: 1}) {
		t.Fatalf("create: %+v", r)
	}
	del := func(*Doc) (Next, error) { return Next{Delete: true}, nil }
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "d", Mutate: del}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if n, err := w.PurgeTombstones(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
	// The new master took over at epoch 3 from 2.1: it has d.
	d := doc("d", 2, 1, 1, false)
	x := doc("x", 3, 2, 1, false)
	start := Position{Epoch: 2, Seq: 1}
	live := Batch{Partition: 0, Epoch: 3, EpochStart: start, From: start, UpTo: Position{Epoch: 3, Seq: 2}, Docs: []*Doc{x}}
	if r := w.Apply(ctx, live); !errors.Is(r.Err, ErrNeedsFullCopy) || r.Applied != (Position{}) {
		t.Fatalf("first batch of the new master: %+v, want a request for a full copy", r)
	}
	if r := w.Apply(ctx, live); !errors.Is(r.Err, ErrNeedsFullCopy) {
		t.Fatalf("a live batch before the full copy: %+v", r)
	}
	full := Batch{Partition: 0, Epoch: 3, EpochStart: start, UpTo: Position{Epoch: 3, Seq: 2}, Docs: []*Doc{d, x}, Full: true}
	if r := w.Apply(ctx, full); r.Err != nil || r.Applied != (Position{Epoch: 3, Seq: 2}) {
		t.Fatalf("full copy: %+v", r)
	}
	if got, err := w.Get(ctx, 0, DocKey("u", "c", "d")); err != nil || got.Deleted || got.Pos != d.Pos {
		t.Fatalf("after the full copy d is %+v %v; the master has it", got, err)
	}
	next := Batch{Partition: 0, Epoch: 3, EpochStart: start, From: Position{Epoch: 3, Seq: 2}, UpTo: Position{Epoch: 3, Seq: 3}, Docs: []*Doc{doc("y", 3, 3, 1, false)}}
	if r := w.Apply(ctx, next); r.Err != nil {
		t.Fatalf("live batches follow the full copy: %+v", r)
	}
}

// A batch whose insert the store refused must not count as held: the
// retry stores it (before, the failed insert's documents were cached as if
// stored, the retry skipped them as already held and was acknowledged, and
// the store lacked them).
func TestARefusedInsertIsStoredByTheRetry(t *testing.T) {
	ctx := context.Background()
	mongo := storetest.Start(t)
	s, err := Open(ctx, Options{URI: mongo.URI, Database: "shoal"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	first := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 1}, Docs: []*Doc{doc("a", 2, 1, 1, false)}}
	if r := w.Apply(ctx, first); r.Err != nil {
		t.Fatalf("first batch: %+v", r)
	}
	second := Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 2, Seq: 1}, UpTo: Position{Epoch: 2, Seq: 3},
		Docs: []*Doc{doc("b", 2, 2, 1, false), doc("c", 2, 3, 1, false)}}
	unlock := mongo.LockWrites(t, "shoal")
	r := w.Apply(ctx, second)
	unlock()
	if r.Err == nil {
		t.Fatalf("the store was locked, yet the batch was applied: %+v", r)
	}
	if r.Applied != (Position{Epoch: 2, Seq: 1}) {
		t.Fatalf("a refused batch moved the applied position to %s", r.Applied)
	}
	if r := w.Apply(ctx, second); r.Err != nil || r.Applied != (Position{Epoch: 2, Seq: 3}) {
		t.Fatalf("retry: %+v", r)
	}
	for _, id := range []string{"b", "c"} {
		if _, err := s.Get(ctx, 0, DocKey("u", "c", id)); err != nil {
			t.Errorf("%s: acknowledged at 2.3 but the store answers %v", id, err)
		}
	}
}

// A node that was a partition's master and lost or handed over the lease
// holds its own tenure's history up to its last write: the promotion rule
// compares that position with the other copies'. Before, it answered the
// position it had last applied as a replica (nothing, for a node that was
// master from the start), so a former master with the complete history
// could never be chosen, and a partition whose handoff failed had nobody
// to campaign for it.
func TestAFormerMasterHoldsItsOwnTenure(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	holding := true
	w := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 2, holding }})
	defer w.Close(ctx)
	for _, id := range []string{"a", "b", "c"} {
		if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: id, Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	holding = false
	if got, want := w.Applied(0), (Position{Epoch: 2, Seq: 3}); got != want {
		t.Fatalf("after its lease ended the former master holds %s, want its last write %s", got, want)
	}
	// A later master's batch that follows on moves it on as a replica.
	b := Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 3}, From: Position{Epoch: 2, Seq: 3},
		UpTo: Position{Epoch: 3, Seq: 4}, Docs: []*Doc{doc("d", 3, 4, 1, false)}}
	if r := w.Apply(ctx, b); r.Err != nil || r.Applied != (Position{Epoch: 3, Seq: 4}) {
		t.Fatalf("the next master's first batch: %+v", r)
	}
	if got := w.Applied(0); got != (Position{Epoch: 3, Seq: 4}) {
		t.Fatalf("as a replica it holds %s, want 3.4", got)
	}
}

// Once a replica has answered a newer master "diverged" (or "gap"), that
// master's epoch counts as seen: a late batch of the old master must be
// refused, not land between the rollback and the restore as a change no
// rollback lists.
func TestAnOldMastersLateBatchIsRefusedAfterADivergenceAnswer(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The new master's epoch 3 started from 2.1: b is a change it never had.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: Position{Epoch: 2, Seq: 1}}); !errors.Is(r.Err, ErrDiverged) {
		t.Fatalf("probe of the new master: %+v", r)
	}
	late := Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 2, Seq: 3},
		Docs: []*Doc{doc("c", 2, 3, 1, false)}}
	if r := w.Apply(ctx, late); !errors.Is(r.Err, ErrStaleEpoch) {
		t.Fatalf("the old master's late batch after the divergence answer: %+v, want refused as stale", r)
	}
	if _, err := w.Get(ctx, 0, DocKey("u", "c", "c")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old master's late document is here (%v) and in no rollback", err)
	}
	// A gap answer counts the epoch as seen too.
	w2 := NewWriter(openTestStore(t), 1, WriterOptions{})
	defer w2.Close(ctx)
	if r := w2.Apply(ctx, Batch{Partition: 0, Epoch: 5, From: Position{Epoch: 4, Seq: 9}, UpTo: Position{Epoch: 5, Seq: 10}}); !errors.Is(r.Err, ErrGap) || r.Epoch != 5 {
		t.Fatalf("a batch past what is held: %+v, want a gap answer at epoch 5", r)
	}
	if r := w2.Apply(ctx, Batch{Partition: 0, Epoch: 4, UpTo: Position{Epoch: 4, Seq: 1}, Docs: []*Doc{doc("x", 4, 1, 1, false)}}); !errors.Is(r.Err, ErrStaleEpoch) {
		t.Fatalf("an older master after the gap answer: %+v, want refused as stale", r)
	}
}

// A restore of diverged documents cut short (it goes in chunks) is
// resumed: until every diverged document is restored, each batch of the
// new master is answered "diverged" with what is left, and only then do
// its batches apply. Before, the first restore chunk made the new epoch
// "seen", the next catch-up no longer looked for divergence, and the rest
// of the diverged documents stayed live.
func TestAnInterruptedRestoreIsResumed(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	start := Position{Epoch: 2, Seq: 1}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 4},
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("x1", 2, 2, 1, false), doc("x2", 2, 3, 1, false), doc("x3", 2, 4, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start})
	if !errors.Is(r.Err, ErrDiverged) || len(r.Diverged) != 3 {
		t.Fatalf("probe of the new master: %+v", r)
	}
	key := func(id string) string { return DocKey("u", "c", id) }
	// The first restore chunk only; the master never had x1.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start, From: start, UpTo: start, Restore: true,
		Absent: []string{key("x1")}}); r.Err != nil {
		t.Fatalf("restore chunk 1: %+v", r)
	}
	catchUp := Batch{Partition: 0, Epoch: 3, EpochStart: start, From: start, UpTo: Position{Epoch: 3, Seq: 5},
		Docs: []*Doc{doc("y", 3, 5, 1, false)}}
	r = w.Apply(ctx, catchUp)
	if !errors.Is(r.Err, ErrDiverged) || len(r.Diverged) != 2 {
		t.Fatalf("a catch-up before the restore is finished: %+v, want diverged with x2 and x3 left", r)
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start, From: start, UpTo: start, Restore: true,
		Absent: []string{key("x2"), key("x3")}}); r.Err != nil {
		t.Fatalf("restore chunk 2: %+v", r)
	}
	if r := w.Apply(ctx, catchUp); r.Err != nil || r.Applied != (Position{Epoch: 3, Seq: 5}) {
		t.Fatalf("catch-up after the restore: %+v", r)
	}
	for _, id := range []string{"x1", "x2", "x3"} {
		if _, err := w.Get(ctx, 0, key(id)); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s, never on the master, is still live here (%v)", id, err)
		}
	}
	if kept, _ := s.Rollbacks(ctx, 10); len(kept) != 3 {
		t.Errorf("the rollback collection holds %d changes, want the 3 diverged ones", len(kept))
	}
	// Finished means finished: after a restart nothing is looked for again.
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)
	w2 := NewWriter(s, 1, WriterOptions{})
	defer w2.Close(ctx)
	if err := w2.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if r := w2.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start, From: Position{Epoch: 3, Seq: 5}, UpTo: Position{Epoch: 3, Seq: 6},
		Docs: []*Doc{doc("z", 3, 6, 1, false)}}); r.Err != nil {
		t.Fatalf("a live batch after a restart: %+v", r)
	}
}

// A former master still holds its own tenure's writes after a restart: its
// tenure is recorded before the tenure's first write is acknowledged.
// Before, a restarted former master counted only what it had applied as a
// replica, so after a full-cluster restart the promotion rule could prefer
// a stale copy to the node that took the latest majority writes.
func TestAFormerMasterHoldsItsOwnTenureAfterARestart(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	w := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 3, true }})
	for _, id := range []string{"a", "b"} {
		if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: id, Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	w.Close(ctx)
	w2 := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 0, false }})
	defer w2.Close(ctx)
	if err := w2.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := w2.Applied(0), (Position{Epoch: 3, Seq: 2}); got != want {
		t.Fatalf("after a restart the former master holds %s, want its last write %s", got, want)
	}
}

// A replica promoted while a catch-up was under way holds documents newer
// than its complete position: its epoch starts at the complete position,
// never at the newest document it happens to hold (issue 11, case 2).
func TestANewTenureStartsAtTheCompletePosition(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	holding := false
	w := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 2, holding }})
	defer w.Close(ctx)
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: Position{Epoch: 1, Seq: 2},
		Docs: []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 2, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// A chunk of a catch-up: stored, but the replica is complete only up
	// to 1.2 until the final chunk.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, From: Position{Epoch: 1, Seq: 2}, UpTo: Position{Epoch: 1, Seq: 2},
		Docs: []*Doc{doc("e", 1, 5, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	holding = true
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "x", Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got, want := w.EpochStart(0, 2), (Position{Epoch: 1, Seq: 2}); got != want {
		t.Fatalf("epoch 2 starts at %s, want the complete position %s (not the newest document held, 1.5)", got, want)
	}
}

// A node that was master at epoch 2 holds x (2.5), a change the next
// master, whose epoch 3 started from 2.1, never had; that master then
// began a second tenure, epoch 4, from 3.4. Its batches carry its epoch
// chain [(3, 2.1), (4, 3.4)]: x is of epoch 2 and after the start of
// epoch 3, so it is rolled back, and the node answers that its history
// agrees with the master's up to 2.1 (not 3.4: it lacks epoch 3's
// changes); after the restore and a catch-up from 2.1 it holds exactly the
// master's state. Before, only the epoch start (3.4) was compared: x,
// older than it, stayed live here and no rollback listed it (issue 11,
// item 4).
func TestAChangeOfAnAbandonedEpochIsRolledBackAfterTwoMasterChanges(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	key := func(id string) string { return DocKey("u", "c", id) }
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 5},
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("x", 2, 5, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	chain := []EpochStart{{Epoch: 3, Start: Position{Epoch: 2, Seq: 1}}, {Epoch: 4, Start: Position{Epoch: 3, Seq: 4}}}
	start, agreed := Position{Epoch: 3, Seq: 4}, Position{Epoch: 2, Seq: 1}
	live := Batch{Partition: 0, Epoch: 4, EpochStart: start, Epochs: chain, From: start, UpTo: Position{Epoch: 4, Seq: 5},
		Docs: []*Doc{doc("c", 4, 5, 1, false)}}
	r := w.Apply(ctx, live)
	if !errors.Is(r.Err, ErrDiverged) || !slices.Equal(r.Diverged, []string{key("x")}) || r.Applied != agreed {
		t.Fatalf("the first batch of epoch 4: %+v, want diverged with x, agreeing up to %s", r, agreed)
	}
	kept, err := s.Rollbacks(ctx, 10)
	if err != nil || len(kept) != 1 || kept[0].ID != "x" || kept[0].Position != (Position{Epoch: 2, Seq: 5}) {
		t.Fatalf("rollback collection: %+v %v, want x@2.5", kept, err)
	}
	// The master has no record of x.
	restore := Batch{Partition: 0, Epoch: 4, EpochStart: start, Epochs: chain, From: agreed, UpTo: agreed, Restore: true,
		Absent: []string{key("x")}}
	if r := w.Apply(ctx, restore); r.Err != nil || r.Applied != agreed {
		t.Fatalf("restore: %+v", r)
	}
	// The catch-up from the agreement point brings epoch 3's changes too.
	catchUp := Batch{Partition: 0, Epoch: 4, EpochStart: start, Epochs: chain, From: agreed, UpTo: Position{Epoch: 4, Seq: 5},
		Docs: []*Doc{doc("b", 3, 2, 1, false), doc("y", 3, 4, 1, false), doc("c", 4, 5, 1, false)}}
	if r := w.Apply(ctx, catchUp); r.Err != nil || r.Applied != (Position{Epoch: 4, Seq: 5}) {
		t.Fatalf("catch-up from %s: %+v", agreed, r)
	}
	all, err := s.ScanKeys(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(all), []string{"a@2.1", "b@3.2", "c@4.5", "y@3.4"}; !slices.Equal(got, want) {
		t.Fatalf("the node holds %v, the master %v", got, want)
	}
	if kept, _ := s.Rollbacks(ctx, 10); len(kept) != 1 {
		t.Fatalf("the rollback collection holds %d changes, want x only", len(kept))
	}
}

// The search for divergent changes reads the partition in pages: all of
// them are found when they span several.
func TestTheSearchForDivergedChangesGoesInPages(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{})
	defer w.Close(ctx)
	n := 2*rollbackScan + 50
	var docs []*Doc
	for i := 1; i <= n; i++ {
		docs = append(docs, doc(fmt.Sprintf("d%04d", i), 2, uint64(i), 1, false))
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: uint64(n)}, Docs: docs}); r.Err != nil {
		t.Fatal(r.Err)
	}
	start := Position{Epoch: 2, Seq: 10}
	r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start, Epochs: []EpochStart{{Epoch: 3, Start: start}}})
	if !errors.Is(r.Err, ErrDiverged) || len(r.Diverged) != n-10 || r.Applied != start {
		t.Fatalf("probe: %v, %d diverged, applied %s; want %d after %s", r.Err, len(r.Diverged), r.Applied, n-10, start)
	}
}

// A replica answers its master after SyncApplied (replicate.Apply): what
// it answers survives a crash of the machine then, its documents
// included, though they were written without waiting for the disk
// (engine.Deferring) and only the applied positions' write was synced.
// The crash is a clone of a file system that keeps only what was synced.
func TestAReplicasAnsweredPositionSurvivesACrash(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	dataDir := t.TempDir()
	w := NewWriter(openOn(t, dataDir, fs), 2, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	// New documents (inserted), then a change to one of them (replaced),
	// in two partitions.
	for p := range 2 {
		b1 := Batch{Partition: p, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2},
			Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false)}}
		b2 := Batch{Partition: p, Epoch: 2, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 2, Seq: 3},
			Docs: []*Doc{doc("a", 2, 3, 2, false)}}
		for _, b := range []Batch{b1, b2} {
			if r := w.Apply(ctx, b); r.Err != nil || r.Applied != b.UpTo {
				t.Fatalf("partition %d: applying up to %s: %+v", p, b.UpTo, r)
			}
		}
	}
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}

	after := NewWriter(openOn(t, dataDir, fs.CrashClone(vfs.CrashCloneCfg{})), 2, WriterOptions{CacheBytes: 1 << 20})
	defer after.Close(ctx)
	if err := after.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		if got, want := after.Applied(p), (Position{Epoch: 2, Seq: 3}); got != want {
			t.Fatalf("partition %d: applied %s after the crash, answered %s", p, got, want)
		}
		a, err := after.Get(ctx, p, DocKey("u", "c", "a"))
		if err != nil || a.Version != 2 {
			t.Fatalf("partition %d: a after the crash: %+v, %v", p, a, err)
		}
		if _, err := after.Get(ctx, p, DocKey("u", "c", "b")); err != nil {
			t.Fatalf("partition %d: b after the crash: %v", p, err)
		}
	}
}

// A batch that stores documents without moving the applied position (a
// catch-up's chunk, a piece of a run too long for one request: UpTo ==
// From) is answered after SyncApplied too, with nothing of the records to
// write: its documents must be durable all the same. Otherwise a replica
// that crashed after answering takes the rest of the run (From still
// where it was) and claims its end without the piece (the reviewer's
// scenario: "Applied 2.4, c not found").
func TestAPieceThatLeavesThePositionIsDurableWhenAnswered(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	dataDir := t.TempDir()
	open := func(fs vfs.FS) *Writer {
		t.Helper()
		w := NewWriter(openOn(t, dataDir, fs), 1, WriterOptions{CacheBytes: 1 << 20})
		t.Cleanup(func() { w.Close(ctx) })
		if err := w.LoadAll(ctx); err != nil {
			t.Fatal(err)
		}
		return w
	}
	apply := func(w *Writer, b Batch) {
		t.Helper()
		if r := w.Apply(ctx, b); r.Err != nil || r.Applied != b.UpTo {
			t.Fatalf("applying %s..%s: %+v", b.From, b.UpTo, r)
		}
		if err := w.SyncApplied(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w := open(fs)
	apply(w, Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false)}})
	// The piece: c at 2.3, the position left at 2.2.
	apply(w, Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{doc("c", 2, 3, 1, false)}})

	after := open(fs.CrashClone(vfs.CrashCloneCfg{}))
	if _, err := after.Get(ctx, 0, DocKey("u", "c", "c")); err != nil {
		t.Fatalf("the piece answered before the crash: c after it: %v", err)
	}
	// The rest of the run, from where the position was.
	apply(after, Batch{Partition: 0, Epoch: 2, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 2, Seq: 4},
		Docs: []*Doc{doc("d", 2, 4, 1, false)}})
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, err := after.Get(ctx, 0, DocKey("u", "c", id)); err != nil {
			t.Fatalf("applied up to 2.4, yet %s: %v", id, err)
		}
	}
}

// openOn opens the embedded store of dataDir on the file system fs (one
// that can crash: vfs.NewCrashableMem, or a crash's clone of one), closed
// when the test ends.
func openOn(t *testing.T, dataDir string, fs vfs.FS) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{Database: "shoal", DataDir: dataDir, fs: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	return s
}

// engineLookups is how many states and counts s's embedded engine has
// read to keep its indexes (pebbleengine.Engine.Lookups).
func engineLookups(t *testing.T, s *Store) int64 {
	t.Helper()
	e, ok := s.docs.(observed).e.(*pebbleengine.Engine)
	if !ok {
		t.Fatalf("the store's engine is %T, not the embedded one", s.docs)
	}
	return e.Lookups()
}

// liveCount is the number of live documents of u's collection c in
// partition 0, as the store counts them.
func liveCount(t *testing.T, s *Store) int64 {
	t.Helper()
	counts, err := s.Collections(context.Background(), 0, "u")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.Name == "c" {
			return c.Count
		}
	}
	return 0
}

// newDoc is doc as its master's write of a key it held no state of.
func newDoc(id string, epoch, seq uint64) *Doc {
	d := doc(id, epoch, seq, 1, false)
	d.New = true
	return d
}

// A replica stores the documents its master created (record.Doc.New)
// without looking their keys up, and a run sent again is still found
// held (its documents are not counted twice), with or without the cache.
func TestAReplicaStoresItsMastersNewDocumentsWithoutALookup(t *testing.T) {
	withAndWithoutCache(t, func(t *testing.T, s *Store, w *Writer) {
		ctx := context.Background()
		run := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 3},
			Docs: []*Doc{newDoc("a", 2, 1), newDoc("b", 2, 2), newDoc("c", 2, 3)}}
		before := engineLookups(t, s)
		if r := w.Apply(ctx, run); r.Err != nil {
			t.Fatalf("the run: %+v", r)
		}
		if got := engineLookups(t, s) - before; got != 1 {
			t.Fatalf("storing 3 new documents read %d states or counts, want 1 (the collection's count)", got)
		}
		// The same documents again, as a run from the start: held.
		again := run
		again.UpTo = Position{Epoch: 2, Seq: 4}
		again.Docs = append(slices.Clone(run.Docs), newDoc("d", 2, 4))
		if r := w.Apply(ctx, again); r.Err != nil || r.Applied != again.UpTo {
			t.Fatalf("the run again: %+v", r)
		}
		if n := liveCount(t, s); n != 4 {
			t.Fatalf("4 documents counted %d times", n)
		}
		if all, err := s.ScanAfter(ctx, 0, Position{}, 0); err != nil || len(all) != 4 {
			t.Fatalf("the history holds %d states (%v), want 4", len(all), err)
		}
	})
}

// A document its master created anew over a tombstone that the master
// purged and this replica still holds is looked up: stored without a
// look, the tombstone would stay in the indexes beside it.
func TestANewDocumentOverATombstoneTheMasterPurgedReplacesIt(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 0})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	first := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{newDoc("a", 2, 1), doc("a", 2, 2, 2, true)}}
	if r := w.Apply(ctx, first); r.Err != nil {
		t.Fatalf("the create and delete: %+v", r)
	}
	// The master purged its tombstone of a and created a again.
	again := Batch{Partition: 0, Epoch: 2, From: first.UpTo, UpTo: Position{Epoch: 2, Seq: 3},
		Docs: []*Doc{newDoc("a", 2, 3)}}
	if r := w.Apply(ctx, again); r.Err != nil {
		t.Fatalf("the new a: %+v", r)
	}
	if tombs, err := s.tombstones(ctx, 0, time.Time{}, time.Time{}, 0); err != nil || len(tombs) != 0 {
		t.Fatalf("tombstones left beside the new document: %v (%v)", ids(tombs), err)
	}
	if all, err := s.ScanAfter(ctx, 0, Position{}, 0); err != nil || len(all) != 1 || all[0].Pos != again.UpTo {
		t.Fatalf("the history holds %v (%v), want a at %s alone", ids(all), err, again.UpTo)
	}
	if n := liveCount(t, s); n != 1 {
		t.Fatalf("one live document counted %d times", n)
	}
}

// failingCommits is an engine whose deferred commits fail (its inserts
// succeed).
type failingCommits struct{ engine.Deferring }

func (failingCommits) CommitDeferred(context.Context, int, []engine.Write) error {
	return fmt.Errorf("%w: the test's engine fails every commit", ErrUnavailable)
}

// A run whose apply failed after it stored some of its documents is
// looked up key by key when it comes again, also when the cache no longer
// holds them: taken as new, they would be counted twice. The runs after
// it take the shortcut again (the newest stored position read anew).
func TestARunSentAgainAfterAFailedApplyIsLookedUp(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	first := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 1}, Docs: []*Doc{newDoc("b", 2, 1)}}
	if r := w.Apply(ctx, first); r.Err != nil {
		t.Fatalf("the first run: %+v", r)
	}
	// a is new and inserted; b, cached, is replaced by a commit, which
	// fails.
	run := Batch{Partition: 0, Epoch: 2, From: first.UpTo, UpTo: Position{Epoch: 2, Seq: 3},
		Docs: []*Doc{newDoc("a", 2, 2), doc("b", 2, 3, 2, false)}}
	working := s.deferring
	s.deferring = failingCommits{working}
	if r := w.Apply(ctx, run); r.Err == nil {
		t.Fatalf("the run was applied over failing commits: %+v", r)
	}
	s.deferring = working
	w.cache.forget(0, DocKey("u", "c", "a"))
	if r := w.Apply(ctx, run); r.Err != nil || r.Applied != run.UpTo {
		t.Fatalf("the run again: %+v", r)
	}
	if n := liveCount(t, s); n != 2 {
		t.Fatalf("2 documents counted %d times", n)
	}
	// The newest stored position read again, the master's new documents
	// are stored without a lookup again.
	next := Batch{Partition: 0, Epoch: 2, From: run.UpTo, UpTo: Position{Epoch: 2, Seq: 5},
		Docs: []*Doc{newDoc("d", 2, 4), newDoc("e", 2, 5)}}
	before := engineLookups(t, s)
	if r := w.Apply(ctx, next); r.Err != nil || r.Applied != next.UpTo {
		t.Fatalf("the next run: %+v", r)
	}
	if got := engineLookups(t, s) - before; got != 0 {
		t.Fatalf("storing 2 new documents after the run came again read %d states or counts, want none (the collection's count is known)", got)
	}
	if n := liveCount(t, s); n != 4 {
		t.Fatalf("4 documents counted %d times", n)
	}
}

// failingDocCommits is an engine whose synced commits of documents fail
// (its removes succeed).
type failingDocCommits struct{ engine.Documents }

func (failingDocCommits) Commit(context.Context, int, []engine.Write) error {
	return fmt.Errorf("%w: the test's engine fails every commit", ErrUnavailable)
}

// A full copy's chunk that removes a document whose delete the master
// purged, then fails to write the rest, leaves the copy with the master's
// horizon, durably: before, it kept its own, and as a master it would
// not have sent a full copy to a copy still holding that document.
func TestAFullCopysChunkCutShortKeepsTheHorizonItRemovedUnder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openOn(t, dir, nil)
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	run := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2},
		Docs: []*Doc{doc("k", 2, 1, 1, false), doc("j", 2, 2, 1, false)}}
	if r := w.Apply(ctx, run); r.Err != nil {
		t.Fatalf("the run: %+v", r)
	}
	// The master deleted k at 2.3, purged the tombstone, and sends a full
	// copy: j, and l written since.
	horizon := Position{Epoch: 2, Seq: 3}
	full := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 4}, Full: true, Horizon: horizon,
		Docs: []*Doc{doc("j", 2, 2, 1, false), doc("l", 2, 4, 1, false)}}
	working := s.docs
	s.docs = failingDocCommits{working}
	r := w.Apply(ctx, full)
	s.docs = working
	if r.Err == nil {
		t.Fatalf("the chunk was applied over failing commits: %+v", r)
	}
	if _, err := s.Get(ctx, 0, DocKey("u", "c", "k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("k after the chunk: %v; the test expects the chunk to have removed it", err)
	}
	if got := w.Horizon(0); got.Compare(horizon) < 0 {
		t.Fatalf("k is gone, and the copy's horizon is %s, below the master's %s", got, horizon)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	s = openOn(t, dir, nil)
	w = NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Horizon(0); got.Compare(horizon) < 0 {
		t.Fatalf("after a restart the copy's horizon is %s, below the master's %s", got, horizon)
	}
}

// After a restart, a replica reads whether each partition's copy holds a
// tombstone: one that holds none stores its master's new documents
// without a lookup at once, as before the restart (it used to take every
// partition with a document as holding tombstones, and looked up every
// new document until the first purge, up to 10 minutes later); one that
// holds a tombstone looks them up.
func TestAfterARestartOnlyACopyHoldingATombstoneLooksUpNewDocuments(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openAt(t, dir)
	w := NewWriter(s, 2, WriterOptions{CacheBytes: 1 << 20})
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		run := Batch{Partition: p, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 2}, Docs: []*Doc{newDoc("a", 2, 1), newDoc("b", 2, 2)}}
		if p == 1 {
			run.Docs[1] = doc("a", 2, 2, 2, true) // a deleted: a tombstone
		}
		if r := w.Apply(ctx, run); r.Err != nil {
			t.Fatalf("partition %d: %+v", p, r)
		}
	}
	if err := w.SyncApplied(ctx); err != nil { // as a replica does before it answers
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)

	s = openAt(t, dir)
	w = NewWriter(s, 2, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	for p, want := range []int64{1, 4} { // the count; the count and three keys
		run := Batch{Partition: p, Epoch: 2, From: Position{Epoch: 2, Seq: 2}, UpTo: Position{Epoch: 2, Seq: 5},
			Docs: []*Doc{newDoc("c", 2, 3), newDoc("d", 2, 4), newDoc("e", 2, 5)}}
		before := engineLookups(t, s)
		if r := w.Apply(ctx, run); r.Err != nil {
			t.Fatalf("partition %d after the restart: %+v", p, r)
		}
		if got := engineLookups(t, s) - before; got != want {
			t.Errorf("partition %d (tombstone held: %v): storing 3 new documents read %d states or counts, want %d",
				p, p == 1, got, want)
		}
	}
}

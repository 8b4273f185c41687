package store

import (
	"context"
	"errors"
	"testing"
)

// A new store's copies (Writer.MarkNew) await a full copy before they
// count: a normal batch is refused, the last chunk of a full copy ends
// the wait, the mark outlives a restart, and a tenure's first write ends
// it too. A store is new only until its meta is recorded.
func TestANewStoresCopiesAwaitAFullCopy(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	if count, _, err := s.PartitionCount(ctx); err != nil || count != 0 {
		t.Fatalf("a store no node started on: count %d, %v; want 0 (new)", count, err)
	}
	if err := s.CheckPartitionCount(ctx, "n1", 2); err != nil {
		t.Fatal(err)
	}
	if count, _, err := s.PartitionCount(ctx); err != nil || count != 2 {
		t.Fatalf("once its meta is recorded: count %d, %v; want 2 (not new)", count, err)
	}
	w := NewWriter(s, 2, WriterOptions{CacheBytes: 1 << 20})
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.MarkNew(ctx); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		if !w.Recopying(p) {
			t.Fatalf("partition %d of a new store does not await a full copy", p)
		}
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: at2(1), Docs: []*Doc{doc("a", 2, 1, 1, false)}}); !errors.Is(r.Err, ErrNeedsFullCopy) {
		t.Fatalf("a normal batch to a new store's copy: %+v, want ErrNeedsFullCopy", r)
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: at2(1), Full: true, Docs: []*Doc{doc("a", 2, 1, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if w.Recopying(0) || !w.Recopying(1) {
		t.Fatalf("after a full copy of partition 0: awaiting %v %v, want false true", w.Recopying(0), w.Recopying(1))
	}
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)

	// Restarted as partition 1's master: the mark is still there until
	// its tenure's first write.
	w = NewWriter(s, 2, WriterOptions{Epoch: 3, CacheBytes: 1 << 20})
	defer func() { w.Close(ctx) }()
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Recopying(0) || !w.Recopying(1) {
		t.Fatalf("after a restart: awaiting %v %v, want false true", w.Recopying(0), w.Recopying(1))
	}
	if r := w.Do(ctx, Op{Partition: 1, User: "u", Coll: "c", ID: "d", Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if w.Recopying(1) {
		t.Fatal("a tenure's copy still awaits a full copy after its first write")
	}
	// Whole over a copy holding documents (partition 0's full copy)
	// keeps the mark: only a full copy replaces documents of no history.
	if err := w.MarkNew(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.Untouched(0) {
		t.Fatal("a copy just marked new is not untouched")
	}
	w.Whole(0)
	awaitWriter(t, w, 0)
	if !w.Recopying(0) || w.Untouched(0) {
		t.Fatalf("Whole over a copy holding documents: awaiting %v, untouched %v; want true, false", w.Recopying(0), w.Untouched(0))
	}
}

// Whole ends the wait of a copy that holds nothing.
func TestAWholeTenureOverAnEmptyCopyEndsItsWait(t *testing.T) {
	_, w := newMarkedWriter(t)
	w.Whole(0)
	awaitWriter(t, w, 0)
	if w.Recopying(0) {
		t.Fatal("an empty copy still awaits a full copy once its tenure may write")
	}
}

// Whole is decided on the partition's writer, after what was queued
// before it: a full copy's chunk queued when a tenure is confirmed
// stores documents before Whole looks, so the copy keeps its mark (it
// holds documents of no history until the copy's last chunk). Decided
// at the call, Whole saw an empty copy and ended the wait, and the
// chunk's documents then counted as a copy's history.
func TestWholeWaitsForWhatTheWriterHasQueued(t *testing.T) {
	s, w := newMarkedWriter(t)
	ctx := context.Background()
	resume, err := w.Pause(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	horizon := Position{Epoch: 2, Seq: 8}
	chunk := &request{apply: &Batch{Partition: 0, Epoch: 2, Full: true, KeyTo: DocKey("u", "c", "m"), Horizon: horizon,
		Docs: []*Doc{doc("a", 2, 3, 1, false)}}, done: make(chan struct{})}
	if err := w.enqueue(ctx, w.parts[0], chunk); err != nil {
		t.Fatal(err)
	}
	w.Whole(0)
	resume()
	<-chunk.done
	if chunk.applied.Err != nil {
		t.Fatalf("the chunk: %+v", chunk.applied)
	}
	awaitWriter(t, w, 0)
	if !w.Recopying(0) {
		t.Fatal("a copy holding the first chunk of a full copy no longer awaits the rest of it")
	}
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := s.partitionRecord(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Recopy || (Position{Epoch: rec.HorizonEpoch, Seq: rec.HorizonSeq}) != horizon {
		t.Fatalf("the stored record: recopy %v, horizon %d.%d; want true, %v", rec.Recopy, rec.HorizonEpoch, rec.HorizonSeq, horizon)
	}
}

// awaitWriter returns once the partition's writer has handled everything
// queued before the call (a Whole among it).
func awaitWriter(t *testing.T, w *Writer, partition int) {
	t.Helper()
	resume, err := w.Pause(context.Background(), partition)
	if err != nil {
		t.Fatal(err)
	}
	resume()
}

// newMarkedWriter is a writer of one partition over a new store, its
// copy marked new (MarkNew): it awaits a full copy. The writer is closed
// when the test ends.
func newMarkedWriter(t *testing.T) (*Store, *Writer) {
	t.Helper()
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	t.Cleanup(func() { w.Close(ctx) })
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.MarkNew(ctx); err != nil {
		t.Fatal(err)
	}
	return s, w
}

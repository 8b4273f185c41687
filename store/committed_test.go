package store

import (
	"context"
	"errors"
	"testing"
)

func at2(seq uint64) Position { return Position{Epoch: 2, Seq: seq} }

// A replica learns the committed position its master ships with each
// batch it applies, capped at what it has applied; a batch it refuses (an
// older master's, or one that leaves a gap) teaches it nothing, and the
// position is not kept across a restart. New behaviour: before, batches
// carried no committed position and the writer had no Committed.
func TestAReplicaKnowsTheCommittedPositionItsMasterShipped(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer func() { w.Close(ctx) }()
	check := func(step string, want Position) {
		t.Helper()
		if got := w.Committed(0); got != want {
			t.Fatalf("%s: committed %s, want %s", step, got, want)
		}
		if got, applied := w.Committed(0), w.Applied(0); got.Compare(applied) > 0 {
			t.Fatalf("%s: committed %s is above the applied %s", step, got, applied)
		}
	}
	check("nothing applied", Position{})
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: at2(4), Committed: at2(2),
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 4, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	check("a live batch", at2(2))
	// A chunk of a catch-up: the master's committed position is beyond
	// what the chunk brings.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, From: at2(4), UpTo: at2(6), Committed: at2(9),
		Docs: []*Doc{doc("c", 2, 6, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	check("a batch behind the committed position", at2(6))
	// Refused batches: a gap, and an older master's.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, From: at2(8), UpTo: at2(9), Committed: at2(9),
		Docs: []*Doc{doc("d", 2, 9, 1, false)}}); !errors.Is(r.Err, ErrGap) {
		t.Fatalf("gap: %+v", r)
	}
	check("a refused gap", at2(6))
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, From: Position{Epoch: 1, Seq: 1}, UpTo: Position{Epoch: 1, Seq: 1},
		Committed: Position{Epoch: 1, Seq: 1}}); !errors.Is(r.Err, ErrStaleEpoch) {
		t.Fatalf("stale epoch: %+v", r)
	}
	check("an older master's batch", at2(6))
	// A notice of the committed position alone (a master whose last
	// write's acknowledgements came in) and one that says less: the
	// position never goes back.
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, From: at2(6), UpTo: at2(6), Committed: at2(6)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	check("a notice", at2(6))
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, From: at2(6), UpTo: at2(6), Committed: at2(1)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	check("a notice of less", at2(6))
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)
	w = NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	check("after a restart", Position{})
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, From: at2(6), UpTo: at2(6), Committed: at2(6)}); r.Err != nil {
		t.Fatal(r.Err)
	}
	check("the first notice after a restart", at2(6))
}

// A rollback never leaves the known committed position above what the
// copy holds of its master's history: here a master (wrongly, as a test
// of the cap) said 2.4 was committed; the next master took over from 2.2,
// and the replica rolls 2.3 and 2.4 back. New behaviour (no Committed
// before).
func TestAfterARollbackTheCommittedPositionIsNotAboveTheApplied(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, UpTo: at2(4), Committed: at2(4),
		Docs: []*Doc{doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false), doc("c", 2, 3, 1, false), doc("d", 2, 4, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := w.Committed(0); got != at2(4) {
		t.Fatalf("committed %s, want 2.4", got)
	}
	start := at2(2)
	r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start, Committed: Position{Epoch: 3, Seq: 5}})
	if !errors.Is(r.Err, ErrDiverged) || r.Applied != start {
		t.Fatalf("the new master's probe: %+v", r)
	}
	if got := w.Committed(0); got.Compare(start) > 0 {
		t.Fatalf("after the rollback the committed position is %s, above the agreement point %s (c and d are rolled back)", got, start)
	}
	restore := Batch{Partition: 0, Epoch: 3, EpochStart: start, From: start, UpTo: start, Restore: true, Committed: Position{Epoch: 3, Seq: 5},
		Absent: []string{DocKey("u", "c", "c"), DocKey("u", "c", "d")}}
	if r := w.Apply(ctx, restore); r.Err != nil {
		t.Fatalf("restore: %+v", r)
	}
	if got, applied := w.Committed(0), w.Applied(0); got != start || applied != start {
		t.Fatalf("after the restore: committed %s, applied %s; want both at %s", got, applied, start)
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: start, From: start, UpTo: Position{Epoch: 3, Seq: 5},
		Committed: Position{Epoch: 3, Seq: 5}, Docs: []*Doc{doc("e", 3, 5, 1, false)}}); r.Err != nil {
		t.Fatalf("the new master's catch-up: %+v", r)
	}
	if got := w.Committed(0); got != (Position{Epoch: 3, Seq: 5}) {
		t.Fatalf("committed %s after the new master's batch, want 3.5", got)
	}
}

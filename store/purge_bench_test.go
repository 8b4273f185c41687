package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// purgeWriter is a writer of one partition on a store of its own, both
// closed when tb ends.
func purgeWriter(tb testing.TB) (*Store, *Writer) {
	tb.Helper()
	ctx := context.Background()
	s, err := Open(ctx, Options{Database: "shoal", DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	tb.Cleanup(func() {
		w.Close(ctx)
		s.Close(ctx)
	})
	if err := w.LoadAll(ctx); err != nil {
		tb.Fatal(err)
	}
	return s, w
}

// applyTombstones applies n deletes to partition 0 as a replica, in runs
// of up to 500, from position 1.(*seq+1) on, each last changed at
// when(its seq); *seq ends at the last position.
func applyTombstones(tb testing.TB, w *Writer, seq *uint64, n int, when func(seq uint64) time.Time) {
	tb.Helper()
	for end := *seq + uint64(n); *seq < end; {
		run := Batch{Partition: 0, Epoch: 1}
		if *seq > 0 {
			run.From = Position{Epoch: 1, Seq: *seq}
		}
		for range min(500, end-*seq) {
			*seq++
			d := doc(fmt.Sprintf("d%09d", *seq), 1, *seq, 2, true)
			d.Updated = when(*seq)
			run.Docs = append(run.Docs, d)
		}
		run.UpTo = Position{Epoch: 1, Seq: *seq}
		if r := w.Apply(context.Background(), run); r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
}

// BenchmarkAPurgePassOverYoungTombstones times one pass of the purge
// (what a node runs every TOMBSTONE_RETENTION/4, at most every 10
// minutes) over a partition holding 100,000 tombstones younger than the
// cutoff, so that it removes none: what a pass costs a delete-heavy
// partition between its purges.
//
//	go test ./store -run '^$' -bench PurgePass -benchtime 20x -benchmem
func BenchmarkAPurgePassOverYoungTombstones(b *testing.B) {
	_, w := purgeWriter(b)
	now := time.Now().UTC()
	var seq uint64
	applyTombstones(b, w, &seq, 100_000, func(uint64) time.Time { return now })
	for b.Loop() {
		if n, err := w.PurgeTombstones(context.Background(), now.Add(-time.Hour)); err != nil || n != 0 {
			b.Fatalf("purged %d (%v), want none", n, err)
		}
	}
}

// BenchmarkPurgingTombstonesDue times a purge pass that removes 10,000
// tombstones, all due, from one partition (written again before each
// pass, untimed; deleted 100 to a millisecond).
//
//	go test ./store -run '^$' -bench PurgingTombstonesDue -benchtime 10x -benchmem
func BenchmarkPurgingTombstonesDue(b *testing.B) {
	const tombstones = 10_000
	_, w := purgeWriter(b)
	old := time.Now().UTC().Add(-2 * time.Hour)
	var seq uint64
	for b.Loop() {
		b.StopTimer()
		applyTombstones(b, w, &seq, tombstones, func(seq uint64) time.Time { return old.Add(time.Duration(seq/100) * time.Millisecond) })
		b.StartTimer()
		if n, err := w.PurgeTombstones(context.Background(), time.Now()); err != nil || n != tombstones {
			b.Fatalf("purged %d (%v), want %d", n, err, tombstones)
		}
	}
}

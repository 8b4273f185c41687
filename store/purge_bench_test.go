package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAPurgePassOverYoungTombstones times one pass of the purge
// (what a node runs every TOMBSTONE_RETENTION/4, at most every 10
// minutes) over a partition holding 100,000 tombstones younger than the
// cutoff, so that it removes none: what a pass costs a delete-heavy
// partition between its purges.
//
//	go test ./store -run '^$' -bench PurgePass -benchtime 20x -benchmem
func BenchmarkAPurgePassOverYoungTombstones(b *testing.B) {
	const tombstones = 100_000
	s, err := Open(context.Background(), Options{Database: "shoal", DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 0})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	var seq uint64
	for seq < tombstones {
		run := Batch{Partition: 0, Epoch: 1}
		if seq > 0 {
			run.From = Position{Epoch: 1, Seq: seq}
		}
		for range 1000 {
			seq++
			d := doc(fmt.Sprintf("d%06d", seq), 1, seq, 2, true)
			d.Updated = now
			run.Docs = append(run.Docs, d)
		}
		run.UpTo = Position{Epoch: 1, Seq: seq}
		if r := w.Apply(ctx, run); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	cutoff := now.Add(-time.Hour)
	b.ResetTimer()
	for b.Loop() {
		if n, err := w.PurgeTombstones(ctx, cutoff); err != nil || n != 0 {
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
	s, err := Open(context.Background(), Options{Database: "shoal", DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 0})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		b.Fatal(err)
	}
	old := time.Now().UTC().Add(-2 * time.Hour)
	var seq uint64
	for b.Loop() {
		b.StopTimer()
		for written := 0; written < tombstones; written += 1000 {
			run := Batch{Partition: 0, Epoch: 1}
			if seq > 0 {
				run.From = Position{Epoch: 1, Seq: seq}
			}
			for range 1000 {
				seq++
				d := doc(fmt.Sprintf("d%09d", seq), 1, seq, 2, true)
				d.Updated = old.Add(time.Duration(seq/100) * time.Millisecond)
				run.Docs = append(run.Docs, d)
			}
			run.UpTo = Position{Epoch: 1, Seq: seq}
			if r := w.Apply(ctx, run); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.StartTimer()
		if n, err := w.PurgeTombstones(ctx, time.Now()); err != nil || n != tombstones {
			b.Fatalf("purged %d (%v), want %d", n, err, tombstones)
		}
	}
}

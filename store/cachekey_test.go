package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One key can be in every partition: the tenure marker is. The writer's
// cache kept states by key alone, so what it knew of one partition's
// marker answered for another's: a replica took partition 1's marker for
// held (partition 0's, cached, looked as new) and never stored it, and a
// master took its marker for new after a read of another partition's
// found none, which left the marker's old position in the partition's
// history beside the new one.
func TestTheCacheKeepsPartitionsApart(t *testing.T) {
	ctx := context.Background()
	key := DocKey(TenureUser, TenureColl, TenureID)
	t.Run("a replica", func(t *testing.T) {
		s := openTestStore(t)
		w := NewWriter(s, 2, WriterOptions{CacheBytes: 1 << 20})
		defer w.Close(ctx)
		for p := range 2 {
			marker := &Doc{Key: key, User: TenureUser, Coll: TenureColl, ID: TenureID, Version: 1, Pos: Position{Epoch: 2, Seq: 1},
				Updated: time.Unix(1, 0).UTC(), Body: map[string]any{"epoch": int64(2)}}
			if r := w.Apply(ctx, Batch{Partition: p, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 1}, Docs: []*Doc{marker}}); r.Err != nil {
				t.Fatalf("applying partition %d's marker: %v", p, r.Err)
			}
		}
		if _, err := s.Get(ctx, 1, key); errors.Is(err, ErrNotFound) {
			t.Fatal("partition 1's marker was never stored: partition 0's, cached, answered for it")
		}
	})
	t.Run("a master", func(t *testing.T) {
		s := openTestStore(t)
		w := NewWriter(s, 2, WriterOptions{CacheBytes: 1 << 20, Epoch: 1})
		defer w.Close(ctx)
		mark := func(p int) {
			t.Helper()
			res := w.Do(ctx, Op{Partition: p, User: TenureUser, Coll: TenureColl, ID: TenureID,
				Mutate: func(*Doc) (Next, error) { return Next{Body: map[string]any{"p": int64(p)}, Size: 8}, nil }})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		mark(1)
		// A read of partition 0's marker (there is none), as the shipper's
		// restore makes one.
		if _, err := w.Get(ctx, 0, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("partition 0's marker: %v, want none", err)
		}
		mark(1)
		history, err := s.ScanAfter(ctx, 1, Position{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(history) != 1 || history[0].Version != 2 {
			t.Fatalf("partition 1's history holds %d states (want its marker once, at version 2): %+v", len(history), history)
		}
	})
}

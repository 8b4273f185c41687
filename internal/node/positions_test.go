package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// A copy awaiting a full copy (a new store's, or one whose full copy was
// cut short) answers a position request as partial, at position zero,
// whatever it holds: the documents a cut-short copy holds are not a prefix
// of the partition's history, and a campaign that took their position
// for how far it holds the history would prefer it to a copy that holds
// it all; nor does a handoff take it for a copy that holds the history.
// Once its full copy ends it answers its position.
func TestACopyAwaitingAFullCopyAnswersPartialAtZero(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, store.Options{Database: "shoal", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	w := store.NewWriter(s, 2, store.WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.MarkNew(ctx); err != nil {
		t.Fatal(err)
	}
	doc := func(id string, seq uint64) *store.Doc {
		return &store.Doc{Key: store.DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Version: 1,
			Pos: store.Position{Epoch: 2, Seq: seq}, Updated: time.Unix(1, 0).UTC(), Body: map[string]any{"n": int64(seq)}}
	}
	// The first chunk of a full copy (keys up to u/c/m), the rest cut.
	if r := w.Apply(ctx, store.Batch{Partition: 0, Epoch: 2, Full: true, KeyTo: store.DocKey("u", "c", "m"),
		Docs: []*store.Doc{doc("a", 7)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	h := newHandoffs(&handoffDeps{writer: w, incarnation: 42})
	got := h.Positions([]int{0})[0]
	if !got.Partial || got.Position != (store.Position{}) {
		t.Fatalf("a copy whose full copy was cut short answered %+v; want partial, at position zero", got)
	}
	// Nor is it handed the partition by a master whose history it seems
	// to hold up to where the handoff starts.
	if _, err := h.TakeOver(ctx, 0, store.Position{Epoch: 2, Seq: 7}); err == nil || !strings.Contains(err.Error(), "not 2.7") {
		t.Fatalf("a handoff from 2.7 to a copy whose full copy was cut short: %v, want a refusal", err)
	}
	// The last chunk.
	if r := w.Apply(ctx, store.Batch{Partition: 0, Epoch: 2, Full: true, KeyFrom: store.DocKey("u", "c", "m"), UpTo: store.Position{Epoch: 2, Seq: 9},
		Docs: []*store.Doc{doc("z", 9)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := h.Positions([]int{0})[0]; got.Partial || got.Position != (store.Position{Epoch: 2, Seq: 9}) {
		t.Fatalf("a copy whose full copy ended answered %+v; want its position, 2.9", got)
	}
}

package replicate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

func pos(epoch, seq uint64) store.Position { return store.Position{Epoch: epoch, Seq: seq} }

func stored(id string, at store.Position) *store.Doc {
	return &store.Doc{Key: store.DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Version: 1, Pos: at,
		Updated: time.Unix(1, 0).UTC(), Body: map[string]any{"id": id}}
}

// The replica was master at epoch 2 and holds x (2.5), which never left
// it. The next master took over at epoch 3 from 2.1, wrote b and y, and
// began a second tenure, epoch 4, from 3.3. The replica answers its first
// batch "diverged", agreeing up to 2.1; the restore must leave it there,
// so that the catch-up brings epoch 3's changes. Before, the restore
// carried the master's epoch start (3.3): the replica counted itself at
// 3.3 and never got b and y.
func TestARestoreLeavesTheReplicaAtTheAgreementPoint(t *testing.T) {
	holding := false
	pr := newPairWith(t, pairOptions{tenures: true, lease: func(int) (uint64, bool) { return 4, holding }})
	ctx := context.Background()
	chain2 := []store.EpochStart{{Epoch: 2}}
	chain3 := []store.EpochStart{{Epoch: 2}, {Epoch: 3, Start: pos(2, 1)}}
	// The master's history, applied as a replica of the masters before it.
	for _, b := range []store.Batch{
		{Partition: 0, Epoch: 2, Epochs: chain2, UpTo: pos(2, 1), Docs: []*store.Doc{stored("a", pos(2, 1))}},
		{Partition: 0, Epoch: 3, EpochStart: pos(2, 1), Epochs: chain3, From: pos(2, 1), UpTo: pos(3, 3),
			Docs: []*store.Doc{stored("b", pos(3, 2)), stored("y", pos(3, 3))}},
	} {
		if r := pr.master.Apply(ctx, b); r.Err != nil {
			t.Fatalf("master: %+v", r)
		}
	}
	// The replica's: a, and x of its own lost tenure at epoch 2.
	if r := pr.replica.Apply(ctx, store.Batch{Partition: 0, Epoch: 2, Epochs: chain2, UpTo: pos(2, 5),
		Docs: []*store.Doc{stored("a", pos(2, 1)), stored("x", pos(2, 5))}}); r.Err != nil {
		t.Fatalf("replica: %+v", r)
	}
	holding = true
	pr.write(t, "c", false) // the first write of epoch 4, from 3.3
	if got := pr.master.EpochStart(0, 4); got != pos(3, 3) {
		t.Fatalf("epoch 4 starts at %s, want 3.3", got)
	}
	pr.waitReplicated(t)

	pr.mu.Lock()
	restores := slices.Clone(pr.restores)
	pr.mu.Unlock()
	if len(restores) == 0 {
		t.Fatal("no restore was sent: x was not rolled back")
	}
	for _, b := range restores {
		if b.From != pos(2, 1) || b.UpTo != pos(2, 1) || !slices.Equal(b.Absent, []string{store.DocKey("u", "c", "x")}) {
			t.Fatalf("restore batch from %s up to %s, absent %v; want x absent, at the agreement point 2.1", b.From, b.UpTo, b.Absent)
		}
	}
	if m, r := contents(t, pr.mstore), contents(t, pr.rstore); !slices.Equal(m, r) {
		t.Fatalf("the replica holds\n%v\nthe master\n%v", r, m)
	}
	kept, err := pr.rstore.Rollbacks(ctx, 10)
	if err != nil || len(kept) != 1 || kept[0].ID != "x" {
		t.Fatalf("the replica's rollback collection: %+v %v, want x", kept, err)
	}
	// It follows the master's chain now.
	if got, want := pr.replica.Epochs(0, 4), pr.master.Epochs(0, 4); !slices.Equal(got, want) {
		t.Fatalf("the replica's chain %v, the master's %v", got, want)
	}
}

// A restore removes the keys its master holds nothing of, which may be
// keys whose tombstones the master purged: the replica must take the
// master's horizon with them, or it holds neither the tombstone nor a
// horizon that says one is gone. Promoted, it would then make the key
// again at version 1 (an old If-Match would match it), and catch a copy
// behind the purge up change by change, which never removes the key.
// Here the master's history deleted k at 1.3 and purged the tombstone
// (horizon 1.3); the replica, master at epoch 1 before, made k again at
// 1.5, which never left it. The catch-up after the restore starts at
// 1.4, past the horizon, so no full copy brings it either.
func TestARestoreGivesTheReplicaTheMastersHorizon(t *testing.T) {
	holding := false
	pr := newPairWith(t, pairOptions{tenures: true, lease: func(int) (uint64, bool) { return 2, holding }})
	ctx := context.Background()
	chain1 := []store.EpochStart{{Epoch: 1}}
	tomb := stored("k", pos(1, 3))
	tomb.Version, tomb.Deleted, tomb.Body = 3, true, nil
	if r := pr.master.Apply(ctx, store.Batch{Partition: 0, Epoch: 1, Epochs: chain1, UpTo: pos(1, 4),
		Docs: []*store.Doc{tomb, stored("z", pos(1, 4))}}); r.Err != nil {
		t.Fatalf("master: %+v", r)
	}
	if n, err := pr.master.PurgeTombstones(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("the master purged %d tombstones: %v", n, err)
	}
	again := stored("k", pos(1, 5))
	again.Version = 4
	if r := pr.replica.Apply(ctx, store.Batch{Partition: 0, Epoch: 1, Epochs: chain1, UpTo: pos(1, 5),
		Docs: []*store.Doc{stored("z", pos(1, 4)), again}}); r.Err != nil {
		t.Fatalf("replica: %+v", r)
	}
	holding = true
	pr.write(t, "c", false) // the first write of epoch 2, from 1.4
	pr.waitReplicated(t)

	pr.mu.Lock()
	restores := len(pr.restores)
	pr.mu.Unlock()
	if restores == 0 {
		t.Fatal("no restore was sent: k was not rolled back")
	}
	if _, err := pr.replica.Get(ctx, 0, store.DocKey("u", "c", "k")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("k on the replica after the restore: %v", err)
	}
	if h := pr.replica.Horizon(0); h.Compare(pos(1, 3)) < 0 {
		t.Fatalf("the replica's horizon is %s after a restore removed k, whose tombstone its master purged at 1.3", h)
	}
}

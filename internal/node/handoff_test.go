package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// A handoff carries the writes of the tenure it ended, not an older one's:
// a majority write committed at (1, 50) by a master paused past its lease,
// rolled back when another node took over from (1, 40), must not be
// answered "ok" because this node later held the partition again and
// handed it over at (3, 60) (the reviewer's scenario; positions compare
// across epochs).
func TestAHandoffCarriesOnlyItsOwnTenuresWrites(t *testing.T) {
	h := newHandoffs(nil)
	h.handed[7] = store.Position{Epoch: 3, Seq: 60}
	for _, tc := range []struct {
		pos  store.Position
		want bool
	}{
		{store.Position{Epoch: 3, Seq: 59}, true},
		{store.Position{Epoch: 3, Seq: 60}, true},
		{store.Position{Epoch: 3, Seq: 61}, false},
		{store.Position{Epoch: 1, Seq: 50}, false},
	} {
		if got := h.HandedOver(7, tc.pos); got != tc.want {
			t.Errorf("HandedOver(7, %s) = %v, want %v", tc.pos, got, tc.want)
		}
	}
	if h.HandedOver(6, store.Position{Epoch: 3, Seq: 1}) {
		t.Error("a partition never handed over counts as handed over")
	}
}

// A node shutting down refuses a handoff at once, before it counts the
// partition as incoming or campaigns: it takes no lease
// (placement.WantInput.Stopping), and a campaign would spin until
// LEASE_TTL while the sender, its lease released, held the partition's
// writes (the reviewer's finding on the ninth session's Stopping).
func TestANodeShuttingDownRefusesAHandoffAtOnce(t *testing.T) {
	h := newHandoffs(&handoffDeps{self: "n", stopping: func() bool { return true }})
	_, err := h.TakeOver(context.Background(), 3, store.Position{})
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("TakeOver on a node shutting down: %v, want a refusal that says so", err)
	}
	if h.receiving(3) {
		t.Fatal("the refused partition counts as incoming")
	}
}

// A request waits for a handoff of its partition to end, at most the
// bound it gives; with none under way it goes on at once.
func TestARequestWaitsForAHandoffAtMostItsBound(t *testing.T) {
	h := newHandoffs(&handoffDeps{maxMoves: 1})
	ctx := context.Background()
	h.Wait(ctx, 4, time.Hour) // none under way: returns at once
	if !h.start(4) {
		t.Fatal("the handoff did not start")
	}
	h.Wait(ctx, 4, time.Millisecond) // under way: returns at the bound
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Wait(ctx, 4, time.Hour)
	}()
	h.finish(4)
	<-done // returns once it ends
}

package node

import (
	"testing"

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

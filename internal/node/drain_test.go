package node

import (
	"testing"

	"github.com/shoal-db/shoal/store"
)

// A node's copy holds writes no later master has checked while its newest
// position is of its own last tenure and nothing of a later epoch reached
// it (the fault suite's seed 6009: a former master out of the peer list
// reported holding nothing with such writes, and was stopped).
func TestUnreconciledCopy(t *testing.T) {
	pos := func(e, s uint64) store.Position { return store.Position{Epoch: e, Seq: s} }
	for _, c := range []struct {
		name    string
		holding bool
		tenure  uint64
		last    store.Position
		newest  uint64
		want    bool
	}{
		{"never mastered", false, 0, pos(3, 9), 3, false},
		{"wrote in its tenure, nobody came after", false, 3, pos(3, 9), 3, true},
		{"still master", true, 3, pos(3, 9), 3, false},
		{"a later master's batch came", false, 3, pos(3, 9), 4, false},
		{"no write in its tenure", false, 3, pos(2, 9), 3, false},
		{"a later epoch's history", false, 3, pos(4, 1), 4, false},
	} {
		if got := unreconciledCopy(c.holding, c.tenure, c.last, c.newest); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

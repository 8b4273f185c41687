package node

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// A tenure's check asks the UP regular copies of its list; when the list
// names no other copy (a grant taken back after a restart, before the
// table knew the list), it asks every UP member, and only those holding
// the partition count (seed 11110: a tenure so taken back had nobody to
// ask).
func TestATenuresCheckAsksEveryMemberWhenItsListNamesNoOther(t *testing.T) {
	states := map[string]cluster.State{"x": cluster.Up, "a": cluster.Up, "b": cluster.Down, "c": cluster.Up}
	for _, tc := range []struct {
		name     string
		regular  []string
		members  []string
		everyone bool
	}{
		{"the regular copies up", []string{"x", "a", "b"}, []string{"a"}, false},
		{"a list of this node alone", []string{"x"}, []string{"a", "c"}, true},
		{"no list", nil, []string{"a", "c"}, true},
	} {
		got := confirmAsks("x", tc.regular, states)
		if !slices.Equal(got.members, tc.members) || got.everyone != tc.everyone {
			t.Errorf("%s: asks %v (everyone %v), want %v (everyone %v)", tc.name, got.members, got.everyone, tc.members, tc.everyone)
		}
	}
}

// A tenure taken back (a master's own lapsed lease, or one named from its
// tenure record after a restart) takes no write until it is confirmed,
// unless it continues the tenure the table names at the same epoch; and a
// copy up that answered ahead is not contested (it campaigns by the
// promotion rule: two candidates would split the votes).
func TestATenureTakenBackTakesNoWriteUntilConfirmed(t *testing.T) {
	own := store.Position{Epoch: 2, Seq: 1}
	table := shard.NewTable(16)
	pr := newPromotion(&promotionDeps{self: "x", leaseTTL: time.Minute, log: slog.New(slog.DiscardHandler),
		leases: noLists{}, writer: appliedAt{own}, table: table})
	up := func(string) bool { return true }
	for _, p := range []int{6, 7, 8} {
		table.Merge(shard.Assignment{Partition: p, Master: "x", Epoch: 2, Responsible: []string{"x", "a"}, Revision: 1})
	}

	if !pr.mayRetake(6, []string{"x", "a"}, up) {
		t.Fatal("a tenure taken back with no copy heard ahead: not campaigned for")
	}
	if pr.confirmed(6, 9) {
		t.Error("a new tenure taken back takes writes before its check is registered")
	}
	pr.won(6, 9, table.Get(6))
	table.Merge(shard.Assignment{Partition: 6, Master: "x", Epoch: 9, Responsible: []string{"x", "a"}, Revision: 2})
	if pr.confirmed(6, 9) {
		t.Error("a new tenure taken back after a restart takes writes before it is confirmed")
	}

	// A lapsed lease renewed at its epoch: told, or renewed within one
	// round and not reported at all.
	for _, told := range []bool{true, false} {
		p := 7
		if !told {
			p = 8
		}
		if !pr.mayRetake(p, []string{"x", "a"}, up) {
			t.Fatal("a lapsed lease: not campaigned for")
		}
		if told {
			pr.won(p, 2, table.Get(p))
		}
		if !pr.confirmed(p, 2) {
			t.Errorf("a lapsed lease renewed at the same epoch (won told: %v) waits for a check it needs not", told)
		}
	}

	pr.mu.Lock()
	a := pr.asks[6]
	a.heard["a"] = heardPosition{pos: store.Position{Epoch: 7, Seq: 21}, at: a.since.Add(time.Millisecond)}
	pr.mu.Unlock()
	if pr.mayRetake(6, []string{"x", "a"}, up) {
		t.Error("a tenure taken back over a copy that answered ahead")
	}
}

// noLists is lease.Manager as promotion uses it, keeping no list.
type noLists struct{}

func (noLists) Holds(int) (uint64, bool)                        { return 0, false }
func (noLists) RecordEpoch(int) uint64                          { return 0 }
func (noLists) RecordStale(int) bool                            { return false }
func (noLists) Ended(context.Context, []int) []lease.EndedLease { return nil }
func (noLists) Release(context.Context, int) bool               { return false }
func (noLists) NewestLists(int, uint64) []*record.CopyList      { return nil }

// appliedAt is a partition writer whose every partition is at one position.
type appliedAt struct{ pos store.Position }

func (w appliedAt) Applied(int) store.Position { return w.pos }

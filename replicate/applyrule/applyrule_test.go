package applyrule

import (
	"testing"

	"github.com/shoal-db/shoal/record"
)

func pos(e, s uint64) record.Position { return record.Position{Epoch: e, Seq: s} }

func TestFirst(t *testing.T) {
	replica := Held{Applied: pos(3, 10), Last: pos(3, 10), EpochSeen: 3}
	for _, c := range []struct {
		name string
		held Held
		b    Header
		want Step
	}{
		{"the master takes no batch", Held{Master: true, Applied: pos(3, 10)}, Header{Epoch: 3}, RefuseIsMaster},
		{"a superseded master's batch", replica, Header{Epoch: 2}, RefuseStale},
		{"an epoch seen but never written in is newer too", Held{Applied: pos(3, 10), EpochSeen: 5}, Header{Epoch: 4}, RefuseStale},
		{"a restore after its rollback was done with", replica, Header{Epoch: 3, Restore: true}, RefuseLateRestore},
		{"a restore of a rollback under way", Held{Applied: pos(3, 10), EpochSeen: 4, Restoring: 4}, Header{Epoch: 4, Restore: true}, Restore},
		{"the same master's next batch", replica, Header{Epoch: 3, From: pos(3, 10)}, TakeBatch},
		{"a newer master's first batch is checked", replica, Header{Epoch: 4}, CheckDivergence},
		{"a former master's own later writes are checked", Held{Applied: pos(3, 10), Last: pos(4, 2), EpochSeen: 4}, Header{Epoch: 5}, CheckDivergence},
		{"a newer master already seen, its history held: no check", Held{Applied: pos(4, 1), Last: pos(4, 1), EpochSeen: 4}, Header{Epoch: 4}, TakeBatch},
		{"every batch of a master restoring is checked", Held{Applied: pos(3, 10), EpochSeen: 4, Restoring: 4}, Header{Epoch: 4}, CheckDivergence},
		{"a copy awaiting a full copy is not checked", Held{Recopy: true, EpochSeen: 3}, Header{Epoch: 4, Full: true}, TakeBatch},
	} {
		if got := First(c.held, c.b); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestAfterCheck(t *testing.T) {
	for _, c := range []struct {
		name      string
		found     Found
		purged    bool
		restoring bool
		want      Next
	}{
		{"purged deletes the master never had: a full copy", FoundNothing, true, false, StartRecopy},
		{"purged, and diverged: a full copy", FoundDiverged, true, true, StartRecopy},
		{"a failed check is refused even if purged", CheckFailed, true, false, RefuseCheckFailed},
		{"diverged: kept until restored", FoundDiverged, false, false, KeepDivergence},
		{"a failed check", CheckFailed, false, true, RefuseCheckFailed},
		{"nothing left of a rollback: the restore is done", FoundNothing, false, true, RestoreDone},
		{"nothing diverged", FoundNothing, false, false, GoOn},
	} {
		if got := AfterCheck(c.found, c.purged, c.restoring); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestTake(t *testing.T) {
	for _, c := range []struct {
		name string
		held Held
		b    Header
		want Action
	}{
		{"a run that follows on", Held{Applied: pos(3, 10)}, Header{Epoch: 3, From: pos(3, 10)}, Apply},
		{"a run that overlaps what is held", Held{Applied: pos(3, 10)}, Header{Epoch: 3, From: pos(3, 4)}, Apply},
		{"a run after a gap", Held{Applied: pos(3, 10)}, Header{Epoch: 3, From: pos(3, 11)}, Gap},
		{"a run while a full copy is awaited", Held{Recopy: true}, Header{Epoch: 3}, NeedFullCopy},
		{"a full copy's chunk", Held{Recopy: true}, Header{Epoch: 3, Full: true}, Apply},
	} {
		if got := Take(c.held, c.b); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

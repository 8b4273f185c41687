package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/record"
)

// A replica replacing a regular copy takes its slot only once it holds
// what that copy held; until then the replaced copy keeps counting and the
// newcomer follows as an extra copy (issue 11, case 2). Before, the
// newcomer took the counted slot at once and, empty, could promote itself.
func TestAReplacementReplicaCountsOnlyOnceCaughtUp(t *testing.T) {
	yes := func([]string, []string) bool { return true }
	no := func([]string, []string) bool { return false }
	cases := []struct {
		name            string
		current, chosen []string
		copies          int
		caughtUp        func([]string, []string) bool
		want            []string
	}{
		{"unchanged", []string{"r"}, []string{"r"}, 2, no, []string{"r"}},
		{"a first replica counts at once: it replaces nobody", nil, []string{"r"}, 2, no, []string{"r"}},
		{"replacement still copying: the old copy keeps its slot", []string{"old"}, []string{"new"}, 2, no, []string{"old", "new"}},
		{"replacement caught up: it takes the slot", []string{"old"}, []string{"new"}, 2, yes, []string{"new"}},
		{"RF 3, one of two replaced", []string{"a", "old"}, []string{"a", "new"}, 3, no, []string{"a", "old", "new"}},
		{"extra copies after the regular ones stay after", []string{"old", "x"}, []string{"new", "x"}, 2, no, []string{"old", "new", "x"}},
	}
	for _, c := range cases {
		if got := KeepReplacedCopies(c.current, c.chosen, c.copies, c.caughtUp); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Newcomers replace regular copies once they hold what those held; when
// they are nearly there but the replaced copies keep taking live changes
// ahead of them (seed 2002: a removed node, kept as a regular replica
// after handing a partition over, acknowledged each batch before the
// newcomer did for two minutes of writes), the master pauses writes to
// let them reach it instead of waiting for a moment they are level.
func TestANewcomerBehindAMovingReplacedCopyIsCaughtUpUnderAPause(t *testing.T) {
	at := func(e, s uint64) Ack { return Ack{Pos: record.Position{Epoch: e, Seq: s}, Known: true} }
	unknown := Ack{}
	last := record.Position{Epoch: 6, Seq: 1416}
	cases := []struct {
		name      string
		newcomers []Ack
		replaced  []Ack
		want      ReplaceStep
	}{
		{"level with the replaced copy and the master", []Ack{at(6, 1416)}, []Ack{at(6, 1416)}, ReplaceNow},
		{"level with the replaced copy, behind the master in this tenure", []Ack{at(6, 1400)}, []Ack{at(6, 1400)}, ReplaceNow},
		{"one change behind a replaced copy that took it first", []Ack{at(6, 1415)}, []Ack{at(6, 1416)}, ReplacePaused},
		{"a batch behind, within the handoff margin", []Ack{at(6, 1300)}, []Ack{at(6, 1416)}, ReplacePaused},
		{"far behind: keep the replaced copy", []Ack{at(6, 1000)}, []Ack{at(6, 1416)}, ReplaceKeep},
		{"in an older epoch: keep", []Ack{at(5, 676)}, []Ack{at(6, 1416)}, ReplaceKeep},
		{"not heard from yet: keep", []Ack{unknown}, []Ack{at(6, 1416)}, ReplaceKeep},
		{"replaced copy not heard from, newcomer at the master", []Ack{at(6, 1416)}, []Ack{unknown}, ReplaceNow},
		{"one of two newcomers behind", []Ack{at(6, 1416), at(6, 1410)}, []Ack{at(6, 1416)}, ReplacePaused},
		{"one of two newcomers far behind", []Ack{at(6, 1416), at(6, 10)}, []Ack{at(6, 1416)}, ReplaceKeep},
	}
	for _, c := range cases {
		if got := DecideReplacement(6, last, c.newcomers, c.replaced); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A partition whose paused swap failed is not paused again before its
// retry time: a newcomer that cannot catch up within the pause would stall
// the partition's writes every round (found in review).
func TestAFailedPausedSwapWaitsBeforeTheNext(t *testing.T) {
	now := time.Unix(100, 0)
	due := []PausedSwap{{Partition: 1}, {Partition: 2}, {Partition: 3}}
	retryAt := map[int]time.Time{1: now.Add(time.Second), 2: now.Add(-time.Second)}
	got := SwapsDue(due, retryAt, now)
	if len(got) != 2 || got[0].Partition != 2 || got[1].Partition != 3 {
		t.Fatalf("due %+v, want partitions 2 and 3", got)
	}
	if _, ok := retryAt[2]; ok {
		t.Fatal("a passed retry time stays")
	}
	if _, ok := retryAt[1]; !ok {
		t.Fatal("a retry time to come was dropped")
	}
}

// A node restarted after its tenure names the replicas it recorded for
// that tenure or a later one of its own that had no write; a list recorded
// for an older tenure may name copies that lack this one's writes, so it
// names itself alone then.
func TestTenureAssignment(t *testing.T) {
	for _, c := range []struct {
		name      string
		replicas  []string
		listEpoch uint64
		want      []string
	}{
		{"the tenure's list", []string{"b", "c"}, 5, []string{"a", "b", "c"}},
		{"a later tenure's list (no write in it)", []string{"b", "d"}, 6, []string{"a", "b", "d"}},
		{"an older tenure's list", []string{"b", "c"}, 4, []string{"a"}},
		{"no list", nil, 0, []string{"a"}},
		{"a list naming the master", []string{"b", "a", "b"}, 5, []string{"a", "b"}},
	} {
		a := TenureAssignment("a", 3, 5, c.listEpoch, c.replicas)
		if a.Master != "a" || a.Epoch != 5 || a.Partition != 3 || !slices.Equal(a.Responsible, c.want) {
			t.Errorf("%s: %+v, want responsible %v", c.name, a, c.want)
		}
	}
}

// A change of a partition's regular copies takes effect only once it is
// recorded in the master's store; extra copies change unrecorded (a
// review of the fourth session: a change applied while the store refused
// its record let writes count on a copy that no recorded list named).
func TestAChangeOfRegularCopiesWaitsForItsRecord(t *testing.T) {
	current := []string{"b", "c"}
	for _, c := range []struct {
		name          string
		chosen        []string
		recordedEpoch uint64
		recorded      []string
		recordedNow   bool
		want          []string
	}{
		{"recorded: applied", []string{"b", "d"}, 5, []string{"b", "d"}, true, []string{"b", "d"}},
		{"not recorded, regular copies changed: held", []string{"b", "d"}, 5, []string{"b", "c"}, false, []string{"b", "c"}},
		{"not recorded, an extra copy added: applied", []string{"b", "c", "e"}, 5, []string{"b", "c"}, false, []string{"b", "c", "e"}},
		{"not recorded, an extra copy dropped: applied", []string{"b"}, 5, []string{"b"}, false, []string{"b"}},
		{"not recorded, regular copies reordered: held", []string{"c", "b"}, 5, []string{"b", "c"}, false, []string{"b", "c"}},
		{"a new tenure not recorded yet: held", []string{"b", "d"}, 4, []string{"b", "c"}, false, []string{"b", "c"}},
	} {
		got := ListToApply(current, c.chosen, 5, c.recordedEpoch, c.recorded, 3, c.recordedNow)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

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
		regular         int
	}{
		{"unchanged", []string{"r"}, []string{"r"}, 2, no, []string{"r"}, 1},
		{"a first replica counts at once: it replaces nobody", nil, []string{"r"}, 2, no, []string{"r"}, 1},
		{"replacement still copying: the old copy keeps its slot", []string{"old"}, []string{"new"}, 2, no, []string{"old", "new"}, 1},
		{"replacement caught up: it takes the slot", []string{"old"}, []string{"new"}, 2, yes, []string{"new"}, 1},
		{"RF 3, one of two replaced", []string{"a", "old"}, []string{"a", "new"}, 3, no, []string{"a", "old", "new"}, 2},
		{"extra copies after the regular ones stay after", []string{"old", "x"}, []string{"new", "x"}, 2, no, []string{"old", "new", "x"}, 1},
		{"RF 3, a regular copy gone and none to replace it, the count unchanged: dropped", []string{"a", "old"}, []string{"a"}, 3, no, []string{"a"}, 1},
	}
	for _, c := range cases {
		got, regular := KeepReplacedCopies(c.current, c.chosen, c.copies, c.copies, c.caughtUp)
		if !slices.Equal(got, c.want) || regular != c.regular {
			t.Errorf("%s: %v with %d regular, want %v with %d", c.name, got, regular, c.want, c.regular)
		}
	}
}

// When the peer list loses a node that could hold a copy and the count of
// copies falls (RF 3 with three such nodes, one removed: 3 to 2), a copy
// that leaves the regular ones keeps its slot, and the list its count of
// regular copies, until the regular copies left hold what it held, even
// with no newcomer (a helper's review: the count of the list was taken
// as the new one, the copy leaving looked replaced by nobody, and it was
// dropped at once; the master's loss then promoted the copy left alone,
// which lacked the majority writes the master and the removed copy held:
// 10 of 10 lost).
func TestACopyLeavingTheRegularOnesWhenTheCountFallsStaysUntilTheOthersHoldWhatItHeld(t *testing.T) {
	var asked [][2][]string
	decide := func(answer bool) func(mustHold, replaced []string) bool {
		return func(mustHold, replaced []string) bool {
			asked = append(asked, [2][]string{mustHold, replaced})
			return answer
		}
	}
	for _, c := range []struct {
		name            string
		current, chosen []string
		listCopies      int
		copies          int
		caughtUp        bool
		want            []string
		regular         int
		mustHold        []string
		replaced        []string
	}{
		{"3 to 2, the copy left behind: kept, 3 regular", []string{"a", "gone"}, []string{"a"}, 3, 2, false, []string{"a", "gone"}, 2, []string{"a"}, []string{"gone"}},
		{"3 to 2, the copy left holds it: dropped", []string{"a", "gone"}, []string{"a"}, 3, 2, true, []string{"a"}, 1, []string{"a"}, []string{"gone"}},
		{"3 to 2, a draining copy listed after: it follows", []string{"a", "gone", "x"}, []string{"a", "x"}, 3, 2, false, []string{"a", "gone", "x"}, 2, []string{"a"}, []string{"gone"}},
		{"5 to 4, two replaced by one newcomer: all the regular copies left must hold it", []string{"a", "b", "c", "d"}, []string{"a", "b", "x"}, 5, 4, false, []string{"a", "b", "c", "d", "x"}, 4, []string{"a", "b", "x"}, []string{"c", "d"}},
		{"2 to 3: the count grows, nothing to hold", []string{"a"}, []string{"a", "b"}, 2, 3, false, []string{"a", "b"}, 2, nil, nil},
		{"3 to 1: no regular replica left, none must hold it", []string{"a", "b"}, nil, 3, 1, true, nil, 0, nil, []string{"a", "b"}},
	} {
		asked = nil
		got, regular := KeepReplacedCopies(c.current, c.chosen, c.listCopies, c.copies, decide(c.caughtUp))
		if !slices.Equal(got, c.want) || regular != c.regular {
			t.Errorf("%s: %v with %d regular, want %v with %d", c.name, got, regular, c.want, c.regular)
		}
		if c.replaced == nil {
			if len(asked) != 0 {
				t.Errorf("%s: asked %v, want nothing asked", c.name, asked)
			}
			continue
		}
		if len(asked) != 1 || !slices.Equal(asked[0][0], c.mustHold) || !slices.Equal(asked[0][1], c.replaced) {
			t.Errorf("%s: asked %v, want whether %v hold what %v held", c.name, asked, c.mustHold, c.replaced)
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
	// A partition with no history: nothing to hold, and nobody may ever
	// have been sent anything to answer (a copy leaving the regular ones of
	// an empty partition stayed there for good).
	if got := DecideReplacement(6, record.Position{}, []Ack{unknown}, []Ack{unknown}); got != ReplaceNow {
		t.Errorf("an empty partition, nobody heard from: got %v, want ReplaceNow", got)
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
		got := ListToApply(current, c.chosen, c.chosen[:min(2, len(c.chosen))], 5, c.recordedEpoch, c.recorded, c.recordedNow)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// The regular copies of a list: as recorded in this tenure, or, in a
// tenure that recorded none yet, every copy it lists up to RF (the
// previous master may have counted writes on each, under a count the
// peer list lowered since).
func TestListCopies(t *testing.T) {
	for _, c := range []struct {
		name          string
		recordedEpoch uint64
		recorded, cur []string
		want          int
	}{
		{"recorded in this tenure, as many as the count", 5, []string{"b", "c"}, []string{"b", "c", "x"}, 3},
		{"recorded in this tenure, one kept after the count fell", 5, []string{"b"}, []string{"b", "c"}, 2},
		{"a new tenure: what it lists", 4, []string{"b"}, []string{"b", "c"}, 3},
		{"a new tenure: up to RF", 0, nil, []string{"b", "c", "d", "e"}, 3},
		{"a new tenure alone", 0, nil, nil, 1},
	} {
		if got := ListCopies(5, c.recordedEpoch, c.recorded, c.cur, 3); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// A list says the count its writes were counted under: the count now,
// unless the count rose and the replicas that joined the regular ones do
// not hold the master's whole history yet (then the count before, and,
// nearly there, a pause of the partition's writes for them).
func TestCountedFor(t *testing.T) {
	answer := func(step ReplaceStep, asked *[]string) func([]string) ReplaceStep {
		return func(ids []string) ReplaceStep { *asked = ids; return step }
	}
	for _, c := range []struct {
		name           string
		prev, copies   int
		regular        []string
		step           ReplaceStep
		counted        int
		paused, joined []string
	}{
		{"the count unchanged", 3, 3, []string{"a", "b"}, ReplaceKeep, 3, nil, nil},
		{"the count fell", 3, 2, []string{"a", "b"}, ReplaceKeep, 2, nil, nil},
		{"risen, the one that joined holds it all", 1, 2, []string{"a"}, ReplaceNow, 2, nil, []string{"a"}},
		{"risen, it is nearly there", 1, 2, []string{"a"}, ReplacePaused, 1, []string{"a"}, []string{"a"}},
		{"risen, it is behind", 1, 2, []string{"a"}, ReplaceKeep, 1, nil, []string{"a"}},
		{"2 to 3: only the one past the first", 2, 3, []string{"a", "b"}, ReplaceKeep, 2, nil, []string{"b"}},
		{"risen, no replica chosen yet", 1, 3, nil, ReplaceKeep, 3, nil, nil},
		{"no count recorded", 0, 3, []string{"a", "b"}, ReplaceKeep, 3, nil, nil},
	} {
		var asked []string
		counted, paused := CountedFor(c.prev, c.copies, c.regular, answer(c.step, &asked))
		if counted != c.counted || !slices.Equal(paused, c.paused) || !slices.Equal(asked, c.joined) {
			t.Errorf("%s: counted %d, paused %v, asked about %v; want %d, %v, %v", c.name, counted, paused, asked, c.counted, c.paused, c.joined)
		}
	}
}

// Copies that joined as the count rose hold the history only at the
// master's position; a partition with no history needs nothing.
func TestDecideJoined(t *testing.T) {
	last := record.Position{Epoch: 2, Seq: 15}
	at := func(s uint64) Ack { return Ack{Pos: record.Position{Epoch: 2, Seq: s}, Known: true} }
	for _, c := range []struct {
		name   string
		last   record.Position
		joined []Ack
		want   ReplaceStep
	}{
		{"at the master's position", last, []Ack{at(15)}, ReplaceNow},
		{"in the master's epoch but behind (its older writes of the epoch missing)", last, []Ack{at(5)}, ReplacePaused},
		{"not heard from", last, []Ack{{}}, ReplaceKeep},
		{"far behind", record.Position{Epoch: 2, Seq: 1500}, []Ack{at(5)}, ReplaceKeep},
		{"no history", record.Position{}, []Ack{{}}, ReplaceNow},
	} {
		if got := DecideJoined(c.last, c.joined); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLeavesFirst(t *testing.T) {
	for _, c := range []struct {
		name                      string
		current, next             []string
		lastRecordedKept, covered bool
		want                      bool
	}{
		{"a copy dropped", []string{"a", "c"}, []string{"a"}, true, true, true},
		{"every copy dropped", []string{"a", "c"}, nil, true, true, true},
		{"reordered", []string{"a", "c"}, []string{"c", "a"}, true, true, true},
		// The copy may be on a list the voters keep and not on one on
		// its way to them (dropped, then back within a round).
		{"a copy coming back", []string{"a"}, []string{"a", "c"}, true, true, false},
		{"a swap", []string{"a", "b"}, []string{"a", "n"}, true, true, false},
		{"a newer list on its way to the voters", []string{"a", "c"}, []string{"a"}, false, true, false},
		{"the voters' list not naming the copies left", []string{"a", "c"}, []string{"a"}, true, false, false},
	} {
		if got := LeavesFirst(c.current, c.next, c.lastRecordedKept, c.covered); got != c.want {
			t.Errorf("%s: LeavesFirst(%v, %v, %v, %v) = %v, want %v", c.name, c.current, c.next, c.lastRecordedKept, c.covered, got, c.want)
		}
	}
}

// A swap undone before the voters were known to keep it: the list
// without the replaced copy r may still be kept by them, so r counts
// again only once they keep a later list that names it.
func TestACopyCountsOnlyOnEveryListTheVotersMayKeep(t *testing.T) {
	l1 := RecordedList{Seq: 1, Replicas: []string{"r", "o"}}
	l2 := RecordedList{Seq: 2, Replicas: []string{"n", "o"}} // r swapped for n
	l3 := RecordedList{Seq: 3, Replicas: []string{"r", "o"}} // the swap undone
	steps := []struct {
		name    string
		newest  RecordedList
		keptSeq uint64
		want    []string
	}{
		{"the first list, not known kept", l1, 0, []string{"r", "o"}},
		{"the first list kept", l1, 1, []string{"r", "o"}},
		{"the swap recorded, not kept yet", l2, 1, []string{"o"}},
		{"the swap undone, neither kept yet", l3, 1, []string{"o"}},
		{"the swap kept, its undoing not yet", l3, 2, []string{"o"}},
		{"the undoing kept", l3, 3, []string{"r", "o"}},
	}
	var lists []RecordedList
	for _, s := range steps {
		lists = ListsVotersMayKeep(lists, s.newest, s.keptSeq)
		if got := CountedReplicas(lists); !slices.Equal(got, s.want) {
			t.Errorf("%s: counted %v, want %v (lists %v)", s.name, got, s.want, lists)
		}
	}
	if len(lists) != 1 || lists[0].Seq != 3 {
		t.Errorf("once the newest list is kept only it is left: %v", lists)
	}
}

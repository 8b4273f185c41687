package torture

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoal-db/shoal/store"
)

// handMade builds a register history of docs a and b.
type handMade struct {
	h  *History
	id int
}

func newHandMade() *handMade {
	return &handMade{h: &History{RegisterUser: "r", Docs: []string{"a", "b"}, end: 100, DefiniteReads: map[ReadConcern]int{}}}
}

func (m *handMade) add(doc string, call, ret int64, kind opKind, value string, version int64, found bool) {
	m.id++
	in := regInput{Doc: doc, Kind: kind, Value: value, Concern: ReadLinearizable}
	out := regOutput{Outcome: resultDone, Found: found, Value: value, Version: version}
	if kind != opRead {
		in.Concern = ""
	}
	m.h.ops = append(m.h.ops, porcupine.Operation{ClientId: m.id % 3, Input: in, Call: call, Output: out, Return: ret, Metadata: &opMeta{id: m.id, asked: "n1"}})
}

func TestCheckRegistersCatchesANonLinearizableDocument(t *testing.T) {
	m := newHandMade()
	m.add("a", 0, 1, opPut, "x", 1, false)
	m.add("a", 2, 3, opPut, "y", 2, false)
	m.add("a", 4, 5, opRead, "x", 1, true) // stale: y was acknowledged before it began
	m.add("b", 0, 1, opPut, "z", 1, false)
	m.add("b", 2, 3, opRead, "z", 1, true)
	dir := t.TempDir()
	v, err := m.h.CheckRegisters(ReadLinearizable, 10*time.Second, dir)
	if err != nil {
		t.Fatal(err)
	}
	if v.Result != porcupine.Illegal || v.Docs["a"] != porcupine.Illegal || v.Docs["b"] != porcupine.Ok {
		t.Fatalf("verdict %v, per document %v: want Illegal, a Illegal and b Ok", v.Result, v.Docs)
	}
	if !strings.Contains(v.Why, "stale reads") || !strings.Contains(v.Why, "document a") {
		t.Fatalf("the explanation does not name the stale read of a:\n%s", v.Why)
	}
	if _, err := os.Stat(filepath.Join(dir, "history-linearizable.html")); err != nil {
		t.Fatalf("no visualization: %v", err)
	}
	rep := &Report{Registers: v, History: m.h}
	if !rep.Failed() || !strings.Contains(rep.Table(), "linearizable (porcupine)") || !strings.Contains(rep.Table(), "a NO, b yes") {
		t.Fatalf("the report does not fail, or does not say which document:\n%s", rep.Table())
	}
}

func TestLostMajorityWritesAreCaught(t *testing.T) {
	m := newHandMade()
	m.add("a", 0, 1, opPut, "x", 1, false)
	m.add("a", 2, 3, opPut, "y", 2, false)
	m.add("b", 0, 1, opPut, "z", 1, false)
	// a ends at version 1: the acknowledged v2 is lost; b ends at v1
	// with another value: z is lost.
	finals := map[string]FinalRead{"a": {Node: "n1", Found: true, Value: "x", Version: 1}, "b": {Node: "n1", Found: true, Value: "w", Version: 1}}
	lost := m.h.LostRegisterWrites(finals)
	if len(lost) != 2 || !strings.Contains(lost[0], `"y"`) || !strings.Contains(lost[1], `"z"`) {
		t.Fatalf("lost %q, want the writes of y and z", lost)
	}
	m.h.AddFinalReads(finals)
	if v, _ := m.h.CheckRegisters(ReadLinearizable, 10*time.Second, ""); v.Result != porcupine.Illegal {
		t.Fatalf("porcupine says %v of a history whose final reads lost writes", v.Result)
	}
	if lost := m.h.LostRegisterWrites(map[string]FinalRead{"a": {Found: true, Value: "y", Version: 2}, "b": {Found: true, Value: "z", Version: 1}}); len(lost) != 0 {
		t.Fatalf("lost %q of a history that kept everything", lost)
	}

	h := &History{List: []ListElem{{User: "l0", ID: "e1", Acked: true}, {User: "l0", ID: "e2", Acked: true}, {User: "l0", ID: "e3", Unknown: true}, {User: "l1", ID: "e1", Acked: true}}}
	r := h.CheckLists(map[string]map[string]bool{"l0": {"e1": true, "e3": true}, "l1": {"e1": true}})
	if len(r.Lost) != 1 || r.Lost[0].ID != "e2" || r.Acked != 3 || r.Unknown != 1 || r.UnknownPresent != 1 {
		t.Fatalf("lists: %+v, want e2 of l0 lost", r)
	}
	if rep := (&Report{Lists: r}); !rep.Failed() {
		t.Fatal("a lost list element does not fail the run")
	}
}

// An acknowledged delete makes an earlier acknowledged write's absence
// no loss; an absence no delete explains is one, and so is a register
// that ends present at or below an acknowledged delete's version.
func TestLostWritesAndDeletesAreCaught(t *testing.T) {
	m := newHandMade()
	m.add("a", 0, 1, opPut, "x", 1, false)
	m.h.ops = append(m.h.ops, porcupine.Operation{ClientId: 1, Input: regInput{Doc: "a", Kind: opDelete, Expect: 1}, Call: 2,
		Output: regOutput{Outcome: resultDone, Version: 2}, Return: 3, Metadata: &opMeta{id: 99, asked: "n1"}})
	m.add("b", 0, 1, opPut, "z", 1, false)
	if lost := m.h.LostRegisterWrites(map[string]FinalRead{"a": {Node: "n1"}, "b": {Node: "n1", Found: true, Value: "z", Version: 1}}); len(lost) != 0 {
		t.Fatalf("lost %q, where a was deleted after its write and b kept", lost)
	}
	lost := m.h.LostRegisterWrites(map[string]FinalRead{"a": {Node: "n1", Found: true, Value: "x", Version: 1}, "b": {Node: "n1"}})
	if len(lost) != 2 || !strings.Contains(lost[0], "delete(a, if v1)") || !strings.Contains(lost[1], `"z"`) {
		t.Fatalf("lost %q, want the delete of a (a ends at v1) and the write of z (b ends absent, no delete)", lost)
	}
}

// A list element whose majority delete was acknowledged must be gone
// after healing (its tombstone purged or not); one whose delete's outcome
// is unknown may be either; one whose delete found nothing (a 404) was
// lost before it, as is one not deleted and not there.
func TestDeletedListElementsThatComeBackAreCaught(t *testing.T) {
	h := &History{List: []ListElem{
		{User: "l0", ID: "e1", Acked: true, Delete: DeleteDone},    // gone: right
		{User: "l0", ID: "e2", Acked: true, Delete: DeleteDone},    // back
		{User: "l0", ID: "e3", Acked: true, Delete: DeleteUnknown}, // there: either is right
		{User: "l0", ID: "e4", Acked: true, Delete: DeleteUnknown}, // gone: either is right
		{User: "l0", ID: "e5", Acked: true, Delete: DeleteAbsent},  // there, but its delete found nothing
		{User: "l0", ID: "e6", Acked: true, Delete: NotDeleted},    // there: right
		{User: "l0", ID: "e7", Acked: true},                        // gone: lost
	}}
	r := h.CheckLists(map[string]map[string]bool{"l0": {"e2": true, "e3": true, "e5": true, "e6": true}})
	var lost []string
	for _, e := range r.Lost {
		lost = append(lost, e.ID)
	}
	if r.Acked != 7 || r.Deleted != 2 || r.DeleteUnknown != 2 || len(r.Resurrected) != 1 || r.Resurrected[0].ID != "e2" || !slices.Equal(lost, []string{"e5", "e7"}) {
		t.Fatalf("lists: %+v, want e2 back and e5, e7 lost", r)
	}
	rep := &Report{Lists: ListResult{Acked: 1, Deleted: 1, Resurrected: r.Resurrected}}
	if !rep.Failed() || !strings.Contains(strings.Join(rep.Failures(), "\n"), "l0/e2") {
		t.Fatalf("a deleted element back does not fail the run, or is not named: %q", rep.Failures())
	}
	if r := h.CheckLists(map[string]map[string]bool{"l0": {"e3": true, "e5": true, "e6": true, "e7": true}}); len(r.Resurrected) != 0 || len(r.Lost) != 1 {
		t.Fatalf("lists: %+v, want only e5 lost (its delete's 404)", r)
	}
	// With no copy read, the rest is unread, but a delete's 404 is a loss
	// whatever the copies hold.
	if r, _ := h.checkContent(nil, nil); len(r.Lost) != 1 || r.Lost[0].ID != "e5" || r.Unread != 2 {
		t.Fatalf("nothing read: lost %+v, %d unread; want e5 lost, e6 and e7 unread", r.Lost, r.Unread)
	}
}

func TestW1WritesMissingAndNotRolledBackAreCaught(t *testing.T) {
	h := &History{W1: []W1Write{{User: "u", ID: "k1", Acked: true}, {User: "u", ID: "k2", Acked: true}, {User: "u", ID: "k3", Acked: true}, {User: "u", ID: "k4", Unknown: true}}}
	r := h.CheckW1(map[string]bool{"u/k1": true}, map[string]bool{"u/k2": true})
	if r.Acked != 3 || r.RolledBack != 1 || r.Unknown != 1 || len(r.Missing) != 1 || r.Missing[0].ID != "k3" {
		t.Fatalf("w=1: %+v, want k2 rolled back and k3 missing", r)
	}
	if rep := (&Report{W1: r}); !rep.Failed() || !strings.Contains(rep.Table(), "1 silently lost") {
		t.Fatalf("a silently lost w=1 write does not fail the run:\n%s", rep.Table())
	}
	if r := h.CheckW1(map[string]bool{"u/k1": true, "u/k3": true}, map[string]bool{"u/k2": true}); len(r.Missing) != 0 {
		t.Fatalf("missing %+v though every acknowledged write is present or rolled back", r.Missing)
	}
}

func TestNonConvergenceIsCaught(t *testing.T) {
	at := func(e, s uint64) store.Position { return store.Position{Epoch: e, Seq: s} }
	parts := []PartitionCopies{{Partition: 3, Master: "n1", Positions: map[string]store.Position{"n1": at(2, 10), "n2": at(2, 10), "n3": at(2, 9)}}}
	if d := Diverged(parts, nil); len(d) != 1 || !strings.Contains(d[0], "n3 is at 2.9") {
		t.Fatalf("diverged %q, want n3 behind", d)
	}
	parts[0].Positions["n3"] = at(2, 10)
	if d := Diverged(parts, nil); len(d) != 0 {
		t.Fatalf("diverged %q of copies at one position", d)
	}
	keys := []KeyCopies{{Key: "u/c/d", Master: "n1", Copies: []Copy{{Node: "n1", Found: true, Version: 2, Value: "x"}, {Node: "n2", Found: true, Version: 2, Value: "y"}, {Node: "n3"}}}}
	d := Diverged(nil, keys)
	if len(d) != 2 || !strings.Contains(d[0], "n2 holds") || !strings.Contains(d[1], "n3 holds absent") {
		t.Fatalf("diverged %q, want n2 and n3 named", d)
	}
	if rep := (&Report{Diverged: d}); !rep.Failed() || !strings.Contains(rep.Table(), "NO (2 differences)") {
		t.Fatalf("non-convergence does not fail the run:\n%s", rep.Table())
	}
}

func TestUnavailabilityPerFaultKind(t *testing.T) {
	s := time.Second
	attempts := []Attempt{
		{Client: "a", Call: 0, Ret: s / 10, OK: true},
		{Client: "a", Call: 2 * s, Ret: 3 * s},           // fails during the kill
		{Client: "a", Call: 3 * s, Ret: 4 * s},           // still
		{Client: "a", Call: 4 * s, Ret: 5 * s, OK: true}, // back: 3s
		{Client: "b", Call: 2 * s, Ret: 2*s + s/2, OK: true},
		{Client: "b", Call: 11 * s, Ret: 12 * s}, // fails during the pause, never again OK
		{Client: "c", Call: s / 2, Ret: s},       // fails before the kill, and on into it
		{Client: "c", Call: s, Ret: 3 * s / 2, OK: true},
	}
	faults := []Fault{{Kind: KillMaster, Start: s}, {Kind: PauseMaster, Start: 10 * s}}
	u := Unavailability(attempts, faults, 20*s)
	if o := u[KillMaster]; o.Length() != 3*s || !o.Recovered || o.Client != "a" {
		t.Fatalf("kill-master outage %+v, want 3s of client a", o)
	}
	if o := u[PauseMaster]; o.Length() != 9*s || o.Recovered {
		t.Fatalf("pause-master outage %+v, want 9s, not recovered", o)
	}
	if o := u[KillMaster]; o.Client == "c" {
		t.Fatalf("kill-master outage %+v", o)
	}
	if _, ok := u["none"]; ok {
		t.Fatalf("an outage before any fault: %+v", u)
	}
}

// A write sent just before a fault and failed by it is that fault's
// outage, not the one before's (seed 22 put kill-all's outage, begun 18 ms
// before it, under kill-master).
func TestAnOutageBelongsToTheFaultThatFailedItsFirstWrite(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	attempts := []Attempt{
		{Client: "a", Call: 0, Ret: s / 10, OK: true},
		{Client: "a", Call: 10*s - 20*ms, Ret: 11 * s}, // in flight when the pause began
		{Client: "a", Call: 11 * s, Ret: 17 * s, OK: true},
	}
	faults := []Fault{{Kind: KillMaster, Start: s, Recovered: 2 * s}, {Kind: PauseMaster, Start: 10 * s}}
	u := Unavailability(attempts, faults, 20*s)
	if o, ok := u[PauseMaster]; !ok || o.Length() != 7*s+20*ms {
		t.Fatalf("outages %+v: want the 7.02s one under pause-master", u)
	}
	if o, ok := u[KillMaster]; ok {
		t.Fatalf("kill-master outage %+v: the pause caused it", o)
	}
}

func TestScheduleIsTheSeeds(t *testing.T) {
	for _, network := range []string{NetLoopback, NetNetns, "netns with a MongoDB per node"} {
		kinds := KindsFor(network)
		if network == "netns with a MongoDB per node" {
			kinds = append(KindsFor(NetNetns), StoreFaultKinds...)
		}
		a, b, c := Schedule(7, time.Minute, kinds), Schedule(7, time.Minute, kinds), Schedule(8, time.Minute, kinds)
		if FormatSchedule(a) != FormatSchedule(b) {
			t.Fatalf("%s: one seed, two schedules:\n%s\n%s", network, FormatSchedule(a), FormatSchedule(b))
		}
		if FormatSchedule(a) == FormatSchedule(c) {
			t.Fatalf("%s: seeds 7 and 8 give the same schedule:\n%s", network, FormatSchedule(a))
		}
		seen := map[string]bool{}
		overlapping := 0
		for _, s := range a[:len(kinds)+1] {
			for _, st := range []*Step{&s, s.With} {
				if st == nil {
					continue
				}
				seen[st.Kind] = true
				if (st.Kind == PauseMaster || st.Kind == IsolateMaster || st.Kind == Bridge) && st == &s && st.Hold <= leaseTTL {
					t.Fatalf("%s: a %s of %s, not longer than LEASE_TTL %s", network, st.Kind, st.Hold, leaseTTL)
				}
			}
			if s.With != nil {
				overlapping++
				if s.After >= s.Hold || s.After+s.With.Hold != s.Hold {
					t.Fatalf("%s: %s: the overlapping fault does not start during the hold and heal with it", network, s)
				}
			}
		}
		if len(seen) != len(kinds) || overlapping != 1 {
			t.Fatalf("%s: the first %d steps are not one of each kind and one overlapping pair:\n%s", network, len(kinds)+1, FormatSchedule(a))
		}
		// The spare starts out of the peer list: the edits alternate, adding first.
		in := false
		for _, s := range a {
			for _, k := range []string{s.Kind, s.With.kindOrEmpty()} {
				switch {
				case k == AddNode && in, k == RemoveNode && !in:
					t.Fatalf("%s: %s where the spare is %s:\n%s", network, k, map[bool]string{true: "in", false: "out"}[in], FormatSchedule(a))
				case k == AddNode || k == RemoveNode:
					in = !in
				}
			}
		}
	}
}

func TestSummaryAddsUpRunsAndKeepsTheWorst(t *testing.T) {
	s := time.Second
	pass := &Report{Seed: 1, Faults: map[string]int{KillMaster: 2}, Ops: map[string]int{"write ok": 10},
		Registers: RegisterVerdict{Result: porcupine.Ok, Checked: 5}, W1: W1Result{Acked: 4, RolledBack: 1},
		Convergence: s, Availability: map[string]Outage{KillMaster: {Client: "a", From: 0, Until: 2 * s}}}
	fail := &Report{Seed: 2, Faults: map[string]int{KillMaster: 1, PauseMaster: 1}, Ops: map[string]int{"write ok": 5},
		Registers: RegisterVerdict{Result: porcupine.Ok, Checked: 3}, LostRegister: []string{"put(a) lost"},
		Convergence: 3 * s, Availability: map[string]Outage{KillMaster: {Client: "b", From: 0, Until: 5 * s}, PauseMaster: {Client: "c", From: s, Until: 2 * s}}}
	var sum Summary
	sum.Add(pass)
	sum.Add(fail)
	if sum.Runs != 2 || sum.Passed != 1 || len(sum.Failed) != 1 || sum.Failed[0] != 2 {
		t.Fatalf("runs %d passed %d failed %v: want 2, 1, [2]", sum.Runs, sum.Passed, sum.Failed)
	}
	if sum.Faults[KillMaster] != 3 || sum.Ops["write ok"] != 15 || sum.LostRegister != 1 || sum.W1RolledBack != 1 || sum.Checked != 8 {
		t.Fatalf("sums wrong: %+v", sum)
	}
	if w := sum.Worst[KillMaster]; w.Length() != 5*s || sum.WorstSeed[KillMaster] != 2 || sum.WorstConvergenceSeed != 2 {
		t.Fatalf("worst kill-master outage %+v of seed %d, slowest convergence of seed %d: want 5s of seed 2, seed 2", w, sum.WorstSeed[KillMaster], sum.WorstConvergenceSeed)
	}
	if tab := sum.Table(); !strings.Contains(tab, "2: 1 passed, 1 failed (seeds 2)") || !strings.Contains(tab, "worst write outage: kill-master") {
		t.Fatalf("table:\n%s", tab)
	}
}

// A run whose copies could not be read reports its acknowledged elements
// and w=1 writes as unread, neither present nor lost; the summary of
// several runs says so too, or "0 of N lost" reads as N checked (seed 2755
// of batch b2751: 3,554 list elements unread, in its own table only).
func TestASummarySaysHowManyWritesWereNotRead(t *testing.T) {
	var sum Summary
	sum.Add(&Report{Seed: 1, Lists: ListResult{Acked: 10, Unread: 7}, W1: W1Result{Acked: 5, Unread: 3}})
	sum.Add(&Report{Seed: 2, Lists: ListResult{Acked: 4, Unread: 2}, W1: W1Result{Acked: 2}})
	tab := sum.Table()
	for _, want := range []string{"0 of 14 acknowledged; 9 UNREAD", "0 of 0 deleted; 9 UNREAD", "0 silently lost; 3 UNREAD"} {
		if !strings.Contains(tab, want) {
			t.Errorf("the table does not say %q:\n%s", want, tab)
		}
	}
	sum = Summary{}
	sum.Add(&Report{Seed: 3, Lists: ListResult{Acked: 4}, W1: W1Result{Acked: 2}})
	if tab := sum.Table(); strings.Contains(tab, "UNREAD") {
		t.Errorf("runs that read every copy are reported with unread writes:\n%s", tab)
	}
}

// An outage the workload's stop cut short ends at the stop: seed 22 of a
// netns run reported a kill-master outage of 34 s, "not recovered", that
// ran on through the checks after the workload stopped.
func TestAnOutageEndsWhenTheWorkloadStopped(t *testing.T) {
	s := time.Second
	h := &History{end: int64(12 * s), Attempts: []Attempt{
		{Client: "a", Call: 0, Ret: s / 10, OK: true},
		{Client: "a", Call: 10 * s, Ret: 11 * s},
	}}
	u := h.Outages([]Fault{{Kind: KillMaster, Start: 9 * s}})
	if o := u[KillMaster]; o.Until != 12*s || o.Recovered {
		t.Fatalf("outage %+v, want from 10s to the stop at 12s, not recovered", o)
	}
}

// A run that fails any check, not only linearizability, keeps porcupine's
// visualization of its registers beside the logs.
func TestAFailingRunKeepsTheVisualization(t *testing.T) {
	m := newHandMade()
	m.add("a", 0, 1, opPut, "x", 1, false)
	m.add("a", 2, 3, opRead, "x", 1, true)
	v, err := m.h.CheckRegisters(ReadLinearizable, 10*time.Second, "")
	if err != nil || v.Result != porcupine.Ok {
		t.Fatalf("%v %v", v.Result, err)
	}
	dir := t.TempDir()
	passing := &Report{Registers: v, History: m.h}
	keepEvidence(passing, m.h, dir)
	if passing.Registers.Path != "" {
		t.Fatalf("a passing run wrote %s", passing.Registers.Path)
	}
	lost := &Report{Registers: v, History: m.h, LostRegister: []string{"put(a, y) lost"}}
	keepEvidence(lost, m.h, dir)
	if _, err := os.Stat(filepath.Join(dir, "history-linearizable.html")); err != nil || lost.Registers.Path == "" {
		t.Fatalf("a run that lost a write kept no visualization (%q): %v", lost.Registers.Path, err)
	}
}

// A removed node's drain is awaited only once every fault of its step is
// healed: seed 2000 removed the spare while a replica was down, and the
// drain, awaited first, waited for the replica its heal had not restarted.
func TestAStepHealsEveryFaultBeforeAwaitingADrain(t *testing.T) {
	var order []string
	step := func(name string, drain bool) injected {
		in := injected{target: name, heal: func(context.Context) error { order = append(order, "heal "+name); return nil }}
		if drain {
			in.settle = func(context.Context) error { order = append(order, "drain "+name); return nil }
		}
		return in
	}
	if err := healStep(context.Background(), []injected{step("kill-replica", false), step("remove-node", true)}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"heal remove-node", "heal kill-replica", "drain remove-node"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}

// A schedule keeps a run injecting faults for its whole duration even when
// the cluster is whole again at once after each: the run stops at the
// duration, not when the plan runs out (2-minute runs of seed 3000 ran out
// of faults at 89 s).
func TestAScheduleFillsItsDuration(t *testing.T) {
	for _, network := range []string{NetLoopback, NetNetns} {
		for seed := uint64(1); seed <= 20; seed++ {
			var busy time.Duration
			for _, s := range Schedule(seed, 2*time.Minute, KindsFor(network)) {
				busy += s.Hold + s.Quiet
			}
			if busy < 2*time.Minute {
				t.Fatalf("%s seed %d: faults and quiet times of %s planned for a 2m run", network, seed, busy)
			}
		}
	}
}

// A register without a final read (the read failed: a problem of its own
// fails the run) is not counted as losing its writes: seed 4101 reported
// 1410 lost majority writes that were never looked for.
func TestARegisterWithoutAFinalReadLosesNothing(t *testing.T) {
	m := newHandMade()
	m.add("a", 0, 1, opPut, "x", 1, false)
	m.add("b", 0, 1, opPut, "z", 1, false)
	lost := m.h.LostRegisterWrites(map[string]FinalRead{"a": {Node: "n1", Found: true, Value: "x", Version: 1}})
	if len(lost) != 0 {
		t.Fatalf("lost %q: b was not read, not lost", lost)
	}
}

// A run interrupted while it is checked has no node left to ask: the
// checks say so instead of panicking (a 15-run batch ended in a panic and
// no summary when it was interrupted so).
func TestAHealedCheckWithNoNodeSaysSo(t *testing.T) {
	keys := map[string][]string{"u": {"c/d"}}
	if _, why := (Healed{}).positions(context.Background(), keys); why != noNodeToAsk {
		t.Fatalf("positions with no node: %q", why)
	}
	if _, why := (Healed{}).localCopies(context.Background(), nil, keys); why != noNodeToAsk {
		t.Fatalf("local copies with no node: %q", why)
	}
}

// A run whose copies never converged reads no content: its acknowledged
// list elements and w=1 writes are unread, not lost (seed 9423 reported
// all 6,886 elements of a run lost); once copies are read, what the master
// lacks is lost again.
func TestUnreadWritesAreNotCountedLost(t *testing.T) {
	h := &History{List: []ListElem{{User: "l0", ID: "e1", Acked: true}, {User: "l0", ID: "e2", Acked: true}},
		W1: []W1Write{{User: "u", ID: "k1", Acked: true}}}
	lists, w1 := h.checkContent(nil, nil)
	if len(lists.Lost) != 0 || lists.Unread != 2 || len(w1.Missing) != 0 || w1.Unread != 1 {
		t.Fatalf("with no copy read: lists %+v, w=1 %+v; want 2 and 1 unread, none lost", lists, w1)
	}
	if table := (&Report{Lists: lists, W1: w1}).Table(); !strings.Contains(table, "2 UNREAD") || !strings.Contains(table, "1 UNREAD") {
		t.Fatalf("the table does not say what was unread:\n%s", table)
	}
	copies := []KeyCopies{{Key: "l0/list/e1", Master: "n1", Copies: []Copy{{Node: "n1", Found: true}}}}
	lists, w1 = h.checkContent(copies, nil)
	if len(lists.Lost) != 1 || lists.Lost[0].ID != "e2" || lists.Unread != 0 || len(w1.Missing) != 1 {
		t.Fatalf("with copies read: lists %+v, w=1 %+v; want e2 and k1 lost", lists, w1)
	}
}

// A local read sent with its client's own write's token returns that
// write (its version and value) or a later version; absent only after a
// delete sent before the read returned.
func TestReadYourWritesIsChecked(t *testing.T) {
	m := newHandMade()
	read := func(doc string, since int64, deleted, found bool, version int64, value string) {
		m.id++
		in := regInput{Doc: doc, Kind: opRead, Concern: ReadLocal, Since: since, SinceValue: "v", SinceDeleted: deleted}
		m.h.ops = append(m.h.ops, porcupine.Operation{ClientId: 1, Input: in, Call: 10, Return: 11,
			Output: regOutput{Outcome: resultDone, Found: found, Value: value, Version: version}, Metadata: &opMeta{id: m.id, asked: "n2"}})
	}
	read("a", 2, false, true, 2, "v") // its write
	read("a", 2, false, true, 3, "w") // later
	read("a", 0, false, true, 1, "u") // no token: not checked
	read("a", 3, true, false, 0, "")  // its own delete
	read("a", 2, false, true, 1, "u") // older: broken
	read("a", 2, false, true, 2, "x") // its version with another value: broken
	read("b", 1, false, false, 0, "") // absent, no delete of b: broken
	checked, broken := m.h.ReadYourWrites()
	if checked != 6 || len(broken) != 3 || !strings.Contains(broken[0], `read-local(a) -> "u" v1`) ||
		!strings.Contains(broken[1], `read-local(a) -> "x" v2`) || !strings.Contains(broken[2], "read-local(b) -> absent") {
		t.Fatalf("checked %d, broken %q: want 6 checked, the reads of a at v1 and of x at v2 and the absent b broken", checked, broken)
	}
	// A delete of b sent after the read returned explains nothing; one
	// (by anyone) sent before, naming b's version, explains the absence.
	del := func(call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 2, Input: regInput{Doc: "b", Kind: opDelete, Expect: 1}, Call: call, Return: 100,
			Output: regOutput{Outcome: resultUnknown}, Metadata: &opMeta{id: 99, asked: "n1"}}
	}
	m.h.ops = append(m.h.ops, del(50))
	if _, broken := m.h.ReadYourWrites(); len(broken) != 3 {
		t.Fatalf("broken %q, want the absent b still broken: its delete came after the read", broken)
	}
	m.h.ops = append(m.h.ops, del(5))
	if _, broken := m.h.ReadYourWrites(); len(broken) != 2 {
		t.Fatalf("broken %q, want only the two reads of a", broken)
	}
	rep := &Report{}
	rep.ReadYourWrites.Checked, rep.ReadYourWrites.Broken = m.h.ReadYourWrites()
	if !rep.Failed() || !strings.Contains(rep.Table(), "read-your-writes (tokens)") {
		t.Fatalf("a broken read-your-writes does not fail the run:\n%s", rep.Table())
	}
}

// A majority read must never return a state a failover rolled back. Each
// value is written once, so such a state shows against the history that
// stayed: another state at its version, a version past the register's
// end, a value never written, or only by a refused write.
func TestMajorityReadsAreChecked(t *testing.T) {
	m := newHandMade()
	write := func(doc, value string, outcome outcome, version int64) {
		m.id++
		m.h.ops = append(m.h.ops, porcupine.Operation{ClientId: 1, Input: regInput{Doc: doc, Kind: opPut, Value: value}, Call: 1, Return: 2,
			Output: regOutput{Outcome: outcome, Version: version}, Metadata: &opMeta{id: m.id, asked: "n1"}})
	}
	read := func(doc string, concern ReadConcern, found bool, version int64, value string) {
		m.id++
		m.h.ops = append(m.h.ops, porcupine.Operation{ClientId: 2, Input: regInput{Doc: doc, Kind: opRead, Concern: concern}, Call: 10, Return: 11,
			Output: regOutput{Outcome: resultDone, Found: found, Value: value, Version: version}, Metadata: &opMeta{id: m.id, asked: "n2"}})
	}
	write("a", "x", resultDone, 1)
	write("a", "y", resultUnknown, 0) // applied at v2 by a master that lost it
	write("a", "z", resultDone, 2)    // the next master's v2
	write("a", "q", resultRefused, 0)
	write("a", "u", resultUnknown, 0)         // took effect at v3: the final read
	write("b", "s", resultUnknown, 0)         // applied at v1, rolled back, never written again
	read("a", ReadMajority, true, 1, "x")     // fine
	read("a", ReadMajority, true, 3, "u")     // fine: the final state
	read("a", ReadMajority, false, 0, "")     // absent: not checked here
	read("a", ReadLocal, true, 2, "y")        // a local read may see it
	read("a", ReadMajority, true, 2, "y")     // broken: z stayed at v2
	read("a", ReadMajority, true, 4, "q")     // broken: refused
	read("a", ReadMajority, true, 4, "never") // broken: nobody wrote it
	read("a", ReadMajority, true, 2, "s")     // broken: b's value
	read("b", ReadMajority, true, 1, "s")     // settled by b's final read, below
	finals := map[string]FinalRead{"a": {Node: "n1", Found: true, Value: "u", Version: 3}}
	checked, broken := m.h.MajorityReads(finals)
	want := []string{`read-majority(a) -> "y" v2`, `read-majority(a) -> "q" v4`, `read-majority(a) -> "never" v4`, `read-majority(a) -> "s" v2`}
	if checked != 7 || len(broken) != len(want) {
		t.Fatalf("checked %d, broken %q: want 7 checked and %d broken", checked, broken, len(want))
	}
	for i, w := range want {
		if !strings.Contains(broken[i], w) {
			t.Fatalf("broken[%d] = %q, want %s", i, broken[i], w)
		}
	}
	if !strings.Contains(broken[0], `the state that stayed at that version is "z" v2`) {
		t.Fatalf("the rolled-back read does not name the state that stayed: %q", broken[0])
	}
	// b's final read finds it at v1 with another value (a later write
	// made it again), or absent with no delete of v1 or later: either
	// way s was rolled back. A delete that may have taken effect
	// explains the absence.
	for _, f := range []FinalRead{{Node: "n1", Found: true, Value: "t", Version: 1}, {Node: "n1"}} {
		finals["b"] = f
		if _, broken := m.h.MajorityReads(finals); len(broken) != 5 || !strings.Contains(broken[4], `read-majority(b) -> "s" v1`) {
			t.Fatalf("broken %q: want b's read of s flagged once b ends %+v", broken, f)
		}
	}
	m.h.ops = append(m.h.ops, porcupine.Operation{ClientId: 3, Input: regInput{Doc: "b", Kind: opDelete, Expect: 1}, Call: 20, Return: 21,
		Output: regOutput{Outcome: resultUnknown}, Metadata: &opMeta{id: 99, asked: "n1"}})
	finals["a"] = FinalRead{Node: "n1", Found: true, Value: "z", Version: 2}
	if _, broken := m.h.MajorityReads(finals); len(broken) != 5 || !strings.Contains(broken[0], `read-majority(a) -> "u" v3`) ||
		!strings.Contains(broken[0], "the register ends at v2") {
		t.Fatalf("broken %q: want the read of u at v3 flagged once a ends at v2", broken)
	}
	// Two majority reads that disagree at a version nothing else
	// observed: one of them was rolled back.
	write("a", "lost", resultUnknown, 0)
	write("a", "kept", resultUnknown, 0)
	read("a", ReadMajority, true, 7, "lost")
	read("a", ReadMajority, true, 7, "kept")
	finals["a"] = FinalRead{Node: "n1", Found: true, Value: "later", Version: 8}
	if _, broken := m.h.MajorityReads(finals); !strings.Contains(broken[len(broken)-1], `read-majority(a) -> "kept" v7`) ||
		!strings.Contains(broken[len(broken)-1], `another majority read found "lost" at that version`) {
		t.Fatalf("broken %q: want the two majority reads at v7 named", broken)
	}
	// A value read at a version other than the one its write was
	// acknowledged at: a write applies once, so that state was rolled
	// back, though nothing else observed its version.
	m2 := newHandMade()
	m2.add("a", 0, 1, opPut, "p", 1, false)
	m2.add("a", 2, 3, opRead, "p", 2, true)
	m2.h.ops[1].Input = regInput{Doc: "a", Kind: opRead, Concern: ReadMajority}
	if checked, broken := m2.h.MajorityReads(nil); checked != 1 || len(broken) != 1 ||
		!strings.Contains(broken[0], "its write was acknowledged at another version: put(a, \"p\") -> v1") {
		t.Fatalf("checked %d, broken %q: want the read of p at v2 flagged", checked, broken)
	}
	rep := &Report{}
	rep.MajorityReads.Checked, rep.MajorityReads.Broken = m.h.MajorityReads(finals)
	if !rep.Failed() || !strings.Contains(rep.Table(), "majority reads never rolled back") {
		t.Fatalf("a majority read of a rolled-back state does not fail the run:\n%s", rep.Table())
	}
}

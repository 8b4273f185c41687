package lease

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/store"
)

// cutNetwork is a transport whose links are all cut: no other voter answers.
type cutNetwork struct{}

func (cutNetwork) Vote(context.Context, string, Batch) ([]Decision, error) {
	return nil, errors.New("link cut")
}

func TestVoterSetStepsSurviveARestart(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	target := []string{"a", "b", "c"}
	plan := func() Plan {
		return Plan{Voters: target, Settle: 10 * time.Second, Want: func(int) bool { return false }}
	}
	cfg := ManagerConfig{Self: "a", Partitions: 4, TTL: time.Second, Store: st, Transport: cutNetwork{}, Plan: plan, Now: clock}
	m, err := NewManager(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := m.VoterSets(); fmt.Sprint(cur) != "[a b c]" {
		t.Fatalf("first start: %v", cur)
	}
	// Two members replaced at once: one step now, the next after Settle.
	target = []string{"b", "c", "d"}
	m.Round(ctx)
	if cur, tgt := m.VoterSets(); fmt.Sprint(cur) != "[a b c d]" || fmt.Sprint(tgt) != "[b c d]" {
		t.Fatalf("after the first step: current %v target %v", cur, tgt)
	}
	// The node restarts before the settle delay: it resumes from the step
	// it had applied, and does not jump to the target.
	now = now.Add(2 * time.Second)
	m2, err := NewManager(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m2.Round(ctx)
	if cur, _ := m2.VoterSets(); fmt.Sprint(cur) != "[a b c d]" {
		t.Fatalf("restarted inside the settle delay, voters are %v; want the applied step [a b c d]", cur)
	}
	now = now.Add(10 * time.Second)
	m2.Round(ctx)
	if cur, _ := m2.VoterSets(); fmt.Sprint(cur) != "[b c d]" {
		t.Fatalf("after the settle delay: %v", cur)
	}
}

// votersVia delivers every batch to the voter of the manager named, unless
// the link to it is cut.
type votersVia struct {
	voters map[string]*Manager
	cut    map[string]bool
}

// via is a transport to the voters of managers ms.
func via(ms ...*Manager) votersVia {
	v := votersVia{voters: map[string]*Manager{}, cut: map[string]bool{}}
	for _, m := range ms {
		v.voters[m.cfg.Self] = m
	}
	return v
}

func (v votersVia) Vote(ctx context.Context, to string, b Batch) ([]Decision, error) {
	if v.cut[to] {
		return nil, errors.New("link cut")
	}
	m, ok := v.voters[to]
	if !ok {
		return nil, fmt.Errorf("no voter %q", to)
	}
	return m.Vote(ctx, b), nil
}

// An orderly handoff: the holder releases its lease on the voters and the
// next candidate acquires it at once with a higher epoch, long before the
// released lease would have run out. The holder does not campaign for it
// meanwhile, not even in a round whose plan still wants it (one that
// decided before the release): in CI a draining node took back at once,
// at the next epoch, 71 leases it had just released for handoffs, its
// receiver's takeover failed each time, and the drain did not end.
func TestReleaseLetsTheNextHolderInAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *store.Store { return openStore(t) }
	plan := func() Plan { return Plan{Voters: []string{"a"}, Want: func(int) bool { return true }} }
	const ttl = time.Minute
	clock := time.Now()
	now := func() time.Time { return clock }
	a, err := NewManager(ctx, ManagerConfig{Self: "a", Partitions: 1, TTL: ttl, Store: open(), Transport: cutNetwork{}, Plan: plan, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewManager(ctx, ManagerConfig{Self: "b", Partitions: 1, TTL: ttl, Store: open(), Transport: via(a), Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	a.Round(ctx)
	epochA, ok := a.Holds(0)
	if !ok {
		t.Fatal("a, the only voter, did not take the lease")
	}
	b.Round(ctx)
	if _, ok := b.Holds(0); ok {
		t.Fatal("b took a lease a holds")
	}
	if !a.Release(ctx, 0) {
		t.Fatal("a had nothing to release")
	}
	if _, ok := a.Holds(0); ok {
		t.Fatal("a still holds the lease it released")
	}
	// Its plan wants the partition, as one computed before the release did;
	// the round is past the pause between campaigns of a partition.
	clock = clock.Add(ttl / 4)
	a.Round(ctx)
	if e, ok := a.Holds(0); ok {
		t.Fatalf("a took back, at epoch %d, the lease it had just released for a handoff", e)
	}
	go b.Run(ctx)
	actx, acancel := context.WithTimeout(ctx, 10*time.Second) // far less than the TTL
	defer acancel()
	epochB, err := b.Acquire(actx, 0)
	if err != nil {
		t.Fatalf("b could not acquire the released lease: %v", err)
	}
	if epochB <= epochA {
		t.Fatalf("b holds epoch %d, not above a's %d", epochB, epochA)
	}
	if a.Release(ctx, 0) {
		t.Fatal("a released a lease it no longer holds")
	}
}

// A voter whose store refuses to record a new grant refuses that grant, but
// still renews the leases of the same batch: a renewal records nothing new
// (the holder and epoch are stored already), so a slow store must not make
// every master in the batch lose its lease. Before, one failed record
// refused the whole batch, and under load masters lost their leases in
// waves.
func TestRenewalsSurviveAVoterThatCannotRecordANewGrant(t *testing.T) {
	ctx := context.Background()
	mongo := storetest.Start(t)
	st, err := store.Open(ctx, store.Options{URI: mongo.URI, Database: "shoal"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	now := time.Unix(1_800_000_000, 0)
	const ttl = 3 * time.Second
	wanted := map[int]bool{0: true}
	plan := func() Plan { return Plan{Voters: []string{"a"}, Want: func(p int) bool { return wanted[p] }} }
	m, err := NewManager(ctx, ManagerConfig{Self: "a", Partitions: 2, TTL: ttl, Store: st, Transport: cutNetwork{},
		Plan: plan, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	m.Round(ctx)
	if _, ok := m.Holds(0); !ok {
		t.Fatal("a, the only voter, did not take partition 0")
	}
	// A renewal of 0 is due, and a campaign for 1 goes in the same batch,
	// while the store refuses every write.
	now = now.Add(ttl / 2)
	wanted[1] = true
	unlock := mongo.LockWrites(t, "shoal")
	m.Round(ctx)
	unlock()
	if _, ok := m.Holds(1); ok {
		t.Fatal("partition 1 was granted though its grant could not be recorded")
	}
	now = now.Add(ttl * 3 / 4)
	if _, ok := m.Holds(0); !ok {
		t.Fatal("partition 0's lease ran out: its renewal was refused with the grant the store could not record")
	}
	m.Round(ctx)
	if _, ok := m.Holds(1); !ok {
		t.Fatal("partition 1 was not granted once the store took writes again")
	}
}

// A node that is not a voter learns that a partition's lease is over by
// asking the voters (Manager.Ended): it is over when a majority of them
// saw it end with nobody after it. A live lease, or one a voter cannot
// vouch for (loaded at start), is not over.
func TestEndedAsksAMajorityOfTheVoters(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	const ttl = 3 * time.Second
	open := func() *store.Store { return openStore(t) }
	want := true
	voterPlan := func() Plan { return Plan{Voters: []string{"a"}, Want: func(int) bool { return want }} }
	a, err := NewManager(ctx, ManagerConfig{Self: "a", Partitions: 1, TTL: ttl, Store: open(), Transport: cutNetwork{}, Plan: voterPlan, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewManager(ctx, ManagerConfig{Self: "r", Partitions: 1, TTL: ttl, Store: open(), Transport: via(a),
		Plan: func() Plan { return Plan{Voters: []string{"a"}, Want: func(int) bool { return false }} }, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	a.Round(ctx)
	if _, ok := a.Holds(0); !ok {
		t.Fatal("a did not take the lease")
	}
	if got := r.Ended(ctx, []int{0}); got[0].Ended {
		t.Fatalf("a live lease counts as ended: %+v", got[0])
	}
	// a stops renewing (it no longer wants the partition) and its lease
	// runs out on the voter.
	want = false
	now = now.Add(2 * ttl)
	got := r.Ended(ctx, []int{0})
	if !got[0].Ended || got[0].Holder != "a" {
		t.Fatalf("a lease that ran out: %+v, want ended, holder a", got[0])
	}
	// Unreachable voters vouch for nothing.
	cut, err := NewManager(ctx, ManagerConfig{Self: "r2", Partitions: 1, TTL: ttl, Store: open(), Transport: cutNetwork{},
		Plan: func() Plan { return Plan{Voters: []string{"a"}, Want: func(int) bool { return false }} }, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if got := cut.Ended(ctx, []int{0}); got[0].Ended {
		t.Fatal("with no voter answering, the lease counts as ended")
	}
}

// A node whose store holds no voter set starts from the set in use in the
// cluster (learned from a peer) and steps from there toward the peer
// list's, one member at a time (issue 11, case 11). Before, it took the
// peer list's set at once, whose majorities need not overlap those of the
// set the others still use.
func TestAFreshNodeStepsFromTheVoterSetInUse(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Unix(1_800_000_000, 0)
	plan := func() Plan {
		return Plan{Voters: []string{"c", "d", "e"}, Settle: 10 * time.Second, Want: func(int) bool { return false }}
	}
	m, err := NewManager(ctx, ManagerConfig{Self: "e", Partitions: 1, TTL: time.Second, Store: st, Transport: cutNetwork{}, Plan: plan,
		InitialVoters: []string{"a", "b", "c"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := m.VoterSets(); fmt.Sprint(cur) != "[a b c]" {
		t.Fatalf("a fresh node starts from %v, want the set in use [a b c]", cur)
	}
	// The set in use may be a step of a change itself: the next step
	// waits the settle time, as on every node.
	m.Round(ctx)
	if cur, _ := m.VoterSets(); fmt.Sprint(cur) != "[a b c]" {
		t.Fatalf("stepped at once from the learned set, to %v", cur)
	}
	now = now.Add(11 * time.Second)
	m.Round(ctx)
	if cur, tgt := m.VoterSets(); fmt.Sprint(cur) != "[a b c d]" || fmt.Sprint(tgt) != "[c d e]" {
		t.Fatalf("after the settle time: %v toward %v, want one member added", cur, tgt)
	}
}

// An epoch learned from the node's own store is never proposed again: with
// the voters' records lost (a new store), the next tenure is still above
// it (issue 11, case 11: an epoch could be reused after a voter's disk was
// wiped).
func TestAnEpochLearnedFromTheStoreIsNotReused(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	plan := func() Plan { return Plan{Voters: []string{"a"}, Want: func(int) bool { return true }} }
	m, err := NewManager(ctx, ManagerConfig{Self: "a", Partitions: 1, TTL: time.Second, Store: st, Transport: cutNetwork{}, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	m.Learn(0, 7) // the node's store holds history at epoch 7
	m.Round(ctx)
	if e, ok := m.Holds(0); !ok || e <= 7 {
		t.Fatalf("holds epoch %d (%v), want a new tenure above 7", e, ok)
	}
}

// openStore opens an embedded store for the test, closed when it ends.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{Database: "shoal", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// A voter that restarts knows who held each partition by its own records,
// not only the epoch: its table is empty until that holder names itself,
// and the campaign rule waits for the holder the voters name (the fault
// suite's seed 5000).
func TestARestartedVoterKnowsTheHoldersOfItsRecords(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	if err := st.SaveLeaseVotes(ctx, map[int]store.LeaseVote{1: {Partition: 1, Holder: "b", Epoch: 7}}); err != nil {
		t.Fatal(err)
	}
	plan := func() Plan { return Plan{Voters: []string{"a", "b", "c"}, Want: func(int) bool { return false }} }
	m, err := NewManager(ctx, ManagerConfig{Self: "a", Partitions: 2, TTL: time.Second, Store: st, Transport: cutNetwork{}, Plan: plan})
	if err != nil {
		t.Fatal(err)
	}
	if epoch, holder := m.Learned(1); epoch != 7 || holder != "b" {
		t.Errorf("partition 1 learned as epoch %d held by %q; want epoch 7 held by \"b\" (its record)", epoch, holder)
	}
	if epoch, holder := m.Learned(0); epoch != 0 || holder != "" {
		t.Errorf("partition 0, never granted, learned as epoch %d held by %q", epoch, holder)
	}
}

// A holder's renewal carries its list of copies; once a majority of the
// voters keeps it, ListOnVoters reports it, and a node that wins the lease
// after the holder is gone reads it from the voters that granted it
// (NewestLists), whatever its own table says. a is the only voter here.
func TestTheVotersKeepTheHoldersListOfCopies(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	const ttl = 3 * time.Second
	clock := func() time.Time { return now }
	var carried *record.CopyList
	planA := func() Plan {
		return Plan{Voters: []string{"a"}, Want: func(int) bool { return true },
			List: func(int) *record.CopyList { return carried }}
	}
	a, err := NewManager(ctx, ManagerConfig{Self: "a", Partitions: 1, TTL: ttl, Store: openStore(t), Transport: cutNetwork{}, Plan: planA, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	a.Round(ctx)
	epoch, ok := a.Holds(0)
	if !ok {
		t.Fatal("a, the only voter, did not take the lease")
	}
	if l := a.ListOnVoters(0); l != nil {
		t.Fatalf("a list on the voters before any renewal carried one: %+v", l)
	}
	carried = &record.CopyList{Epoch: epoch, Seq: 2, Copies: []string{"a", "c"}}
	now = now.Add(ttl / 2) // a renewal is due
	a.Round(ctx)
	if l := a.ListOnVoters(0); !l.Same(carried) || !a.KeptCovers(0, epoch, carried.Copies) {
		t.Fatalf("after a renewal with %+v the voters keep %+v (covers its copies at epoch %d: %v)", carried, l, epoch, a.KeptCovers(0, epoch, carried.Copies))
	}
	// The copies a table counts writes on, fewer than the list names
	// (the count of copies fell, and a copy leaving keeps its place on the
	// list until the others hold what it held): covered. One it does not
	// name, or another epoch: not.
	if !a.KeptCovers(0, epoch, []string{"a"}) || a.KeptCovers(0, epoch, []string{"a", "d"}) || a.KeptCovers(0, epoch+1, carried.Copies) {
		t.Fatalf("the voters' list %+v: covers [a] %v (want true), [a d] %v (want false), at epoch %d %v (want false)",
			carried, a.KeptCovers(0, epoch, []string{"a"}), a.KeptCovers(0, epoch, []string{"a", "d"}), epoch+1, a.KeptCovers(0, epoch+1, carried.Copies))
	}
	// a stops wanting the partition; b campaigns once the lease ran out.
	planB := func() Plan { return Plan{Voters: []string{"a"}, Want: func(int) bool { return true }} }
	b, err := NewManager(ctx, ManagerConfig{Self: "b", Partitions: 1, TTL: ttl, Store: openStore(t), Transport: via(a), Plan: planB, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * ttl)
	b.Round(ctx) // refused at an epoch a had: b learns a's
	now = now.Add(ttl / 4)
	b.Round(ctx)
	epochB, ok := b.Holds(0)
	if !ok {
		t.Fatal("b did not win the lease after a's ran out")
	}
	if ls := b.NewestLists(0, epochB); len(ls) != 1 || !ls[0].Same(carried) {
		t.Fatalf("b read %+v from the voters that granted it, want a's list %+v", ls, carried)
	}
}

// A node keeps the two latest lists of the newest epoch it has seen the
// voters keep: the one a majority keeps and the next, which some voters
// may keep already. Older lists of that epoch, and lists of older epochs,
// are dropped; a list of a newer epoch starts over.
func TestTheLatestTwoListsOfTheNewestEpochAreKept(t *testing.T) {
	l := func(e, s uint64) *record.CopyList { return &record.CopyList{Epoch: e, Seq: s, Copies: []string{"a"}} }
	var seen []*record.CopyList
	for _, add := range []*record.CopyList{l(3, 1), l(3, 3), l(2, 9), l(3, 2), l(3, 3)} {
		seen = latestTwo(seen, add)
	}
	if len(seen) != 2 || !seen[0].Same(l(3, 3)) || !seen[1].Same(l(3, 2)) {
		t.Fatalf("kept %+v, want 3.3 and 3.2", seen)
	}
	seen = latestTwo(seen, l(4, 1))
	if len(seen) != 1 || !seen[0].Same(l(4, 1)) {
		t.Fatalf("kept %+v after a newer epoch, want 4.1 alone", seen)
	}
}

// A node campaigning as Acquire does (a handoff's receiver) while the
// voters still count the previous holder's lease, whose release reached
// one of them only, waits between attempts as every campaign does,
// however fast the voters refuse: every attempt uses up an epoch, and in a
// fault run on MongoDB a receiver proposed 194 epochs in two seconds
// (partition 5 went from epoch 5 to 199), one vote written per attempt.
func TestAnEagerCampaignRefusedAtOnceWaitsBetweenAttempts(t *testing.T) {
	ctx := context.Background()
	const ttl = 3 * time.Second
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return clock }
	ids := []string{"v1", "v2", "v3"}
	var voters []*Manager
	for _, id := range ids {
		plan := func() Plan { return Plan{Voters: ids, Want: func(int) bool { return false }} }
		m, err := NewManager(ctx, ManagerConfig{Self: id, Partitions: 1, TTL: ttl, Store: openStore(t), Transport: cutNetwork{}, Plan: plan, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		voters = append(voters, m)
	}
	clock = clock.Add(ttl) // past the voters' wait as new voters
	wants := func() Plan { return Plan{Voters: ids, Want: func(int) bool { return true }} }
	toOld := via(voters...)
	old, err := NewManager(ctx, ManagerConfig{Self: "old", Partitions: 1, TTL: ttl, Store: openStore(t), Transport: toOld, Plan: wants, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	old.Round(ctx)
	from, ok := old.Holds(0)
	if !ok {
		t.Fatal("the first holder did not take the lease")
	}
	toOld.cut["v2"], toOld.cut["v3"] = true, true
	if !old.Release(ctx, 0) {
		t.Fatal("nothing released")
	}
	next, err := NewManager(ctx, ManagerConfig{Self: "next", Partitions: 1, TTL: ttl, Store: openStore(t), Transport: via(voters...), Plan: wants, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	next.mu.Lock()
	next.eager[0] = true // as Acquire marks it
	next.mu.Unlock()
	const step = 5 * time.Millisecond // a round trip to voters that refuse without a store write
	start := clock
	var won uint64
	for range 2000 {
		next.Round(ctx)
		if e, ok := next.Holds(0); ok {
			won = e
			break
		}
		clock = clock.Add(step)
	}
	if won == 0 {
		t.Fatalf("no lease after %s", clock.Sub(start))
	}
	// Nobody could win before v2 and v3 let the old lease run out: about
	// a TTL, at one attempt every TTL/30.
	if most := uint64(ttl/(ttl/30)) + 2; won-from > most {
		t.Fatalf("the lease was won at epoch %d, %d past the released one's after %s: more than %d attempts", won, won-from, clock.Sub(start), most)
	}
}

// Acquire itself paces the rounds it asks for while it is refused: a
// round before the next attempt is due skips the partition, and asking
// for rounds back to back would spin on them (every round reads the
// node's plan) until the old lease runs out. Real time, a short TTL.
func TestAnAcquireRefusedAtOnceDoesNotSpinOnRounds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ttl = 600 * time.Millisecond
	ids := []string{"v1", "v2", "v3"}
	var voters []*Manager
	for _, id := range ids {
		plan := func() Plan { return Plan{Voters: ids, Want: func(int) bool { return false }} }
		m, err := NewManager(ctx, ManagerConfig{Self: id, Partitions: 1, TTL: ttl, Store: openStore(t), Transport: cutNetwork{}, Plan: plan})
		if err != nil {
			t.Fatal(err)
		}
		voters = append(voters, m)
	}
	wants := func() Plan { return Plan{Voters: ids, Want: func(int) bool { return true }} }
	toOld := via(voters...)
	old, err := NewManager(ctx, ManagerConfig{Self: "old", Partitions: 1, TTL: ttl, Store: openStore(t), Transport: toOld, Plan: wants})
	if err != nil {
		t.Fatal(err)
	}
	oldCtx, stopOld := context.WithCancel(ctx)
	oldDone := make(chan struct{})
	go func() { defer close(oldDone); old.Run(oldCtx) }()
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	if _, err := old.Acquire(actx, 0); err != nil {
		t.Fatal(err)
	}
	stopOld()
	<-oldDone
	toOld.cut["v2"], toOld.cut["v3"] = true, true
	if !old.Release(ctx, 0) {
		t.Fatal("nothing released")
	}
	var plans atomic.Int64
	counted := func() Plan { plans.Add(1); return wants() }
	next, err := NewManager(ctx, ManagerConfig{Self: "next", Partitions: 1, TTL: ttl, Store: openStore(t), Transport: via(voters...), Plan: counted})
	if err != nil {
		t.Fatal(err)
	}
	go next.Run(ctx)
	if _, err := next.Acquire(actx, 0); err != nil {
		t.Fatal(err)
	}
	// Until the old lease ran out (at most a TTL): a round every TTL/6
	// and an attempt every TTL/30, about 40; spinning, thousands.
	if n := plans.Load(); n > 200 {
		t.Fatalf("%d rounds to acquire a lease refused for at most %s", n, ttl)
	}
}

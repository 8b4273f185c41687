package lease

import (
	"errors"
	"github.com/shoal-db/shoal/record"
	"math/rand/v2"
	"testing"
	"time"
)

// t0 is the origin of every manual clock in these tests.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	ttl    = 3 * time.Second
	margin = 300 * time.Millisecond
)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestDecideGrant(t *testing.T) {
	rec, d := Decide(VoterState{}, Record{}, Request{Partition: 7, Candidate: "a", Epoch: 1}, at(0), ttl)
	want := Record{Partition: 7, Holder: "a", Epoch: 1, Until: at(ttl)}
	if !d.Granted || d.Reason != "" || rec != want || d.Record != want {
		t.Fatalf("got %+v %+v, want grant of %+v", rec, d, want)
	}
	if d.Err() != nil {
		t.Fatalf("Err of a grant = %v", d.Err())
	}
}

func TestDecideRenewExtends(t *testing.T) {
	rec := Record{Partition: 7, Holder: "a", Epoch: 1, Until: at(ttl)}
	got, d := Decide(VoterState{}, rec, Request{Partition: 7, Candidate: "a", Epoch: 1, Renew: true}, at(time.Second), ttl)
	if !d.Granted || got.Until != at(time.Second+ttl) || got.Epoch != 1 || got.Holder != "a" {
		t.Fatalf("renewal: got %+v %+v", got, d)
	}
}

func TestDecideExpiryLetsNextEpochIn(t *testing.T) {
	rec := Record{Partition: 7, Holder: "a", Epoch: 1, Until: at(ttl)}
	req := Request{Partition: 7, Candidate: "b", Epoch: 2}
	// One nanosecond before Until the lease is live.
	got, d := Decide(VoterState{}, rec, req, at(ttl-1), ttl)
	if d.Granted || d.Reason != ReasonHeldByOther || got != rec || d.Record != rec {
		t.Fatalf("before Until: got %+v %+v, want held-by-other with the record", got, d)
	}
	// At Until it has expired, and epoch+1 is granted.
	got, d = Decide(VoterState{}, rec, req, at(ttl), ttl)
	want := Record{Partition: 7, Holder: "b", Epoch: 2, Until: at(2 * ttl)}
	if !d.Granted || got != want {
		t.Fatalf("at Until: got %+v %+v, want %+v", got, d, want)
	}
}

func TestDecideTable(t *testing.T) {
	live := Record{Partition: 3, Holder: "a", Epoch: 5, Until: at(ttl)}
	expired := Record{Partition: 3, Holder: "a", Epoch: 5, Until: at(-time.Second)}
	now := at(time.Second)
	cases := []struct {
		name   string
		v      VoterState
		rec    Record
		req    Request
		reason Reason // "" means granted
		until  time.Time
	}{
		{"new lease on empty record", VoterState{}, Record{}, Request{3, "b", 1, false, nil}, "", now.Add(ttl)},
		{"held by other, higher epoch", VoterState{}, live, Request{3, "b", 6, false, nil}, ReasonHeldByOther, time.Time{}},
		{"held by other, renewal flag", VoterState{}, live, Request{3, "b", 6, true, nil}, ReasonHeldByOther, time.Time{}},
		{"expired, same epoch other node", VoterState{}, expired, Request{3, "b", 5, false, nil}, ReasonStaleEpoch, time.Time{}},
		{"expired, lower epoch", VoterState{}, expired, Request{3, "b", 4, false, nil}, ReasonStaleEpoch, time.Time{}},
		{"expired, higher epoch", VoterState{}, expired, Request{3, "b", 6, false, nil}, "", now.Add(ttl)},
		{"renewal by holder", VoterState{}, live, Request{3, "a", 5, true, nil}, "", now.Add(ttl)},
		{"retried acquisition by holder", VoterState{}, live, Request{3, "a", 5, false, nil}, "", now.Add(ttl)},
		{"holder takes a higher epoch while live", VoterState{}, live, Request{3, "a", 6, false, nil}, "", now.Add(ttl)},
		{"holder renews a stale epoch", VoterState{}, live, Request{3, "a", 4, true, nil}, ReasonNotHolder, time.Time{}},
		{"lapsed renewal nobody replaced", VoterState{}, expired, Request{3, "a", 5, true, nil}, "", now.Add(ttl)},
		{"renewal superseded by later epoch", VoterState{}, Record{Partition: 3, Holder: "b", Epoch: 6, Until: at(-time.Second)}, Request{3, "a", 5, true, nil}, ReasonNotHolder, time.Time{}},
		{"renewal of a released lease", VoterState{}, Record{Partition: 3, Holder: "a", Epoch: 5, Until: at(-time.Second), Released: true}, Request{3, "a", 5, true, nil}, ReasonNotHolder, time.Time{}},
		{"new lease after a release", VoterState{}, Record{Partition: 3, Holder: "a", Epoch: 5, Until: at(0), Released: true}, Request{3, "b", 6, false, nil}, "", now.Add(ttl)},
		{"renewal at a voter without the record", VoterState{}, Record{}, Request{3, "a", 5, true, nil}, "", now.Add(ttl)},
		{"new voter waits", VoterState{Since: at(0)}, Record{}, Request{3, "a", 1, false, nil}, ReasonNewVoterWait, time.Time{}},
		{"new voter waits for renewals too", VoterState{Since: at(0)}, live, Request{3, "a", 5, true, nil}, ReasonNewVoterWait, time.Time{}},
		{"new voter after one ttl", VoterState{Since: at(-ttl + time.Second)}, Record{}, Request{3, "a", 1, false, nil}, "", now.Add(ttl)},
		{"epoch zero", VoterState{}, Record{}, Request{3, "a", 0, false, nil}, ReasonInvalid, time.Time{}},
		{"no candidate", VoterState{}, Record{}, Request{3, "", 1, false, nil}, ReasonInvalid, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, d := Decide(c.v, c.rec, c.req, now, ttl)
			if c.reason != "" {
				want := c.rec
				if want == (Record{}) {
					want.Partition = c.req.Partition
				}
				if d.Granted || d.Reason != c.reason || got != want || d.Record != want {
					t.Fatalf("got %+v %+v, want refusal %q with record %+v", got, d, c.reason, want)
				}
				return
			}
			want := Record{Partition: 3, Holder: c.req.Candidate, Epoch: c.req.Epoch, Until: c.until}
			if !d.Granted || d.Reason != "" || got != want || d.Record != want {
				t.Fatalf("got %+v %+v, want grant %+v", got, d, want)
			}
		})
	}
}

func TestDecideNewVoterWait(t *testing.T) {
	v := VoterState{Since: at(10 * time.Second)}
	req := Request{Partition: 1, Candidate: "a", Epoch: 1}
	for _, c := range []struct {
		now     time.Duration
		granted bool
		wait    time.Duration
	}{
		{10 * time.Second, false, ttl},
		{10*time.Second + ttl - 1, false, 1},
		{10*time.Second + ttl, true, 0},
	} {
		if w := v.Wait(at(c.now), ttl); w != c.wait {
			t.Errorf("Wait at %s = %s, want %s", c.now, w, c.wait)
		}
		_, d := Decide(v, Record{}, req, at(c.now), ttl)
		if d.Granted != c.granted {
			t.Errorf("at %s granted=%v, want %v (%s)", c.now, d.Granted, c.granted, d.Reason)
		}
	}
}

func TestDecideNeverShortensOrLowers(t *testing.T) {
	// A clock that stepped back must not pull Until back on a renewal.
	rec := Record{Partition: 1, Holder: "a", Epoch: 2, Until: at(10 * time.Second)}
	got, d := Decide(VoterState{}, rec, Request{Partition: 1, Candidate: "a", Epoch: 2, Renew: true}, at(time.Second), ttl)
	if !d.Granted || got.Until != rec.Until {
		t.Fatalf("got %+v, want Until kept at %s", got, rec.Until)
	}
}

func TestRefusalError(t *testing.T) {
	rec := Record{Partition: 3, Holder: "a", Epoch: 5, Until: at(ttl)}
	_, d := Decide(VoterState{}, rec, Request{Partition: 3, Candidate: "b", Epoch: 6}, at(0), ttl)
	err := d.Err()
	if !errors.Is(err, ErrHeldByOther) || errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("errors.Is mismatch for %v", err)
	}
	var re *RefusedError
	if !errors.As(err, &re) || re.Record.Holder != "a" || re.Record.Epoch != 5 {
		t.Fatalf("refusal does not carry the record: %v", err)
	}
	if got, want := err.Error(), "lease refused (held-by-other): partition 3 held by a at epoch 5"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	for r, want := range map[Reason]error{
		ReasonStaleEpoch: ErrStaleEpoch, ReasonNewVoterWait: ErrNewVoterWait,
		ReasonNotHolder: ErrNotHolder, ReasonInvalid: ErrInvalid, ReasonNotRecorded: ErrNotRecorded,
	} {
		if err := (Decision{Reason: r}).Err(); !errors.Is(err, want) {
			t.Errorf("%s: %v is not %v", r, err, want)
		}
	}
}

func TestDecidePanicsOnCallerBugs(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("other partition's record", func() {
		Decide(VoterState{}, Record{Partition: 1, Holder: "a", Epoch: 1}, Request{Partition: 2, Candidate: "a", Epoch: 2}, at(0), ttl)
	})
	mustPanic("zero ttl", func() {
		Decide(VoterState{}, Record{}, Request{Partition: 2, Candidate: "a", Epoch: 2}, at(0), 0)
	})
}

func TestDecideRelease(t *testing.T) {
	rec := Record{Partition: 4, Holder: "a", Epoch: 3, Until: at(ttl)}
	now := at(time.Second)
	for _, c := range []struct {
		name    string
		rel     Release
		changed bool
	}{
		{"holder at its epoch", Release{4, "a", 3}, true},
		{"older epoch (a delayed release)", Release{4, "a", 2}, false},
		{"other node", Release{4, "b", 3}, false},
		{"other partition", Release{5, "a", 3}, false},
	} {
		got, changed := DecideRelease(rec, c.rel, now)
		if changed != c.changed {
			t.Errorf("%s: changed=%v", c.name, changed)
		}
		if !changed && got != rec {
			t.Errorf("%s: record changed without saying so: %+v", c.name, got)
		}
		if changed {
			if got.Until != now || got.Live(now) || got.Epoch != 3 {
				t.Errorf("%s: got %+v", c.name, got)
			}
			// The epoch stays: the next holder needs a higher one.
			if _, d := Decide(VoterState{}, got, Request{Partition: 4, Candidate: "b", Epoch: 3}, now, ttl); d.Reason != ReasonStaleEpoch {
				t.Errorf("after release epoch 3 again: %+v", d)
			}
			if _, d := Decide(VoterState{}, got, Request{Partition: 4, Candidate: "b", Epoch: 4}, now, ttl); !d.Granted {
				t.Errorf("after release epoch 4: %+v", d)
			}
		}
	}
}

// TestDecideRandomHistory drives one voter with random requests at random
// times and checks its two promises: the recorded epoch never decreases, and
// a new holder is granted only after the previous holder's Until.
func TestDecideRandomHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c"}
	for run := 0; run < 200; run++ {
		rec := Record{Partition: 9}
		now := at(0)
		v := VoterState{}
		if run%2 == 1 {
			v.Since = now
		}
		for step := 0; step < 200; step++ {
			now = now.Add(time.Duration(rng.Int64N(int64(ttl / 2))))
			req := Request{Partition: 9, Candidate: names[rng.IntN(len(names))], Epoch: uint64(rng.IntN(12)), Renew: rng.IntN(2) == 0}
			next, d := Decide(v, rec, req, now, ttl)
			if next.Epoch < rec.Epoch {
				t.Fatalf("epoch went from %d to %d on %+v", rec.Epoch, next.Epoch, req)
			}
			if d.Granted {
				if v.Wait(now, ttl) > 0 {
					t.Fatalf("granted during the new-voter wait")
				}
				if rec.Holder != "" && rec.Holder != req.Candidate && now.Before(rec.Until) {
					t.Fatalf("granted %s while %s holds until %s (now %s)", req.Candidate, rec.Holder, rec.Until, now)
				}
				if rec.Holder != req.Candidate && next.Epoch <= rec.Epoch {
					t.Fatalf("new holder %s at epoch %d not above %d", req.Candidate, next.Epoch, rec.Epoch)
				}
				if next.Until.Before(now.Add(ttl)) {
					t.Fatalf("grant until %s, before now+ttl", next.Until)
				}
			} else if next != rec {
				t.Fatalf("refusal changed the record: %+v -> %+v", rec, next)
			}
			rec = next
		}
	}
}

// FuzzDecide checks the voter's promises on arbitrary request sequences.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 0, 10, 2, 1, 50, 1, 1, 3, 3, 0, 200})
	f.Add([]byte{0, 1, 0, 0, 2, 255, 1, 3, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		rec := Record{Partition: 1}
		now := at(0)
		for i := 0; i+2 < len(ops); i += 3 {
			cand := string(rune('a' + ops[i]%3))
			req := Request{Partition: 1, Candidate: cand, Epoch: uint64(ops[i+1] % 8), Renew: ops[i]&4 != 0}
			now = now.Add(time.Duration(ops[i+2]) * 20 * time.Millisecond)
			next, d := Decide(VoterState{}, rec, req, now, ttl)
			if next.Epoch < rec.Epoch {
				t.Fatalf("epoch decreased")
			}
			if d.Granted && rec.Live(now) && rec.Holder != cand {
				t.Fatalf("two live holders")
			}
			if !d.Granted && next != rec {
				t.Fatalf("refusal changed the record")
			}
			rec = next
		}
	})
}

// Ended: a lease that ran out unrenewed is over at once; one released by a
// handoff gives its receiver one TTL to take it first (before, a released
// lease never counted as over, so a handoff whose receiver could not
// campaign left the partition without a master while its old master was
// UP).
func TestRecordEnded(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	const ttl = time.Second
	for _, c := range []struct {
		name string
		rec  Record
		at   time.Time
		want bool
	}{
		{"never granted", Record{}, t0, false},
		{"loaded at start (no expiry known)", Record{Holder: "a", Epoch: 3}, t0, false},
		{"live", Record{Holder: "a", Epoch: 3, Until: t0.Add(time.Millisecond)}, t0, false},
		{"ran out", Record{Holder: "a", Epoch: 3, Until: t0}, t0, true},
		{"released just now", Record{Holder: "a", Epoch: 3, Until: t0, Released: true}, t0, false},
		{"released almost a ttl ago", Record{Holder: "a", Epoch: 3, Until: t0, Released: true}, t0.Add(ttl - time.Millisecond), false},
		{"released a ttl ago, nobody took it", Record{Holder: "a", Epoch: 3, Until: t0, Released: true}, t0.Add(ttl), true},
	} {
		if got := c.rec.Ended(c.at, ttl); got != c.want {
			t.Errorf("%s: Ended = %v, want %v", c.name, got, c.want)
		}
	}
}

// A voter keeps the newest list of copies its holders renewed with, and
// keeps it across a grant to another node: the next master reads it from
// the voters that granted it. An older list, or one of a later epoch than
// the request's, is not taken.
func TestAVoterKeepsTheNewestListOfCopies(t *testing.T) {
	now := time.Unix(1000, 0)
	ttl := 10 * time.Second
	list := func(e, s uint64, copies ...string) *record.CopyList {
		return &record.CopyList{Epoch: e, Seq: s, Copies: copies}
	}
	rec := Record{Partition: 3, Holder: "a", Epoch: 5, Until: now.Add(ttl), List: list(5, 2, "a", "b")}
	for _, c := range []struct {
		name string
		req  Request
		want *record.CopyList
	}{
		{"a renewal with a newer list", Request{3, "a", 5, true, list(5, 3, "a", "c")}, list(5, 3, "a", "c")},
		{"a renewal with the same list", Request{3, "a", 5, true, list(5, 2, "a", "b")}, list(5, 2, "a", "b")},
		{"a renewal with an older list", Request{3, "a", 5, true, list(5, 1, "a", "d")}, list(5, 2, "a", "b")},
		{"a renewal without a list", Request{3, "a", 5, true, nil}, list(5, 2, "a", "b")},
		{"a list of a later epoch than the lease", Request{3, "a", 5, true, list(6, 1, "a", "d")}, list(5, 2, "a", "b")},
	} {
		next, d := Decide(VoterState{}, rec, c.req, now, ttl)
		if !d.Granted || !next.List.Same(c.want) || !d.Record.List.Same(c.want) {
			t.Errorf("%s: granted %v, kept %+v (answered %+v), want %+v", c.name, d.Granted, next.List, d.Record.List, c.want)
		}
	}
	expired := rec
	expired.Until = now.Add(-time.Second)
	next, d := Decide(VoterState{}, expired, Request{3, "b", 6, false, nil}, now, ttl)
	if !d.Granted || next.Holder != "b" || !next.List.Same(list(5, 2, "a", "b")) || !d.Record.List.Same(list(5, 2, "a", "b")) {
		t.Errorf("a grant to the next holder: %+v, %+v; want the list kept and answered", next, d)
	}
}

package lease

import (
	"strings"
	"testing"
	"time"
)

// voter is a test voter: its records and its state, deciding on the time it
// is given.
type voter struct {
	id    string
	state VoterState
	recs  map[int]Record
}

func newVoters(ids ...string) map[string]*voter {
	vs := make(map[string]*voter, len(ids))
	for _, id := range ids {
		vs[id] = &voter{id: id, recs: make(map[int]Record)}
	}
	return vs
}

func (v *voter) decide(req Request, now time.Time) Decision {
	rec, d := Decide(v.state, v.recs[req.Partition], req, now, ttl)
	v.recs[req.Partition] = rec
	return d
}

func (v *voter) release(rel Release, now time.Time) {
	if rec, ok := DecideRelease(v.recs[rel.Partition], rel, now); ok {
		v.recs[rel.Partition] = rec
	}
}

// send delivers req from h (sent at sentAt) to the named voters at now and
// hands their decisions back.
func send(h *Holder, vs map[string]*voter, req Request, sentAt, now time.Time, to ...string) {
	for _, id := range to {
		h.Observe(req.Partition, id, sentAt, vs[id].decide(req, now))
	}
}

func newHolder(t *testing.T, self string, voters ...string) *Holder {
	t.Helper()
	h, err := NewHolder(Config{Self: self, Voters: voters, TTL: ttl, DriftMargin: margin})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHolderAcquiresWithMajority(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	h := newHolder(t, "a", "v1", "v2", "v3")
	req := h.Propose(7, at(0))
	if req != (Request{Partition: 7, Candidate: "a", Epoch: 1}) {
		t.Fatalf("first proposal %+v", req)
	}
	send(h, vs, req, at(0), at(10*time.Millisecond), "v1")
	// The same grant twice is one grant.
	h.Observe(7, "v1", at(0), Decision{Granted: true, Record: vs["v1"].recs[7]})
	// A grant from a node outside the voter set does not count.
	h.Observe(7, "intruder", at(0), Decision{Granted: true, Record: vs["v1"].recs[7]})
	if h.Holds(7, at(20*time.Millisecond)) {
		t.Fatal("holds with one grant of three")
	}
	send(h, vs, req, at(0), at(10*time.Millisecond), "v2")
	if !h.Holds(7, at(20*time.Millisecond)) || h.Epoch(7) != 1 {
		t.Fatalf("does not hold after two grants of three: epoch %d", h.Epoch(7))
	}
	if got, want := h.ValidUntil(7), at(ttl-margin); got != want {
		t.Fatalf("ValidUntil %s, want sentAt+ttl-margin %s", got, want)
	}
	if h.Holds(8, at(0)) || h.Epoch(8) != 0 || !h.ValidUntil(8).IsZero() {
		t.Fatal("a partition never proposed is held")
	}
}

func TestHolderRenewal(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	h := newHolder(t, "a", "v1", "v2", "v3")
	req := h.Propose(7, at(0))
	send(h, vs, req, at(0), at(0), "v1", "v2", "v3")
	if due := h.RenewalsDue(at(500 * time.Millisecond)); len(due) != 0 {
		t.Fatalf("renewals due before ttl/3: %+v", due)
	}
	due := h.RenewalsDue(at(time.Second))
	if len(due) != 1 || due[0] != (Request{Partition: 7, Candidate: "a", Epoch: 1, Renew: true}) {
		t.Fatalf("renewals at ttl/3: %+v", due)
	}
	// While holding, Propose renews too.
	if r := h.Propose(7, at(time.Second)); !r.Renew || r.Epoch != 1 {
		t.Fatalf("Propose while holding: %+v", r)
	}
	send(h, vs, due[0], at(time.Second), at(time.Second+5*time.Millisecond), "v2", "v3")
	if got, want := h.ValidUntil(7), at(time.Second+ttl-margin); got != want {
		t.Fatalf("ValidUntil after renewal %s, want %s", got, want)
	}
	if got := vs["v2"].recs[7].Until; got != at(time.Second+5*time.Millisecond+ttl) {
		t.Fatalf("voter Until after renewal %s", got)
	}
	// A renewal that reaches only a minority does not move the deadline.
	due = h.RenewalsDue(at(2 * time.Second))
	send(h, vs, due[0], at(2*time.Second), at(2*time.Second), "v1")
	if got, want := h.ValidUntil(7), at(time.Second+ttl-margin); got != want {
		t.Fatalf("ValidUntil moved by a minority: %s, want %s", got, want)
	}
}

func TestHolderExpiryThenNextEpoch(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	a := newHolder(t, "a", "v1", "v2", "v3")
	b := newHolder(t, "b", "v1", "v2", "v3")
	ra := a.Propose(7, at(0))
	send(a, vs, ra, at(0), at(0), "v1", "v2", "v3")

	// b tries while a's lease is live: refused with the record.
	rb := b.Propose(7, at(time.Second))
	send(b, vs, rb, at(time.Second), at(time.Second), "v1", "v2", "v3")
	if b.Holds(7, at(time.Second)) {
		t.Fatal("b holds while a's lease is live")
	}
	if e, who := b.Learned(7); e != 1 || who != "a" {
		t.Fatalf("b learned epoch %d holder %q, want 1 a", e, who)
	}

	// a is paused and renews nothing. Once the voters' Until has passed,
	// b gets epoch 2, one above the highest it learned (1, which it also
	// lost with, so it would not reuse it anyway).
	if a.Holds(7, at(ttl-margin)) {
		t.Fatal("a holds past its deadline")
	}
	rb = b.Propose(7, at(ttl))
	if rb.Epoch != 2 || rb.Renew {
		t.Fatalf("b's retry %+v, want a new proposal at epoch 2", rb)
	}
	send(b, vs, rb, at(ttl), at(ttl), "v1", "v2", "v3")
	if !b.Holds(7, at(ttl)) || b.Epoch(7) != 2 {
		t.Fatalf("b does not hold epoch 2 after expiry")
	}

	// a wakes up and renews its old epoch: refused everywhere, and it learns.
	ra = a.Propose(7, at(ttl+time.Second))
	if !ra.Renew || ra.Epoch != 1 {
		t.Fatalf("a's renewal after a pause: %+v", ra)
	}
	for _, id := range []string{"v1", "v2", "v3"} {
		d := vs[id].decide(ra, at(ttl+time.Second))
		if d.Granted || d.Reason != ReasonHeldByOther {
			t.Fatalf("%s: %+v", id, d)
		}
		a.Observe(7, id, at(ttl+time.Second), d)
	}
	if e, who := a.Learned(7); e != 2 || who != "b" {
		t.Fatalf("a learned %d %q", e, who)
	}
	if r := a.Propose(7, at(ttl+2*time.Second)); r.Renew || r.Epoch != 3 {
		t.Fatalf("a's next attempt %+v, want a new proposal at 3", r)
	}
	if due := a.RenewalsDue(at(ttl + 3*time.Second)); len(due) != 0 {
		t.Fatalf("a renews a superseded lapsed lease: %+v", due)
	}
}

func TestHolderDriftMargin(t *testing.T) {
	// Real time is the shared axis. The holder's clock runs slow and the
	// voters' fast, as far apart as the margin allows: rate 1∓ρ with
	// 2ρ·ttl = margin.
	rho := float64(margin) / float64(2*ttl)
	type clock struct{ rate float64 }
	local := func(c clock, real time.Duration) time.Time { return t0.Add(time.Duration(float64(real) * c.rate)) }
	realOf := func(c clock, tm time.Time) time.Duration { return time.Duration(float64(tm.Sub(t0)) / c.rate) }
	hc, vc := clock{1 - rho}, clock{1 + rho}

	vs := newVoters("v1", "v2", "v3")
	h := newHolder(t, "a", "v1", "v2", "v3")
	sent := 2 * time.Second // real time
	req := h.Propose(1, local(hc, sent))
	for i, id := range []string{"v1", "v2", "v3"} {
		arrive := sent + time.Duration(i)*time.Millisecond // v1 receives at once
		h.Observe(1, id, local(hc, sent), vs[id].decide(req, local(vc, arrive)))
	}
	deadline := local(hc, sent).Add(ttl - margin)
	if h.ValidUntil(1) != deadline {
		t.Fatalf("ValidUntil %s, want %s", h.ValidUntil(1), deadline)
	}
	if !h.Holds(1, deadline.Add(-1)) || h.Holds(1, deadline) {
		t.Fatal("Holds does not turn false exactly at sentAt+ttl-margin")
	}
	end := realOf(hc, deadline)
	for _, id := range []string{"v1", "v2", "v3"} {
		until := realOf(vc, vs[id].recs[1].Until)
		if end >= until {
			t.Errorf("holder's deadline at real %s is not before %s's Until at real %s", end, id, until)
		}
	}
	// Without the margin the same clocks would overlap: the check can fail.
	if noMargin := realOf(hc, local(hc, sent).Add(ttl)); noMargin <= realOf(vc, vs["v1"].recs[1].Until) {
		t.Fatalf("test clocks too tame: without a margin the holder would end at %s, before %s", noMargin, realOf(vc, vs["v1"].recs[1].Until))
	}
}

func TestHolderIgnoresGrantsOfOldAttempts(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	h := newHolder(t, "a", "v1", "v2", "v3")
	old := h.Propose(7, at(0))
	// The replies are slow; the driver retries with a new proposal.
	cur := h.Propose(7, at(time.Second))
	if cur.Epoch != old.Epoch+1 {
		t.Fatalf("retry epoch %d, want %d", cur.Epoch, old.Epoch+1)
	}
	// The old attempt's grants arrive: they do not count.
	send(h, vs, old, at(0), at(time.Second), "v1", "v2")
	if h.Holds(7, at(time.Second)) {
		t.Fatal("grants of an older attempt counted")
	}
	// A grant that names the right epoch but an older send time does not
	// count either (it could only vouch for an earlier deadline).
	h.Observe(7, "v3", at(0), Decision{Granted: true, Record: Record{Partition: 7, Holder: "a", Epoch: 2, Until: at(ttl)}})
	send(h, vs, cur, at(time.Second), at(time.Second), "v1")
	if h.Holds(7, at(time.Second)) {
		t.Fatal("a grant with a stale sentAt counted toward the current attempt")
	}
	send(h, vs, cur, at(time.Second), at(time.Second), "v2")
	if !h.Holds(7, at(time.Second)) || h.Epoch(7) != 2 || h.ValidUntil(7) != at(time.Second+ttl-margin) {
		t.Fatalf("current attempt: holds=%v epoch=%d until=%s", h.Holds(7, at(time.Second)), h.Epoch(7), h.ValidUntil(7))
	}

	// Same for renewals: a renewal at s1 superseded by one at s2.
	r1 := h.RenewalsDue(at(2 * time.Second))[0]
	r2 := h.RenewalsDue(at(3 * time.Second))[0]
	send(h, vs, r1, at(2*time.Second), at(3*time.Second), "v1", "v2", "v3")
	if h.ValidUntil(7) != at(time.Second+ttl-margin) {
		t.Fatalf("an old renewal moved the deadline to %s", h.ValidUntil(7))
	}
	send(h, vs, r2, at(3*time.Second), at(3*time.Second), "v1", "v2")
	if h.ValidUntil(7) != at(3*time.Second+ttl-margin) {
		t.Fatalf("the current renewal: deadline %s", h.ValidUntil(7))
	}
}

func TestHolderNeverReusesAnEpoch(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	a := newHolder(t, "a", "v1", "v2", "v3")
	b := newHolder(t, "b", "v1", "v2", "v3")
	a.Learn(7, 4)
	b.Learn(7, 4)
	ra, rb := a.Propose(7, at(0)), b.Propose(7, at(0))
	if ra.Epoch != 5 || rb.Epoch != 5 {
		t.Fatalf("proposals %d %d, want 5 5", ra.Epoch, rb.Epoch)
	}
	send(a, vs, ra, at(0), at(0), "v1", "v2")
	send(b, vs, rb, at(0), at(0), "v3") // b's other messages are lost
	if !a.Holds(7, at(0)) || b.Holds(7, at(0)) {
		t.Fatal("a should hold, b not")
	}
	// b learned nothing new (its only answer was its own grant at 5), yet
	// its retry is not 5 again.
	if r := b.Propose(7, at(time.Second)); r.Epoch != 6 {
		t.Fatalf("b retried at %d, want 6", r.Epoch)
	}
	// b's losses keep climbing however often it retries.
	seen := map[uint64]bool{5: true, 6: true}
	for i := 2; i < 20; i++ {
		r := b.Propose(7, at(time.Duration(i)*time.Second))
		if seen[r.Epoch] || r.Renew {
			t.Fatalf("epoch %d proposed twice", r.Epoch)
		}
		seen[r.Epoch] = true
	}
}

func TestHolderRenewsLapsedLease(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	h := newHolder(t, "a", "v1", "v2", "v3")
	send(h, vs, h.Propose(7, at(0)), at(0), at(0), "v1", "v2", "v3")
	// Every renewal is lost for a while; the lease lapses on both sides.
	later := at(2 * ttl)
	if h.Holds(7, later) {
		t.Fatal("holds past its deadline")
	}
	due := h.RenewalsDue(later)
	if len(due) != 1 || !due[0].Renew || due[0].Epoch != 1 {
		t.Fatalf("renewals of a lapsed lease nobody replaced: %+v", due)
	}
	send(h, vs, due[0], later, later, "v1", "v3")
	if !h.Holds(7, later) || h.Epoch(7) != 1 || h.ValidUntil(7) != later.Add(ttl-margin) {
		t.Fatalf("lapsed renewal: holds=%v epoch=%d until=%s", h.Holds(7, later), h.Epoch(7), h.ValidUntil(7))
	}
}

func TestHolderStepDownHandsOver(t *testing.T) {
	vs := newVoters("v1", "v2", "v3")
	a := newHolder(t, "a", "v1", "v2", "v3")
	b := newHolder(t, "b", "v1", "v2", "v3")
	send(a, vs, a.Propose(7, at(0)), at(0), at(0), "v1", "v2", "v3")
	rel, ok := a.StepDown(7)
	if !ok || rel != (Release{Partition: 7, Holder: "a", Epoch: 1}) {
		t.Fatalf("StepDown: %+v %v", rel, ok)
	}
	if a.Holds(7, at(0)) || a.Epoch(7) != 0 || len(a.RenewalsDue(at(time.Hour))) != 0 {
		t.Fatal("a still holds or renews after stepping down")
	}
	if _, ok := a.StepDown(7); ok {
		t.Fatal("second StepDown returned a release")
	}
	for _, v := range vs {
		v.release(rel, at(100*time.Millisecond))
	}
	b.Learn(7, 1)
	rb := b.Propose(7, at(100*time.Millisecond))
	send(b, vs, rb, at(100*time.Millisecond), at(100*time.Millisecond), "v1", "v2", "v3")
	if !b.Holds(7, at(100*time.Millisecond)) || b.Epoch(7) != 2 {
		t.Fatalf("b after a's release: epoch %d", b.Epoch(7))
	}
	// a never comes back at its old epoch.
	if r := a.Propose(7, at(time.Second)); r.Renew || r.Epoch <= 1 {
		t.Fatalf("a after stepping down proposes %+v", r)
	}
}

func TestHolderVoterSetChange(t *testing.T) {
	vs := newVoters("v1", "v2", "v3", "v4")
	h := newHolder(t, "a", "v1", "v2", "v3")
	req := h.Propose(7, at(0))
	// The set grows while the attempt is in flight; the attempt still needs
	// a majority of the set it went to, and v4's answer does not count.
	if err := h.SetVoters([]string{"v1", "v2", "v3", "v4"}); err != nil {
		t.Fatal(err)
	}
	send(h, vs, req, at(0), at(0), "v1", "v4")
	if h.Holds(7, at(0)) {
		t.Fatal("a voter outside the attempt's set counted")
	}
	send(h, vs, req, at(0), at(0), "v2")
	if !h.Holds(7, at(0)) {
		t.Fatal("majority of the attempt's set did not count")
	}
	// Renewals now go to the four; v4 has no record of a, yet grants the
	// renewal as a new lease, so a keeps its lease with three of four.
	due := h.RenewalsDue(at(time.Second))
	send(h, vs, due[0], at(time.Second), at(time.Second), "v1", "v2", "v4")
	if h.ValidUntil(7) != at(time.Second+ttl-margin) {
		t.Fatalf("renewal across the new set: until %s", h.ValidUntil(7))
	}
	if err := h.SetVoters([]string{"v1", "v1"}); err == nil {
		t.Fatal("duplicate voters accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Self: "a", Voters: []string{"v1"}, TTL: ttl}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	h, _ := NewHolder(ok)
	if c := h.Config(); c.DriftMargin != ttl/10 || c.RenewEvery != ttl/3 {
		t.Fatalf("defaults filled: %+v", c)
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Voters: []string{"v1"}, TTL: ttl}, "Self"},
		{Config{Self: "a", Voters: []string{"v1"}}, "TTL"},
		{Config{Self: "a", Voters: []string{"v1"}, TTL: ttl, DriftMargin: ttl}, "DriftMargin"},
		{Config{Self: "a", Voters: []string{"v1"}, TTL: ttl, DriftMargin: -1}, "DriftMargin"},
		{Config{Self: "a", Voters: []string{"v1"}, TTL: ttl, RenewEvery: ttl}, "RenewEvery"},
		{Config{Self: "a", TTL: ttl}, "voter set is empty"},
		{Config{Self: "a", Voters: []string{"v1", ""}, TTL: ttl}, "empty voter"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %s", c.cfg, err, c.want)
		}
		if _, err := NewHolder(c.cfg); err == nil {
			t.Errorf("NewHolder accepted %+v", c.cfg)
		}
	}
}

// A decision is about the partition it was asked for: one whose record
// names another partition, or a holder that is no node id, is no answer
// (neither a grant nor news of a holder).
func TestHolderIgnoresDecisionsAboutSomethingElse(t *testing.T) {
	h := newHolder(t, "a", "v1", "v2", "v3")
	req := h.Propose(7, at(0))
	other := Record{Partition: 8, Holder: "a", Epoch: req.Epoch, Until: at(ttl)}
	h.Observe(7, "v1", at(0), Decision{Granted: true, Record: other})
	h.Observe(7, "v2", at(0), Decision{Granted: true, Record: other})
	if h.Holds(7, at(time.Millisecond)) {
		t.Fatal("holds partition 7 on grants whose records are of partition 8")
	}
	h.Observe(5, "v1", at(0), Decision{Record: Record{Partition: 5, Holder: strings.Repeat("x", 10<<10), Epoch: 9}})
	if e, holder := h.Learned(5); e != 0 || holder != "" {
		t.Fatalf("learned holder %.20q... at epoch %d from a decision naming no node", holder, e)
	}
}

package lease

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The simulation runs voters and candidate nodes against one true time axis.
// Every process has its own clock: an offset and a rate within [1-ρ, 1+ρ]
// of true time. Messages are delayed at random (now and then by much longer
// than a renewal period) or dropped, nodes pause (a paused node handles
// nothing; its messages wait for it), step down, and voters may lose their
// records. Every node wants every partition all the time, so there is always
// contention. After every event, each node's Holds is evaluated on its own
// clock and turned into a span of true time; at the end no two nodes' spans
// for one partition may overlap (Invariant 1).

type simClock struct {
	off  time.Duration
	rate float64
}

// at is the clock's reading at true time T.
func (c simClock) at(T time.Duration) time.Time {
	return t0.Add(c.off + time.Duration(float64(T)*c.rate))
}

// trueOf is the true time at which the clock reads tm.
func (c simClock) trueOf(tm time.Time) time.Duration {
	return time.Duration(float64(tm.Sub(t0)-c.off) / c.rate)
}

type simConfig struct {
	seed     uint64
	voters   int
	nodes    int
	parts    int
	drift    float64       // ρ
	margin   time.Duration // the holders' DriftMargin
	wipes    bool          // voters may lose their records
	duration time.Duration // true time simulated
}

type span struct {
	start, end time.Duration
	epoch      uint64
}

type tenure struct {
	at        time.Duration
	partition int
	node      string
	epoch     uint64
}

type simVoter struct {
	id    string
	clk   simClock
	state VoterState
	recs  map[int]Record
}

type simNode struct {
	id          string
	clk         simClock
	h           *Holder
	pausedUntil time.Duration
	nextTry     map[int]time.Duration
	spans       map[int][]span
	lastEpoch   map[int]uint64
}

type simEvent struct {
	at  time.Duration
	seq int
	fn  func()
}

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	cfg        simConfig
	rng        *rand.Rand
	now        time.Duration
	q          eventQueue
	seq        int
	voters     []*simVoter
	nodes      []*simNode
	tenures    []tenure
	violations []string
	stats      struct{ events, grants, refusals, drops, pauses, stepdowns, wipes int }
}

func (s *sim) after(d time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.q, simEvent{at: s.now + d, seq: s.seq, fn: fn})
}

func (s *sim) clock() simClock {
	rate := 1 + s.cfg.drift*(2*s.rng.Float64()-1)
	switch s.rng.IntN(4) { // the extremes are the interesting cases
	case 0:
		rate = 1 - s.cfg.drift
	case 1:
		rate = 1 + s.cfg.drift
	}
	return simClock{off: time.Duration(s.rng.Int64N(int64(2*time.Hour))) - time.Hour, rate: rate}
}

// delay is a message's transit time, or false if the message is lost.
func (s *sim) delay() (time.Duration, bool) {
	if s.rng.Float64() < 0.1 {
		s.stats.drops++
		return 0, false
	}
	if s.rng.Float64() < 0.05 {
		return time.Duration(s.rng.Int64N(int64(2 * time.Second))), true
	}
	return time.Millisecond + time.Duration(s.rng.Int64N(int64(150*time.Millisecond))), true
}

func runSim(t *testing.T, cfg simConfig) *sim {
	t.Helper()
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 0x5eed))}
	var ids []string
	for i := 1; i <= cfg.voters; i++ {
		v := &simVoter{id: fmt.Sprintf("v%d", i), clk: s.clock(), recs: map[int]Record{}}
		v.state.Since = v.clk.at(0) // a fresh cluster: every voter starts empty
		s.voters = append(s.voters, v)
		ids = append(ids, v.id)
	}
	for i := 1; i <= cfg.nodes; i++ {
		n := &simNode{id: fmt.Sprintf("n%d", i), clk: s.clock(),
			nextTry: map[int]time.Duration{}, spans: map[int][]span{}, lastEpoch: map[int]uint64{}}
		h, err := NewHolder(Config{Self: n.id, Voters: ids, TTL: ttl, DriftMargin: cfg.margin})
		if err != nil {
			t.Fatal(err)
		}
		n.h = h
		s.nodes = append(s.nodes, n)
		s.after(time.Duration(s.rng.Int64N(int64(time.Second))), func() { s.tick(n) })
	}
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(simEvent)
		if e.at > cfg.duration {
			break
		}
		s.now = e.at
		e.fn()
		s.stats.events++
		s.observe()
	}
	s.checkSpans()
	if !cfg.wipes {
		s.checkTenures()
	}
	return s
}

func (s *sim) tick(n *simNode) {
	if s.now < n.pausedUntil {
		s.after(n.pausedUntil-s.now, func() { s.tick(n) })
		return
	}
	now := n.clk.at(s.now)
	defer s.after(50*time.Millisecond+time.Duration(s.rng.Int64N(int64(250*time.Millisecond))), func() { s.tick(n) })
	if s.rng.Float64() < 0.01 {
		n.pausedUntil = s.now + time.Duration(s.rng.Int64N(int64(2*ttl)))
		s.stats.pauses++
		return
	}
	for p := 0; p < s.cfg.parts; p++ {
		if n.h.Holds(p, now) && s.rng.Float64() < 0.003 {
			rel, _ := n.h.StepDown(p)
			s.stats.stepdowns++
			if sp := n.spans[p]; len(sp) > 0 && sp[len(sp)-1].end > s.now {
				sp[len(sp)-1].end = s.now
			}
			for _, v := range s.voters {
				if d, ok := s.delay(); ok {
					s.after(d, func() {
						if rec, ok := DecideRelease(v.recs[rel.Partition], rel, v.clk.at(s.now)); ok {
							v.recs[rel.Partition] = rec
						}
					})
				}
			}
		}
	}
	reqs := n.h.RenewalsDue(now)
	for p := 0; p < s.cfg.parts; p++ {
		if n.h.Holds(p, now) || slices.ContainsFunc(reqs, func(r Request) bool { return r.Partition == p }) {
			continue
		}
		if s.now >= n.nextTry[p] && s.rng.Float64() < 0.5 {
			reqs = append(reqs, n.h.Propose(p, now))
			n.nextTry[p] = s.now + ttl/6 + time.Duration(s.rng.Int64N(int64(ttl/2)))
		}
	}
	if len(reqs) == 0 {
		return
	}
	for _, v := range s.voters {
		s.sendBatch(n, v, reqs, now)
	}
}

// sendBatch carries one batch of requests from n to v and the decisions back.
func (s *sim) sendBatch(n *simNode, v *simVoter, reqs []Request, sentAt time.Time) {
	d, ok := s.delay()
	if !ok {
		return
	}
	s.after(d, func() {
		vnow := v.clk.at(s.now)
		if s.cfg.wipes && s.rng.Float64() < 0.0005 {
			v.recs = map[int]Record{}
			v.state.Since = vnow
			s.stats.wipes++
		}
		ds := make([]Decision, len(reqs))
		for i, req := range reqs {
			rec, dec := Decide(v.state, v.recs[req.Partition], req, vnow, ttl)
			v.recs[req.Partition] = rec
			ds[i] = dec
			if dec.Granted {
				s.stats.grants++
			} else {
				s.stats.refusals++
			}
		}
		back, ok := s.delay()
		if !ok {
			return
		}
		s.after(back, func() { s.receive(n, v.id, reqs, sentAt, ds) })
	})
}

func (s *sim) receive(n *simNode, voter string, reqs []Request, sentAt time.Time, ds []Decision) {
	if s.now < n.pausedUntil {
		s.after(n.pausedUntil-s.now, func() { s.receive(n, voter, reqs, sentAt, ds) })
		return
	}
	for i, d := range ds {
		n.h.Observe(reqs[i].Partition, voter, sentAt, d)
	}
}

// observe turns each node's current Holds into spans of true time and
// checks that at this instant at most one node holds each partition.
func (s *sim) observe() {
	for p := 0; p < s.cfg.parts; p++ {
		var holders []string
		for _, n := range s.nodes {
			if !n.h.Holds(p, n.clk.at(s.now)) {
				continue
			}
			holders = append(holders, n.id)
			end := n.clk.trueOf(n.h.ValidUntil(p))
			e := n.h.Epoch(p)
			sp := n.spans[p]
			if k := len(sp); k > 0 && sp[k-1].end >= s.now && sp[k-1].epoch == e {
				sp[k-1].end = max(sp[k-1].end, end)
			} else {
				n.spans[p] = append(sp, span{start: s.now, end: end, epoch: e})
			}
			if e != n.lastEpoch[p] {
				n.lastEpoch[p] = e
				s.tenures = append(s.tenures, tenure{at: s.now, partition: p, node: n.id, epoch: e})
			}
		}
		if len(holders) > 1 {
			s.violations = append(s.violations, fmt.Sprintf("at %s partition %d held by %v", s.now, p, holders))
		}
	}
}

// checkSpans is Invariant 1 between events: no two nodes' spans overlap.
func (s *sim) checkSpans() {
	for p := 0; p < s.cfg.parts; p++ {
		for i, a := range s.nodes {
			for _, b := range s.nodes[i+1:] {
				for _, x := range a.spans[p] {
					for _, y := range b.spans[p] {
						if x.start < y.end && y.start < x.end {
							s.violations = append(s.violations, fmt.Sprintf(
								"partition %d: %s held epoch %d over [%s, %s) and %s epoch %d over [%s, %s)",
								p, a.id, x.epoch, x.start, x.end, b.id, y.epoch, y.start, y.end))
						}
					}
				}
			}
		}
	}
}

// checkTenures is the fencing property: each new tenure of a partition, in
// the order they began, has a higher epoch than every earlier one.
func (s *sim) checkTenures() {
	last := map[int]uint64{}
	for _, tn := range s.tenures {
		if tn.epoch <= last[tn.partition] {
			s.violations = append(s.violations, fmt.Sprintf("at %s %s began a tenure of partition %d at epoch %d, not above %d",
				tn.at, tn.node, tn.partition, tn.epoch, last[tn.partition]))
		}
		last[tn.partition] = max(last[tn.partition], tn.epoch)
	}
}

func TestSimulatedHistoryInvariant1(t *testing.T) {
	seeds := 48
	if testing.Short() {
		seeds = 8
	}
	for seed := 1; seed <= seeds; seed++ {
		cfg := simConfig{
			seed:     uint64(seed),
			voters:   3 + 2*(seed%2),
			nodes:    3,
			parts:    1,
			drift:    0.04, // 2ρ·ttl = 240ms, inside the 300ms margin
			margin:   margin,
			wipes:    seed%3 == 0,
			duration: 10 * time.Minute,
		}
		if seed%4 == 0 {
			cfg.parts = 2
		}
		s := runSim(t, cfg)
		if len(s.violations) > 0 {
			t.Errorf("seed %d (%d voters, wipes %v): %d violations, first: %s", seed, cfg.voters, cfg.wipes, len(s.violations), s.violations[0])
		}
		if len(s.tenures) < 10 {
			t.Errorf("seed %d: only %d tenures: the history exercises too little", seed, len(s.tenures))
		}
		t.Logf("seed %d: %d voters, %d events, %d tenures, %d grants, %d refusals, %d drops, %d pauses, %d step-downs, %d wipes",
			seed, cfg.voters, s.stats.events, len(s.tenures), s.stats.grants, s.stats.refusals, s.stats.drops, s.stats.pauses, s.stats.stepdowns, s.stats.wipes)
	}
}

// TestSimulationCatchesTooSmallAMargin shows the checker can fail: with
// clocks drifting apart faster than the margin covers, some history has two
// holders at once.
func TestSimulationCatchesTooSmallAMargin(t *testing.T) {
	found := 0
	for seed := 1; seed <= 20; seed++ {
		s := runSim(t, simConfig{seed: uint64(seed), voters: 3, nodes: 3, parts: 1, drift: 0.2, margin: margin, duration: 5 * time.Minute})
		if len(s.violations) > 0 {
			found++
			if found == 1 {
				t.Logf("seed %d: %s", seed, s.violations[0])
			}
		}
	}
	t.Logf("%d of 20 histories broke Invariant 1", found)
	if found == 0 {
		t.Fatal("no violation found with drift far beyond the margin: the checker is blind")
	}
}

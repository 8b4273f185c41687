package lease

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// scenario runs voters and holders on one shared manual clock and writes a
// readable trace of every message and decision, compared with a golden
// string.
type scenario struct {
	t      *testing.T
	ids    []string
	voters map[string]*voter
	nodes  map[string]*Holder
	now    time.Duration
	b      strings.Builder
}

func newScenario(t *testing.T, voterIDs []string, nodes ...string) *scenario {
	s := &scenario{t: t, ids: voterIDs, voters: newVoters(voterIDs...), nodes: map[string]*Holder{}}
	for _, n := range nodes {
		s.nodes[n] = newHolder(t, n, voterIDs...)
	}
	return s
}

func (s *scenario) logf(format string, args ...any) {
	fmt.Fprintf(&s.b, "%-6s ", s.now)
	fmt.Fprintf(&s.b, format, args...)
	s.b.WriteByte('\n')
}

func (s *scenario) at(d time.Duration) { s.now = d }

// send delivers reqs from node to the voters not in lost, logging each step.
func (s *scenario) send(node string, reqs []Request, lost ...string) {
	h := s.nodes[node]
	sentAt := at(s.now)
	for _, req := range reqs {
		kind := "propose"
		if req.Renew {
			kind = "renew"
		}
		s.logf("%s %s p%d epoch %d", node, kind, req.Partition, req.Epoch)
		for _, id := range s.ids {
			if slices.Contains(lost, id) {
				s.logf("  %s: lost", id)
				continue
			}
			d := s.voters[id].decide(req, at(s.now))
			if d.Granted {
				s.logf("  %s: granted, until %s", id, d.Record.Until.Sub(t0))
			} else {
				s.logf("  %s: refused %s, record %s@%d until %s", id, d.Reason, d.Record.Holder, d.Record.Epoch, d.Record.Until.Sub(t0))
			}
			h.Observe(req.Partition, id, sentAt, d)
		}
		s.status(node, req.Partition)
	}
}

func (s *scenario) propose(node string, p int, lost ...string) {
	s.send(node, []Request{s.nodes[node].Propose(p, at(s.now))}, lost...)
}

func (s *scenario) renew(node string, lost ...string) {
	due := s.nodes[node].RenewalsDue(at(s.now))
	if len(due) == 0 {
		s.logf("%s: no renewal due", node)
	}
	s.send(node, due, lost...)
}

func (s *scenario) stepDown(node string, p int) {
	rel, ok := s.nodes[node].StepDown(p)
	if !ok {
		s.logf("%s step down p%d: nothing held", node, p)
		return
	}
	s.logf("%s steps down p%d epoch %d", node, p, rel.Epoch)
	for _, id := range s.ids {
		s.voters[id].release(rel, at(s.now))
	}
	s.status(node, p)
}

func (s *scenario) status(node string, p int) {
	h := s.nodes[node]
	e, who := h.Learned(p)
	if h.Holds(p, at(s.now)) {
		s.logf("  => %s holds p%d epoch %d, valid until %s", node, p, h.Epoch(p), h.ValidUntil(p).Sub(t0))
	} else {
		s.logf("  => %s does not hold p%d (highest epoch seen %d, holder %q)", node, p, e, who)
	}
}

func (s *scenario) check(want string) {
	s.t.Helper()
	got := s.b.String()
	if got != want {
		s.t.Errorf("trace differs.\n--- got:\n%s--- want:\n%s", got, want)
	}
}

// TestScenarioHandoff: a holds partition 7; b, the new preferred master,
// asks too early and is refused with a's record; a steps down and b takes
// the lease at once with a higher epoch (3: never the 2 it lost with).
func TestScenarioHandoff(t *testing.T) {
	s := newScenario(t, []string{"v1", "v2", "v3"}, "a", "b")
	s.propose("a", 7)
	s.at(time.Second)
	s.renew("a", "v3")
	s.at(1500 * time.Millisecond)
	s.nodes["b"].Learn(7, 1) // from the partition table
	s.propose("b", 7)
	s.at(1600 * time.Millisecond)
	s.stepDown("a", 7)
	s.propose("b", 7)
	s.status("a", 7)
	s.check(`0s     a propose p7 epoch 1
0s       v1: granted, until 3s
0s       v2: granted, until 3s
0s       v3: granted, until 3s
0s       => a holds p7 epoch 1, valid until 2.7s
1s     a renew p7 epoch 1
1s       v1: granted, until 4s
1s       v2: granted, until 4s
1s       v3: lost
1s       => a holds p7 epoch 1, valid until 3.7s
1.5s   b propose p7 epoch 2
1.5s     v1: refused held-by-other, record a@1 until 4s
1.5s     v2: refused held-by-other, record a@1 until 4s
1.5s     v3: refused held-by-other, record a@1 until 3s
1.5s     => b does not hold p7 (highest epoch seen 1, holder "a")
1.6s   a steps down p7 epoch 1
1.6s     => a does not hold p7 (highest epoch seen 1, holder "a")
1.6s   b propose p7 epoch 3
1.6s     v1: granted, until 4.6s
1.6s     v2: granted, until 4.6s
1.6s     v3: granted, until 4.6s
1.6s     => b holds p7 epoch 3, valid until 4.3s
1.6s     => a does not hold p7 (highest epoch seen 1, holder "a")
`)
}

// TestScenarioFailover: a's renewal reaches only a minority, so a stops at
// its own deadline, before any voter's Until; b (which knew no epoch and
// so first proposes 1) is refused until a majority's records expire, then
// takes epoch 2; a, back from a pause, renews its old epoch, is granted only
// by the voter that still records it (no majority: it does not hold),
// learns b's epoch and stops renewing. That stale grant keeps v1 from b
// until it runs out, which costs b nothing while v2 and v3 grant.
func TestScenarioFailover(t *testing.T) {
	s := newScenario(t, []string{"v1", "v2", "v3"}, "a", "b")
	s.propose("a", 7)
	s.at(time.Second)
	s.renew("a", "v2", "v3")
	s.at(2700 * time.Millisecond)
	s.status("a", 7)
	s.at(2800 * time.Millisecond)
	s.propose("b", 7)
	s.at(3 * time.Second)
	s.propose("b", 7)
	s.at(3500 * time.Millisecond)
	s.renew("a")
	s.at(5 * time.Second)
	s.renew("a")
	s.renew("b")
	s.check(`0s     a propose p7 epoch 1
0s       v1: granted, until 3s
0s       v2: granted, until 3s
0s       v3: granted, until 3s
0s       => a holds p7 epoch 1, valid until 2.7s
1s     a renew p7 epoch 1
1s       v1: granted, until 4s
1s       v2: lost
1s       v3: lost
1s       => a holds p7 epoch 1, valid until 2.7s
2.7s     => a does not hold p7 (highest epoch seen 1, holder "a")
2.8s   b propose p7 epoch 1
2.8s     v1: refused held-by-other, record a@1 until 4s
2.8s     v2: refused held-by-other, record a@1 until 3s
2.8s     v3: refused held-by-other, record a@1 until 3s
2.8s     => b does not hold p7 (highest epoch seen 1, holder "a")
3s     b propose p7 epoch 2
3s       v1: refused held-by-other, record a@1 until 4s
3s       v2: granted, until 6s
3s       v3: granted, until 6s
3s       => b holds p7 epoch 2, valid until 5.7s
3.5s   a renew p7 epoch 1
3.5s     v1: granted, until 6.5s
3.5s     v2: refused held-by-other, record b@2 until 6s
3.5s     v3: refused held-by-other, record b@2 until 6s
3.5s     => a does not hold p7 (highest epoch seen 2, holder "b")
5s     a: no renewal due
5s     b renew p7 epoch 2
5s       v1: refused held-by-other, record a@1 until 6.5s
5s       v2: granted, until 8s
5s       v3: granted, until 8s
5s       => b holds p7 epoch 2, valid until 7.7s
`)
}

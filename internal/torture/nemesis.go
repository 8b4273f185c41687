package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Fault kinds.
const (
	KillMaster  = "kill-master"  // kill -9 of the registers' master, restarted after the hold
	KillReplica = "kill-replica" // kill -9 of one of its replicas, restarted after the hold
	KillAll     = "kill-all"     // kill -9 of every node at once, all restarted after the hold
	PauseMaster = "pause-master" // SIGSTOP of the registers' master for longer than LEASE_TTL, then SIGCONT
	// Link cuts (the netns network only; the clients reach every node).
	IsolateMaster  = "isolate-master"  // the registers' master cut from every other node for longer than LEASE_TTL
	IsolateReplica = "isolate-replica" // one of its replicas cut from every other node
	Bridge         = "bridge"          // two sides that do not reach each other, and one node that reaches both
)

// FaultKinds are every kind the nemesis injects on any network.
var FaultKinds = []string{KillMaster, KillReplica, KillAll, PauseMaster}

// LinkFaultKinds are the kinds it injects when the network can cut links.
var LinkFaultKinds = []string{IsolateMaster, IsolateReplica, Bridge}

// leaseTTL is the nodes' LEASE_TTL (the default): a pause outlasts it.
const leaseTTL = 3 * time.Second

// Step is one planned fault: hold it that long, then heal and, once the
// cluster is whole again, wait Quiet before the next. Pick chooses among
// candidates (which replica).
type Step struct {
	Kind  string
	Hold  time.Duration
	Quiet time.Duration
	Pick  int
}

func (s Step) String() string {
	return fmt.Sprintf("%s for %s, then %s quiet", s.Kind, s.Hold, s.Quiet)
}

// recoveryGuess is what the schedule budgets for the cluster to be whole
// again after a fault (the run waits for it, however long it takes).
const recoveryGuess = 5 * time.Second

// Schedule is the faults of kinds planned for a run of about duration:
// every kind once in a seeded order, again and again, and at least one of
// each. The same seed and kinds give the same schedule; the run starts no
// fault once duration has passed, except to have injected one of each
// kind.
func Schedule(seed uint64, duration time.Duration, kinds []string) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x7047))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	var out []Step
	planned := 5 * time.Second // the workload runs alone first
	for planned < duration || len(out) == 0 {
		kinds := append([]string(nil), kinds...)
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			s := Step{Kind: k, Quiet: ms(1000, 3000), Pick: rng.IntN(1 << 16)}
			switch k {
			case PauseMaster:
				s.Hold = leaseTTL + ms(500, 2500)
			case IsolateMaster, Bridge:
				s.Hold = leaseTTL + ms(1000, 3000) // another node's lease round, and gossip's verdict
			case IsolateReplica:
				s.Hold = ms(1000, 4000)
			case KillAll:
				s.Hold = ms(300, 2000)
			default:
				s.Hold = ms(500, 3000)
			}
			out = append(out, s)
			planned += s.Hold + s.Quiet + recoveryGuess
			if planned >= duration && len(out) >= len(kinds) {
				break
			}
		}
	}
	return out
}

// FormatSchedule prints a schedule one step a line.
func FormatSchedule(steps []Step) string {
	var b strings.Builder
	for i, s := range steps {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, s)
	}
	return b.String()
}

// registersMaster is the registers' placement all running nodes agree on.
func (r *runner) agreedPlacement(ctx context.Context) (master string, responsible []string, epoch uint64, why string) {
	first := true
	for _, n := range r.c.Nodes {
		if !n.Running() {
			continue
		}
		p, err := n.Placement(ctx, r.c.Token, r.cfg.registerUser())
		if err != nil {
			return "", nil, 0, err.Error()
		}
		if first {
			master, responsible, epoch, first = p.Master, p.Responsible, p.Epoch, false
		} else if p.Master != master || p.Epoch != epoch {
			return "", nil, 0, fmt.Sprintf("nodes disagree: %s at %d, and %s names %s at %d", master, epoch, n.ID, p.Master, p.Epoch)
		}
	}
	if first {
		return "", nil, 0, "no node is running"
	}
	if _, err := r.c.Node(master); err != nil {
		return "", nil, 0, "the master named is " + master
	}
	return master, responsible, epoch, ""
}

// inject runs one step: the fault, the hold, the heal, and the wait for a
// whole cluster whose writes flow again.
func (r *runner) inject(ctx context.Context, s Step) (Fault, error) {
	master, responsible, _, why := r.agreedPlacement(ctx)
	if why != "" {
		return Fault{}, fmt.Errorf("no agreed master of the registers to aim at: %s", why)
	}
	f := Fault{Kind: s.Kind}
	var victims []*Node
	var cuts [][2]string
	switch s.Kind {
	case KillMaster, PauseMaster:
		f.Target = master
	case KillReplica:
		var replicas []string
		for _, id := range responsible {
			if id != master {
				replicas = append(replicas, id)
			}
		}
		if len(replicas) == 0 {
			return Fault{}, fmt.Errorf("the registers' partition has no replica to kill (responsible: %v)", responsible)
		}
		f.Target = replicas[s.Pick%len(replicas)]
	case KillAll:
		f.Target = "every node"
		victims = r.c.Nodes
	case IsolateMaster, IsolateReplica, Bridge:
		var ids []string
		for _, n := range r.c.Nodes {
			ids = append(ids, n.ID)
		}
		var err error
		if f.Target, cuts, err = cutPlan(s.Kind, s.Pick, ids, master, responsible); err != nil {
			return Fault{}, err
		}
	}
	if victims == nil && cuts == nil {
		n, err := r.c.Node(f.Target)
		if err != nil {
			return Fault{}, err
		}
		victims = []*Node{n}
	}
	f.Start = r.w.Since()
	r.w.Mark(fmt.Sprintf("%s: %s", s.Kind, f.Target))
	r.logf("fault %s of %s for %s", s.Kind, f.Target, s.Hold)
	if err := r.c.Cut(cuts); err != nil {
		return f, err
	}
	for _, n := range victims {
		if s.Kind == PauseMaster {
			if err := n.Pause(); err != nil {
				return f, err
			}
		} else {
			n.Kill()
		}
	}
	select {
	case <-ctx.Done():
		return f, ctx.Err()
	case <-time.After(s.Hold):
	}
	if err := r.c.Heal(cuts); err != nil {
		return f, err
	}
	for _, n := range victims {
		var err error
		if s.Kind == PauseMaster {
			err = n.Resume()
		} else {
			err = n.Start()
		}
		if err != nil {
			return f, err
		}
	}
	f.Healed = r.w.Since()
	r.w.Mark(fmt.Sprintf("healed %s of %s", s.Kind, f.Target))
	if err := r.awaitWhole(ctx); err != nil {
		return f, fmt.Errorf("after %s of %s: %w", s.Kind, f.Target, err)
	}
	f.Recovered = r.w.Since()
	r.logf("healed %s of %s; whole again %s after the heal", s.Kind, f.Target, (f.Recovered - f.Healed).Round(time.Millisecond))
	return f, nil
}

// awaitWhole waits until every node is UP everywhere, the registers have
// an agreed master, and writes of every kind are acknowledged again.
func (r *runner) awaitWhole(ctx context.Context) error {
	if _, err := r.c.WaitUp(ctx, 90*time.Second); err != nil {
		return err
	}
	if _, err := await(ctx, 60*time.Second, "an agreed master of the registers", func() (bool, string) {
		_, _, _, why := r.agreedPlacement(ctx)
		return why == "", why
	}); err != nil {
		return err
	}
	from := r.w.Acked()
	_, err := await(ctx, 60*time.Second, "writes acknowledged again", func() (bool, string) {
		n := r.w.Acked() - from
		return n >= 20, fmt.Sprintf("%d of 20 writes acknowledged", n)
	})
	return err
}

package torture

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Fault kinds.
const (
	KillMaster  = "kill-master"  // kill -9 of the registers' master, restarted after the hold
	KillReplica = "kill-replica" // kill -9 of one of its replicas, restarted after the hold
	KillAll     = "kill-all"     // kill -9 of every node at once, all restarted after the hold
	PauseMaster = "pause-master" // SIGSTOP of the registers' master for longer than LEASE_TTL, then SIGCONT
	AddNode     = "add-node"     // the spare node put into the peer list and started, under load
	RemoveNode  = "remove-node"  // the spare node taken out of the peer list; at the heal it has drained and is stopped
	// Link cuts (the netns network only; the clients reach every node).
	IsolateMaster  = "isolate-master"  // the registers' master cut from every other node for longer than LEASE_TTL
	IsolateReplica = "isolate-replica" // one of its replicas cut from every other node
	Bridge         = "bridge"          // two sides that do not reach each other, and one node that reaches both
	// A store's crash (runs on the mongo engine only: the embedded store
	// lives and dies with its node).
	KillStore = "kill-store" // kill -9 of the registers' master's MongoDB, restarted after the hold
)

// FaultKinds are every kind the nemesis injects on any network, on their
// own or in overlapping pairs.
var FaultKinds = []string{KillMaster, KillReplica, KillAll, PauseMaster, AddNode, RemoveNode}

// LinkFaultKinds are the kinds it injects when the network can cut links.
var LinkFaultKinds = []string{IsolateMaster, IsolateReplica, Bridge}

// StoreFaultKinds are the kinds it injects when every node has a MongoDB
// of its own.
var StoreFaultKinds = []string{KillStore}

// overlaps are the pairs of faults a schedule overlaps: the second starts
// during the first's hold and both heal together. A membership edit in a
// pair is add-node or remove-node, whichever the spare's state allows.
var overlaps = [][2]string{
	{KillReplica, AddNode},     // a node joins while a replica is down
	{PauseMaster, AddNode},     // a membership edit during a failover
	{PauseMaster, KillReplica}, // no majority for a while
	{KillMaster, PauseMaster},  // the master that takes over is paused too
	{AddNode, KillMaster},      // the master lost while copies join or leave its lists (a swap under way)
}

// linkOverlaps are the pairs a schedule with link cuts overlaps too.
var linkOverlaps = [][2]string{
	{IsolateMaster, KillReplica}, // the master cut off, and one of the others down
	{Bridge, AddNode},            // a node joins a partitioned cluster
	{IsolateReplica, KillMaster}, // the master down while a replica is cut off
}

// storeOverlaps are the pairs a schedule with store crashes overlaps too.
var storeOverlaps = [][2]string{
	{KillReplica, KillStore}, // the master's store lost while a replica is down
}

// leaseTTL is the nodes' LEASE_TTL (the default): a pause outlasts it.
const leaseTTL = 3 * time.Second

// Step is one planned fault: hold it that long, then heal and, once the
// cluster is whole again, wait Quiet before the next. Pick chooses among
// candidates (which replica). With, when set, is a second fault started
// After into the hold and healed with this one.
type Step struct {
	Kind  string
	Hold  time.Duration
	Quiet time.Duration
	Pick  int
	With  *Step
	After time.Duration
}

// Label is the step's kind, or both kinds of an overlapping step.
func (s Step) Label() string {
	if s.With != nil {
		return s.Kind + "+" + s.With.Kind
	}
	return s.Kind
}

func (s *Step) kindOrEmpty() string {
	if s == nil {
		return ""
	}
	return s.Kind
}

func (s Step) String() string {
	if s.With != nil {
		return fmt.Sprintf("%s for %s, with %s from %s in, then %s quiet", s.Kind, s.Hold, s.With.Kind, s.After, s.Quiet)
	}
	return fmt.Sprintf("%s for %s, then %s quiet", s.Kind, s.Hold, s.Quiet)
}

// Schedule is the faults of kinds planned for a run of duration: every
// kind once in a seeded order, and one overlapping pair, again and again,
// at least one of each, and enough that their holds and quiet times alone
// fill duration (the run waits after each for the cluster to be whole
// again, so it uses fewer: it starts no fault once duration has passed,
// except to have injected one of each kind). The same seed and kinds give
// the same schedule. The spare node starts out of the peer list, and the
// membership edits alternate: add-node where the spare is out,
// remove-node where it is in.
func Schedule(seed uint64, duration time.Duration, kinds []string) []Step {
	rng := rand.New(rand.NewPCG(seed, 0x7047))
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	spareIn := false
	member := func(k string) string {
		if k == AddNode || k == RemoveNode {
			if spareIn {
				k = RemoveNode
			} else {
				k = AddNode
			}
			spareIn = !spareIn
		}
		return k
	}
	hold := func(k string) time.Duration {
		switch k {
		case PauseMaster:
			return leaseTTL + ms(500, 2500)
		case IsolateMaster, Bridge:
			return leaseTTL + ms(1000, 3000) // another node's lease round, and gossip's verdict
		case IsolateReplica:
			return ms(1000, 4000)
		case KillAll:
			return ms(300, 2000)
		case KillStore:
			return ms(500, 6000) // at times past LEASE_TTL: renewals fail too
		}
		return ms(500, 3000)
	}
	pairs := overlaps
	if slices.Contains(kinds, IsolateMaster) {
		pairs = append(slices.Clip(pairs), linkOverlaps...)
	}
	if slices.Contains(kinds, KillStore) {
		pairs = append(slices.Clip(pairs), storeOverlaps...)
	}
	var out []Step
	var planned time.Duration
	for planned < duration || len(out) < len(kinds)+1 {
		kinds := append([]string(nil), kinds...)
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		pair := pairs[rng.IntN(len(pairs))]
		at := rng.IntN(len(kinds) + 1)
		kinds = append(kinds[:at], append([]string{"pair"}, kinds[at:]...)...)
		for _, k := range kinds {
			var s Step
			if k == "pair" {
				first, second := member(pair[0]), member(pair[1])
				s = Step{Kind: first, Hold: hold(first), Pick: rng.IntN(1 << 16)}
				s.After = time.Duration(rng.Int64N(int64(s.Hold) / 2)).Round(time.Millisecond)
				s.With = &Step{Kind: second, Hold: s.Hold - s.After, Pick: rng.IntN(1 << 16)}
			} else {
				k = member(k)
				s = Step{Kind: k, Hold: hold(k), Pick: rng.IntN(1 << 16)}
			}
			s.Quiet = ms(1000, 3000)
			out = append(out, s)
			planned += s.Hold + s.Quiet
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

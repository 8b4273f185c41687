package torture

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Networks a run can use.
const (
	NetLoopback = "loopback" // every node on 127.0.0.1: no link cuts
	NetNetns    = "netns"    // a network namespace per node (Network): link cuts too
	NetAuto     = "auto"     // netns when this process can make namespaces, else loopback
)

// ResolveNetwork is the network mode ("" is loopback) stands for, and
// why, for the run's output.
func ResolveNetwork(mode string) (string, string, error) {
	ok, why := netnsUsable()
	switch mode {
	case "", NetLoopback:
		return NetLoopback, "loopback: every node on 127.0.0.1, so no link-cut faults", nil
	case NetNetns:
		if !ok {
			return "", "", fmt.Errorf("--network netns: %s", why)
		}
		return NetNetns, "netns: a network namespace per node (" + why + "), so link cuts too", nil
	case NetAuto:
		if ok {
			return NetNetns, "netns (auto: " + why + "), so link cuts too", nil
		}
		return NetLoopback, "loopback (auto: " + why + "), so no link-cut faults", nil
	}
	return "", "", fmt.Errorf("--network %q: use loopback, netns or auto", mode)
}

// KindsFor is the fault kinds a run on network (resolved) injects.
func KindsFor(network string) []string {
	kinds := append([]string(nil), FaultKinds...)
	if network == NetNetns {
		kinds = append(kinds, LinkFaultKinds...)
	}
	return kinds
}

func isLinkCut(kind string) bool {
	for _, k := range LinkFaultKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// cutPlan is the links a link-cut step cuts, and how to name its target:
// isolate-master cuts the master from every other node; isolate-replica
// one of its replicas (pick chooses) from every other node; bridge cuts
// the nodes but one (the bridge, pick chooses) into two sides that do not
// reach each other, while the bridge reaches every node. The clients'
// links are never cut.
func cutPlan(kind string, pick int, nodes []string, master string, responsible []string) (string, [][2]string, error) {
	cutFrom := func(x string) [][2]string {
		var pairs [][2]string
		for _, n := range nodes {
			if n != x {
				pairs = append(pairs, [2]string{x, n})
			}
		}
		return pairs
	}
	switch kind {
	case IsolateMaster:
		return master, cutFrom(master), nil
	case IsolateReplica:
		var replicas []string
		for _, id := range responsible {
			if id != master {
				replicas = append(replicas, id)
			}
		}
		if len(replicas) == 0 {
			return "", nil, fmt.Errorf("the registers' partition has no replica to isolate (responsible: %v)", responsible)
		}
		r := replicas[pick%len(replicas)]
		return r, cutFrom(r), nil
	case Bridge:
		if len(nodes) < 3 {
			return "", nil, errors.New("a bridge needs at least 3 nodes")
		}
		bridge := nodes[pick%len(nodes)]
		var rest []string
		for _, n := range nodes {
			if n != bridge {
				rest = append(rest, n)
			}
		}
		rng := rand.New(rand.NewPCG(uint64(pick), 0xb41d))
		rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		a, b := rest[:len(rest)/2], rest[len(rest)/2:]
		var pairs [][2]string
		for _, x := range a {
			for _, y := range b {
				pairs = append(pairs, [2]string{x, y})
			}
		}
		return fmt.Sprintf("%s between %s | %s", bridge, strings.Join(a, ","), strings.Join(b, ",")), pairs, nil
	}
	return "", nil, fmt.Errorf("%s is not a link cut", kind)
}

// Cut cuts the links of pairs (none: nothing to do).
func (c *Cluster) Cut(pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	if c.Net == nil {
		return errors.New("link cuts need the namespaced network (--network netns)")
	}
	return c.Net.Cut(pairs)
}

// Heal restores the links of pairs.
func (c *Cluster) Heal(pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	if c.Net == nil {
		return errors.New("link cuts need the namespaced network (--network netns)")
	}
	return c.Net.Heal(pairs)
}

// HealLinks restores every cut link.
func (c *Cluster) HealLinks() error {
	if c.Net == nil {
		return nil
	}
	return c.Net.HealAll()
}

package testcluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/internal/torture"
)

// The fault suite's workload and checkers against an in-process cluster
// whose links are cut through the fault transport (the nodes' own
// node-to-node HTTP and gossip; clients still reach every node), on a
// seeded schedule: the registers' master cut from every other node (the
// voters), one of its replicas cut off, and a bridge (two nodes that
// cannot reach each other, both reaching the third). Every checker of a
// `shoal torture` run must pass, and no two nodes may have acknowledged
// commits of one partition at overlapping times (the nodes' own commit
// records, with their lease epochs).
func TestLinkCutsUnderTheFaultSuitesWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("a fault run of about 15 s")
	}
	c := Start(t, 3, ReplicationFactor(3), Tolerant())
	token := testnode.AdminToken(t)
	var targets []torture.Target
	var ids []string
	for _, n := range c.Nodes {
		targets = append(targets, torture.Target{ID: n.ID, URL: n.URL()})
		ids = append(ids, n.ID)
	}
	const seed = 31
	w := torture.NewWorkload(targets, torture.WorkloadOptions{Token: token, RegisterUser: "registers",
		RegisterClients: 4, W1Clients: 2, ListClients: 2, Seed: seed})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w.Start(ctx)
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	testnode.Eventually(t, 30*time.Second, "every client had a write acknowledged", func() (bool, string) {
		n, of := w.Ready()
		return n == of, fmt.Sprintf("%d of %d", n, of)
	})

	rng := rand.New(rand.NewPCG(seed, 1))
	kinds := slices.Clone(torture.LinkFaultKinds)
	var faults []torture.Fault
	next := 2 // the workload's register round: new documents after each fault
	// One fault of each kind (CI's time is short), in a seeded order.
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for _, kind := range kinds {
		// Right after a handoff the new master's entry may not name its
		// replicas yet: wait for a placement with a master and a replica.
		var p api.PlacementView
		var replicas []string
		testnode.Eventually(t, 30*time.Second, "the registers' partition has a master and a replica", func() (bool, string) {
			var err error
			if p, err = torture.PlacementOf(ctx, nil, targets[0], token, "registers"); err != nil {
				return false, err.Error()
			}
			replicas = nil
			for _, id := range p.Responsible {
				if id != p.Master {
					replicas = append(replicas, id)
				}
			}
			return p.Master != "" && len(replicas) > 0, fmt.Sprintf("%+v", p)
		})
		f := torture.Fault{Kind: kind, Start: w.Since()}
		switch kind {
		case torture.IsolateMaster:
			f.Target = p.Master
			c.Faults.Isolate(p.Master, ids)
		case torture.IsolateReplica:
			f.Target = replicas[rng.IntN(len(replicas))]
			c.Faults.Isolate(f.Target, ids)
		case torture.Bridge:
			b := ids[rng.IntN(len(ids))] // reaches both sides
			var sides []string
			for _, id := range ids {
				if id != b {
					sides = append(sides, id)
				}
			}
			f.Target = fmt.Sprintf("%s | %s | %s", sides[0], b, sides[1])
			c.Faults.Cut(sides[0], sides[1])
		}
		w.Mark(kind + ": " + f.Target)
		hold := LeaseTTL + time.Duration(500+rng.IntN(2000))*time.Millisecond
		t.Logf("%8.3fs %s of %s for %s", w.Since().Seconds(), kind, f.Target, hold)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(hold): // the fault's length is the schedule's
		}
		c.Faults.HealAll()
		f.Healed = w.Since()
		w.Mark("healed " + kind)
		from := w.Acked()
		testnode.Eventually(t, 30*time.Second, "writes acknowledged again after "+kind, func() (bool, string) {
			return w.Acked()-from >= 20, fmt.Sprintf("%d of 20", w.Acked()-from)
		})
		f.Recovered = w.Since()
		faults = append(faults, f)
		w.Round(next)
		next++
	}
	w.Stop()
	stopped = true
	healed := time.Now()
	rep := &torture.Report{Seed: seed, Nodes: len(ids), Executed: faults, Faults: map[string]int{}, Ops: map[string]int{}, History: w.History()}
	for _, f := range faults {
		rep.Faults[f.Kind]++
	}
	torture.Healed{Nodes: targets, Token: token, Dir: t.TempDir(), Log: t.Logf}.Check(ctx, rep, rep.History, healed)
	t.Logf("report:\n%s", rep.Table())
	if f := rep.Failures(); len(f) > 0 {
		t.Fatalf("the run failed its checks:\n%s", strings.Join(f, "\n"))
	}
	if rep.Lists.Acked == 0 || rep.W1.Acked == 0 || rep.History.DefiniteWrites == 0 {
		t.Fatalf("nothing to check: %d list elements, %d w=1 writes, %d register writes acknowledged", rep.Lists.Acked, rep.W1.Acked, rep.History.DefiniteWrites)
	}
	if o := c.History.Overlaps(); len(o) > 0 {
		t.Fatalf("two nodes accepted writes for one partition at once:\n%s", strings.Join(o, "\n"))
	}
}

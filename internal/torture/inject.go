package torture

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shoal-db/shoal/api"
	shoalclient "github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/shard"
)

// agreedPlacement is the registers' placement every live node in the peer
// list agrees on, or why there is none.
func (r *runner) agreedPlacement(ctx context.Context) (master string, responsible []string, epoch uint64, why string) {
	first := true
	for _, n := range r.c.Nodes {
		if !n.Live() || !r.c.Listed(n.ID) {
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
	if n, err := r.c.Node(master); err != nil || !n.Live() {
		return "", nil, 0, "the master named is " + master + ", not a live node"
	}
	return master, responsible, epoch, ""
}

// namesALiveReplica says why a placement is no target yet for a fault
// aimed at a replica ("" when it is one): its responsible list names no
// live node but the master (a master that has just taken the lease may
// name itself alone until it has chosen its replicas).
func namesALiveReplica(master string, responsible []string, live func(id string) bool) string {
	for _, id := range responsible {
		if id != master && live(id) {
			return ""
		}
	}
	return fmt.Sprintf("%s names no live replica (responsible: %v)", master, responsible)
}

// injected is a fault in force: what it did, and how to heal it. settle,
// if set, waits for what the heal leaves to happen (a removed node's
// drain); it runs once every fault of the step is healed, as a drain may
// need a node another fault stopped.
type injected struct {
	target string
	heal   func(ctx context.Context) error
	settle func(ctx context.Context) error
}

// inject runs one step: the fault (and the one it overlaps with), the
// hold, the heal, and the wait for a whole cluster whose writes flow
// again.
func (r *runner) inject(ctx context.Context, s Step) (Fault, error) {
	f := Fault{Kind: s.Label(), Start: r.w.Since()}
	one, err := r.begin(ctx, s, false)
	if err != nil {
		return Fault{}, err
	}
	f.Target = one.target
	r.w.Mark(fmt.Sprintf("%s: %s", s.Kind, one.target))
	r.logf("fault %s of %s for %s", s.Kind, one.target, s.Hold)
	heals := []injected{one}
	healAll := func() error { return healStep(ctx, heals) }
	hold := time.After(s.Hold)
	if s.With != nil {
		if err := sleep(ctx, s.After); err != nil {
			return f, err
		}
		two, err := r.begin(ctx, *s.With, true)
		if err != nil {
			healAll()
			return f, fmt.Errorf("%s during %s: %w", s.With.Kind, s.Kind, err)
		}
		f.Target += " + " + two.target
		r.w.Mark(fmt.Sprintf("%s: %s", s.With.Kind, two.target))
		r.logf("fault %s of %s during %s, until it heals", s.With.Kind, two.target, s.Kind)
		heals = append(heals, two)
	}
	select {
	case <-ctx.Done():
		return f, ctx.Err()
	case <-hold:
	}
	if err := healAll(); err != nil {
		return f, err
	}
	f.Healed = r.w.Since()
	r.w.Mark("healed " + s.Label())
	err = r.awaitWhole(ctx)
	// An isolated master reconnected may still serve the writes the
	// failover rolls back until its new master reaches it: the aim at it
	// ends only now.
	r.w.Aim("")
	if err != nil {
		return f, fmt.Errorf("after %s of %s: %w", s.Label(), f.Target, err)
	}
	f.Recovered = r.w.Since()
	r.logf("healed %s of %s; whole again %s after the heal", s.Label(), f.Target, (f.Recovered - f.Healed).Round(time.Millisecond))
	return f, nil
}

// healStep heals a step's faults, the last injected first, then waits for
// what each heal leaves to happen.
func healStep(ctx context.Context, heals []injected) error {
	for i := len(heals) - 1; i >= 0; i-- {
		if err := heals[i].heal(ctx); err != nil {
			return err
		}
	}
	for _, h := range heals {
		if h.settle != nil {
			if err := h.settle(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// placementFor is the registers' placement to aim a fault at. A fault
// that overlaps another may find the cluster without an agreed master (the
// first fault took it away): it waits a little for one, then takes what
// the first live node names.
func (r *runner) placementFor(ctx context.Context, overlapping, needReplica bool) (master string, responsible []string, err error) {
	agreed := func() string {
		var why string
		if master, responsible, _, why = r.agreedPlacement(ctx); why != "" || !needReplica {
			return why
		}
		return namesALiveReplica(master, responsible, func(id string) bool {
			n, err := r.c.Node(id)
			return err == nil && n.Live()
		})
	}
	why := agreed()
	if why == "" {
		return master, responsible, nil
	}
	if !overlapping {
		// A master change since the cluster was last whole (a node that
		// took a partition back) may not have reached every node's table
		// yet (seed 4001: node4 still named epoch 1 of a master at 7),
		// and a master that has just taken the lease may name no replica
		// yet (seed 5000: "responsible: []").
		_, err := await(ctx, 30*time.Second, "an agreed master of the registers to aim at", func() (bool, string) {
			why := agreed()
			return why == "", why
		})
		return master, responsible, err
	}
	var p api.PlacementView
	_, err = await(ctx, 3*time.Second, "a master of the registers to aim at", func() (bool, string) {
		if master, responsible, _, why = r.agreedPlacement(ctx); why == "" {
			return true, ""
		}
		for _, n := range r.c.Nodes {
			if n.Live() && r.c.Listed(n.ID) {
				if q, err := n.Placement(ctx, r.c.Token, r.cfg.registerUser()); err == nil && q.Master != "" {
					p = q
				}
			}
		}
		return false, why
	})
	if err == nil {
		return master, responsible, nil
	}
	if p.Master == "" {
		return "", nil, err
	}
	return p.Master, p.Responsible, nil
}

// begin injects one fault; overlapping says another is in force.
func (r *runner) begin(ctx context.Context, s Step, overlapping bool) (injected, error) {
	switch s.Kind {
	case KillMaster, PauseMaster, KillReplica:
		master, responsible, err := r.placementFor(ctx, overlapping, s.Kind == KillReplica)
		if err != nil {
			return injected{}, err
		}
		target := master
		if s.Kind == KillReplica {
			var replicas []string
			for _, id := range responsible {
				if n, err := r.c.Node(id); id != master && err == nil && n.Live() {
					replicas = append(replicas, id)
				}
			}
			if len(replicas) == 0 && overlapping {
				// The first fault changed the responsible list (an isolated
				// master names itself alone, seed 5002): any live node but
				// the master stands in.
				for _, n := range r.c.Nodes {
					if n.ID != master && n.Live() && r.c.Listed(n.ID) {
						replicas = append(replicas, n.ID)
					}
				}
			}
			if len(replicas) == 0 {
				return injected{}, fmt.Errorf("the registers' partition has no live replica to kill (responsible: %v)", responsible)
			}
			target = replicas[s.Pick%len(replicas)]
		}
		n, err := r.c.Node(target)
		if err != nil {
			return injected{}, err
		}
		if !n.Live() && overlapping {
			// The first fault took the master named down, and no other
			// has taken over yet: a live responsible node is the one that
			// will (TestTortureShortRun, seed 14, under load).
			var live []string
			for _, id := range responsible {
				if m, err := r.c.Node(id); err == nil && m.Live() && r.c.Listed(id) {
					live = append(live, id)
				}
			}
			if len(live) == 0 {
				return injected{}, fmt.Errorf("no responsible node of the registers is live to aim %s at (responsible: %v)", s.Kind, responsible)
			}
			target = live[s.Pick%len(live)]
			n, _ = r.c.Node(target)
		}
		if !n.Live() {
			return injected{}, fmt.Errorf("%s, the %s's target, is not live", target, s.Kind)
		}
		if s.Kind == PauseMaster {
			if err := n.Pause(); err != nil {
				return injected{}, err
			}
			return injected{target: target, heal: func(context.Context) error { return n.Resume() }}, nil
		}
		n.Kill()
		return injected{target: target, heal: func(context.Context) error { return n.Start() }}, nil
	case KillStore:
		master, _, err := r.placementFor(ctx, overlapping, false)
		if err != nil {
			return injected{}, err
		}
		n, err := r.c.Node(master)
		if err != nil {
			return injected{}, err
		}
		if n.mongo == nil {
			return injected{}, fmt.Errorf("%s has no MongoDB of its own to kill", master)
		}
		n.mongo.kill(false)
		return injected{target: master + "'s MongoDB", heal: func(ctx context.Context) error {
			if err := r.c.startMongo(ctx, n); err != nil {
				return err
			}
			if n.exitedByItself() {
				// A node waits for its store to come back; it does not exit.
				return fmt.Errorf("%s exited while its MongoDB was down (its log: %s)", n.ID, n.LogPath)
			}
			return nil
		}}, nil
	case KillAll:
		var victims []*Node
		for _, n := range r.c.Nodes {
			if n.Running() && r.c.Listed(n.ID) {
				victims = append(victims, n)
			}
		}
		for _, n := range victims {
			n.Kill()
		}
		return injected{target: "every node", heal: func(context.Context) error {
			for _, n := range victims {
				if err := n.Start(); err != nil {
					return err
				}
			}
			return nil
		}}, nil
	case IsolateMaster, IsolateReplica, Bridge:
		master, responsible, err := r.placementFor(ctx, overlapping, s.Kind == IsolateReplica)
		if err != nil {
			return injected{}, err
		}
		var ids []string
		for _, n := range r.c.Nodes {
			if n.Running() {
				ids = append(ids, n.ID)
			}
		}
		target, cuts, err := cutPlan(s.Kind, s.Pick, ids, master, responsible)
		if err != nil {
			return injected{}, err
		}
		if err := r.c.Cut(cuts); err != nil {
			return injected{}, err
		}
		if s.Kind == IsolateMaster {
			r.w.Aim(target) // until the cluster is whole again (inject)
		}
		return injected{target: target, heal: func(context.Context) error { return r.c.Heal(cuts) }}, nil
	case AddNode, RemoveNode:
		spare := r.spare()
		if spare == nil {
			return injected{}, fmt.Errorf("%s: the cluster has no spare node", s.Kind)
		}
		if r.c.Listed(spare.ID) {
			return r.removeNode(spare)
		}
		return r.addNode(spare)
	}
	return injected{}, fmt.Errorf("unknown fault kind %q", s.Kind)
}

// spare is the node peer-list edits add and remove: the last one.
func (r *runner) spare() *Node {
	if r.cfg.Nodes >= len(r.c.Nodes) {
		return nil
	}
	return r.c.Nodes[len(r.c.Nodes)-1]
}

func (r *runner) addNode(n *Node) (injected, error) {
	if err := r.c.SetListed(n.ID, true); err != nil {
		return injected{}, err
	}
	if !n.Running() {
		if err := n.Start(); err != nil {
			return injected{}, err
		}
	}
	r.forgetRollbacks(n.ID) // its own collection answers for itself again
	return injected{target: n.ID + " (into the peer list)", heal: func(context.Context) error { return nil }}, nil
}

// removeNode takes n out of the peer list. Once every fault of the step
// is healed, it waits until n has drained, keeps its rollback collection
// for the checks, and stops it (seed 2000 removed the spare while a
// replica was down: the spare hands partitions only to their preferred
// master, the replica, which its own heal had not restarted yet).
func (r *runner) removeNode(n *Node) (injected, error) {
	if err := r.c.SetListed(n.ID, false); err != nil {
		return injected{}, err
	}
	return injected{target: n.ID + " (out of the peer list)", heal: func(context.Context) error { return nil },
		settle: func(ctx context.Context) error { return r.retire(ctx, n) }}, nil
}

// drainWait bounds how long a node out of the peer list may take to hand
// everything over.
const drainWait = 2 * time.Minute

// retire waits until n, out of the peer list, holds nothing, keeps its
// rollback collection for the checks, and stops it.
func (r *runner) retire(ctx context.Context, n *Node) error {
	if !n.Running() {
		return nil
	}
	if !n.Live() { // paused by a fault it overlaps with: it drains once it runs
		if err := n.Resume(); err != nil {
			return err
		}
	}
	took, err := await(ctx, drainWait, n.ID+" drained out of the cluster", func() (bool, string) {
		st, err := shoalclient.New(n.URL(), r.c.Token, shoalclient.WithHTTPClient(r.c.HTTP)).Cluster(ctx)
		if err != nil {
			code, ok := answered(err)
			if ok {
				err = nil
			}
			return false, fmt.Sprintf("%s answered /v1/cluster with %d (%v)", n.ID, code, err)
		}
		return st.Partitions.HoldsNothing(n.ID, len(st.Moves))
	})
	if err != nil {
		// Say which tables still name it, and where: a master that keeps
		// it in a list, or a table (its own) that did not learn of the
		// list without it (seed 9724 gave only a count).
		for _, line := range r.listsNaming(ctx, n.ID) {
			r.logf("  %s", line)
		}
		return err
	}
	rolled, err := nodeRollbacks(ctx, r.c.HTTP, r.c.Token, Target{ID: n.ID, URL: n.URL()})
	if err != nil {
		return fmt.Errorf("reading drained %s's rollback collection: %w", n.ID, err)
	}
	r.keepRollbacks(n.ID, rolled)
	n.Stop(20 * time.Second)
	r.logf("%s drained in %s and was stopped", n.ID, took.Round(time.Millisecond))
	return nil
}

// awaitWhole waits until every running node is UP everywhere, the
// registers have an agreed master, and writes of every kind are
// acknowledged again.
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
	// Writes flow again, the registers' too: an agreed master may be one
	// that was restarted and does not hold the lease yet (seed 4001).
	from, regFrom := r.w.Acked(), r.w.RegisterAcked()
	_, err := await(ctx, 60*time.Second, "writes acknowledged again", func() (bool, string) {
		n, reg := r.w.Acked()-from, r.w.RegisterAcked()-regFrom
		return n >= 20 && reg >= 5, fmt.Sprintf("%d of 20 writes acknowledged, %d of 5 of them register writes", n, reg)
	})
	return err
}

// listsNaming asks every running node, for each partition, which master
// and responsible list its table gives, and returns the entries that name
// id among the copies.
func (r *runner) listsNaming(ctx context.Context, id string) []string {
	users := usersOfEachPartition(partitions)
	var out []string
	for _, o := range r.c.Nodes {
		if !o.Running() {
			continue
		}
		cl := shoalclient.New(o.URL(), r.c.Token, shoalclient.WithHTTPClient(r.c.HTTP))
		for p := 0; p < partitions; p++ {
			pl, err := cl.Placement(ctx, users[p])
			switch {
			case err != nil:
				out = append(out, fmt.Sprintf("%s's table, partition %d: %v", o.ID, p, err))
			case slices.Contains(pl.Responsible, id) && pl.Master != id:
				out = append(out, fmt.Sprintf("%s's table names %s in partition %d: master %s at epoch %d, responsible %v", o.ID, id, p, pl.Master, pl.Epoch, pl.Responsible))
			}
		}
	}
	if len(out) == 0 {
		out = append(out, "no node's table names "+id+" as a copy now")
	}
	return out
}

// usersOfEachPartition names one user whose documents are in each of
// count partitions: asking a node for that user's placement reads its
// table's entry of the partition.
func usersOfEachPartition(count int) map[int]string {
	users := map[int]string{}
	for i := 0; len(users) < count; i++ {
		u := fmt.Sprintf("probe%d", i)
		if p := shard.PartitionOf(u, count); users[p] == "" {
			users[p] = u
		}
	}
	return users
}

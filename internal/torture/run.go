package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoal-db/shoal/store"
)

// Config is one torture run.
type Config struct {
	// Binary is the shoal executable the nodes run; Env is added to their
	// environment.
	Binary string
	Env    []string
	Nodes  int
	// Duration is how long faults are started for (but one of each kind
	// is); the run then heals and checks.
	Duration time.Duration
	Seed     uint64
	// Clients is how many register clients; the w=1 writers and list
	// appenders are half as many each (at least one).
	Clients int
	// Dir holds the cluster's data and logs, and a failure's evidence;
	// empty: a temporary directory, removed after a passing run unless
	// Keep.
	Dir  string
	Keep bool
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Network is NetLoopback (also ""), NetNetns or NetAuto; only netns
	// can cut links.
	Network string
	// Kinds are the fault kinds to inject (nil: every kind the network
	// can, KindsFor).
	Kinds []string
}

func (c Config) registerUser() string { return "registers" }

type runner struct {
	cfg   Config
	c     *Cluster
	w     *Workload
	logMu sync.Mutex
}

func (r *runner) logf(format string, args ...any) {
	if r.cfg.Log == nil {
		return
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	at := time.Duration(0)
	if r.w != nil {
		at = r.w.Since()
	}
	fmt.Fprintf(r.cfg.Log, "%8.3fs %s\n", at.Seconds(), fmt.Sprintf(format, args...))
}

// Run starts a cluster, the workload and the nemesis, heals, checks and
// reports. The error is for a run that could not be carried out (the
// cluster did not start, or did not heal); a run whose checks fail
// returns a Report with Failed set. Every process is gone when it returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if cfg.Nodes < 3 {
		return nil, fmt.Errorf("--nodes %d: the suite needs at least 3 nodes (a majority survives one fault)", cfg.Nodes)
	}
	if cfg.Clients < 1 {
		return nil, fmt.Errorf("--clients %d: use at least 1", cfg.Clients)
	}
	network, netWhy, err := ResolveNetwork(cfg.Network)
	if err != nil {
		return nil, err
	}
	kinds := cfg.Kinds
	if kinds == nil {
		kinds = KindsFor(network)
	}
	for _, k := range kinds {
		if isLinkCut(k) && network != NetNetns {
			return nil, fmt.Errorf("%s faults need --network netns (%s)", k, netWhy)
		}
	}
	steps := Schedule(cfg.Seed, cfg.Duration, kinds)
	rep = &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, Network: network, Planned: steps, Faults: map[string]int{}, Ops: map[string]int{}}
	r := &runner{cfg: cfg}
	r.logf("network: %s", netWhy)
	r.logf("seed %d: %d faults planned for %s:\n%s", cfg.Seed, len(steps), cfg.Duration, FormatSchedule(steps))
	c, err := StartCluster(ctx, ClusterOptions{Binary: cfg.Binary, Env: cfg.Env, Nodes: cfg.Nodes, Dir: cfg.Dir, Netns: network == NetNetns,
		Settings: []string{"REPLICATION_FACTOR=3", "PARTITION_COUNT=8", "STORE_SYNC=normal", "LEASE_TTL=" + leaseTTL.String()}})
	if err != nil {
		return nil, err
	}
	r.c = c
	rep.Dir = c.Dir
	if c.Net != nil && len(c.Net.Swept) > 0 {
		r.logf("removed %d network namespaces of runs no longer alive: %s", len(c.Net.Swept), strings.Join(c.Net.Swept, " "))
	}
	defer func() {
		keep := cfg.Keep || err != nil || rep.Failed()
		if cerr := c.Close(keep); cerr != nil {
			r.logf("closing the cluster: %v", cerr)
		}
		if keep {
			rep.Kept = true
		}
	}()
	if _, err := c.WaitUp(ctx, 90*time.Second); err != nil {
		return rep, fmt.Errorf("the cluster did not come up (logs in %s): %w", c.Dir, err)
	}
	var targets []Target
	for _, n := range c.Nodes {
		targets = append(targets, Target{ID: n.ID, URL: n.URL()})
	}
	sub := max(1, cfg.Clients/2)
	r.w = NewWorkload(targets, WorkloadOptions{Token: c.Token, RegisterUser: cfg.registerUser(),
		RegisterClients: cfg.Clients, W1Clients: sub, ListClients: sub, Seed: cfg.Seed, Dial: c.Dial})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.w.Start(wctx)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			r.w.Stop()
		}
	}
	defer stop()
	if _, err := await(ctx, 60*time.Second, "the workload running", func() (bool, string) {
		n, of := r.w.Ready()
		return n == of, fmt.Sprintf("%d of %d clients had a write acknowledged", n, of)
	}); err != nil {
		return rep, err
	}
	r.logf("workload running; nemesis starts")
	var faultErr error
	for i, s := range steps {
		if r.w.Since() >= cfg.Duration && i >= len(kinds) {
			break
		}
		f, err := r.inject(ctx, s)
		if f.Kind != "" {
			rep.Executed = append(rep.Executed, f)
			rep.Faults[f.Kind]++
		}
		if err != nil {
			faultErr = err
			break
		}
		r.w.Round(i + 2)
		select {
		case <-ctx.Done():
			faultErr = ctx.Err()
		case <-time.After(s.Quiet):
		}
		if faultErr != nil {
			break
		}
	}
	stop()
	h := r.w.History()
	rep.History = h
	if faultErr != nil {
		if errors.Is(faultErr, context.Canceled) {
			return rep, faultErr
		}
		rep.problem("the cluster did not heal: %v", faultErr)
	}
	// Heal whatever is left: every link, every node running.
	if err := c.HealLinks(); err != nil {
		rep.problem("healing the links: %v", err)
	}
	for _, n := range c.Nodes {
		if !n.Running() {
			n.Start()
		} else {
			n.Resume()
		}
	}
	healed := time.Now()
	if _, err := c.WaitUp(ctx, 90*time.Second); err != nil {
		rep.problem("after the faults: %v", err)
	}
	r.check(ctx, rep, h, healed)
	return rep, nil
}

// check runs every checker on the healed cluster.
func (r *runner) check(ctx context.Context, rep *Report, h *History, healed time.Time) {
	// Convergence first: the final reads of the checks below are of a
	// settled cluster.
	keys := r.usedKeys(h)
	var parts []PartitionCopies
	var copies []KeyCopies
	_, err := await(ctx, 90*time.Second, "every responsible copy at its master's position with the master's content", func() (bool, string) {
		var why string
		parts, why = r.positions(ctx, keys)
		if why != "" {
			return false, why
		}
		if d := Diverged(parts, nil); len(d) > 0 {
			return false, d[0]
		}
		copies, why = r.localCopies(ctx, parts, keys)
		if why != "" {
			return false, why
		}
		d := Diverged(nil, copies)
		if len(d) > 0 {
			return false, fmt.Sprintf("%d documents differ, e.g. %s", len(d), d[0])
		}
		return true, ""
	})
	rep.Convergence = time.Since(healed)
	if err != nil {
		rep.Diverged = Diverged(parts, copies)
		if len(rep.Diverged) == 0 {
			rep.Diverged = []string{err.Error()}
		}
		rep.problem("replicas did not converge: %v", err)
	}
	r.logf("converged %s after healing", rep.Convergence.Round(time.Millisecond))

	// What each master holds: the content the lists and w=1 checks count.
	present := map[string]map[string]bool{} // user -> ids (lists)
	w1 := map[string]bool{}                 // user/id
	for _, k := range copies {
		for _, c := range k.Copies {
			if c.Node != k.Master || !c.Found {
				continue
			}
			user, coll, id := splitKey(k.Key)
			switch coll {
			case listColl:
				if present[user] == nil {
					present[user] = map[string]bool{}
				}
				present[user][id] = true
			case w1Coll:
				w1[user+"/"+id] = true
			}
		}
	}
	rolled, n, err := r.rollbacks(ctx)
	if err != nil {
		rep.problem("reading the rollback collections: %v", err)
	}
	rep.RolledBackDocs = n

	finals, err := r.finalReads(ctx, h)
	if err != nil {
		rep.problem("final reads of the registers: %v", err)
	}
	rep.LostRegister = h.LostRegisterWrites(finals)
	h.AddFinalReads(finals)
	rep.Lists = h.CheckLists(present)
	rep.W1 = h.CheckW1(w1, rolled)

	dir := ""
	if r.cfg.Keep {
		dir = r.c.Dir
	}
	v, err := h.CheckRegisters(ReadLinearizable, 60*time.Second, dir)
	if v.Result == porcupine.Illegal && dir == "" {
		// A failure's evidence: write the visualization after all.
		v, err = h.CheckRegisters(ReadLinearizable, 60*time.Second, r.c.Dir)
	}
	if err != nil {
		rep.problem("%v", err)
	}
	rep.Registers = v
	rep.Availability = Unavailability(h.Attempts, rep.Executed, r.w.Since())
	for _, a := range h.Attempts {
		if a.OK {
			rep.Ops["write ok"]++
		} else {
			rep.Ops["write failed or unknown"]++
		}
	}
	rep.Ops["register writes done"] = h.DefiniteWrites
	rep.Ops["register writes unknown"] = h.UnknownWrites
	rep.Ops["compare-and-sets refused"] = h.Refused
	rep.Ops["linearizable reads"] = h.DefiniteReads[ReadLinearizable]
	rep.Ops["local reads"] = h.DefiniteReads[ReadLocal]
}

func splitKey(k string) (user, coll, id string) {
	p := strings.SplitN(k, "/", 3)
	for len(p) < 3 {
		p = append(p, "")
	}
	return p[0], p[1], p[2]
}

// usedKeys is every document the workload may have written, by user.
func (r *runner) usedKeys(h *History) map[string][]string {
	keys := map[string][]string{}
	for _, d := range h.Docs {
		keys[h.RegisterUser] = append(keys[h.RegisterUser], registerColl+"/"+d)
	}
	for _, e := range h.List {
		keys[e.User] = append(keys[e.User], listColl+"/"+e.ID)
	}
	for _, w := range h.W1 {
		keys[w.User] = append(keys[w.User], w1Coll+"/"+w.ID)
	}
	return keys
}

// positions is each used partition's master and every responsible node's
// position, or why they cannot be had yet.
func (r *runner) positions(ctx context.Context, keys map[string][]string) ([]PartitionCopies, string) {
	seen := map[int]bool{}
	var out []PartitionCopies
	users := make([]string, 0, len(keys))
	for u := range keys {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		p, err := r.c.Nodes[0].Placement(ctx, r.c.Token, u)
		if err != nil {
			return nil, err.Error()
		}
		if seen[p.Partition] {
			continue
		}
		seen[p.Partition] = true
		pc := PartitionCopies{Partition: p.Partition, Master: p.Master, Positions: map[string]store.Position{}}
		for _, id := range p.Responsible {
			n, err := r.c.Node(id)
			if err != nil {
				return nil, err.Error()
			}
			q, err := n.Placement(ctx, r.c.Token, u)
			if err != nil {
				return nil, err.Error()
			}
			if q.Master != p.Master || q.Epoch != p.Epoch {
				return nil, fmt.Sprintf("partition %d: %s names %s at %d, %s names %s at %d", p.Partition, r.c.Nodes[0].ID, p.Master, p.Epoch, id, q.Master, q.Epoch)
			}
			pc.Positions[id] = q.Position
		}
		out = append(out, pc)
	}
	return out, ""
}

// localCopies reads every used key from every responsible node's own copy.
func (r *runner) localCopies(ctx context.Context, parts []PartitionCopies, keys map[string][]string) ([]KeyCopies, string) {
	type job struct {
		user, key string
	}
	var jobs []job
	for u, ks := range keys {
		for _, k := range ks {
			jobs = append(jobs, job{u, k})
		}
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].user+jobs[i].key < jobs[j].user+jobs[j].key })
	nodesOf := map[string]PartitionCopies{}
	for _, u := range sortedUsers(keys) {
		p, err := r.c.Nodes[0].Placement(ctx, r.c.Token, u)
		if err != nil {
			return nil, err.Error()
		}
		for _, pc := range parts {
			if pc.Partition == p.Partition {
				nodesOf[u] = pc
			}
		}
	}
	out := make([]KeyCopies, len(jobs))
	var mu sync.Mutex
	var why string
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				pc := nodesOf[j.user]
				kc := KeyCopies{Key: j.user + "/" + j.key, Master: pc.Master}
				for id := range pc.Positions {
					n, _ := r.c.Node(id)
					c, err := readLocal(ctx, n, r.c.Token, j.user, j.key)
					if err != nil {
						mu.Lock()
						why = err.Error()
						mu.Unlock()
						continue
					}
					kc.Copies = append(kc.Copies, c)
				}
				sort.Slice(kc.Copies, func(a, b int) bool { return kc.Copies[a].Node < kc.Copies[b].Node })
				out[i] = kc
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, why
}

func sortedUsers(keys map[string][]string) []string {
	var us []string
	for u := range keys {
		us = append(us, u)
	}
	sort.Strings(us)
	return us
}

// readLocal reads node n's own copy of user's coll/id.
func readLocal(ctx context.Context, n *Node, token, user, key string) (Copy, error) {
	coll, id, _ := strings.Cut(key, "/")
	req, _ := http.NewRequestWithContext(ctx, "GET", docURL(Target{ID: n.ID, URL: n.URL()}, user, coll, id), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Read-Preference", "local")
	resp, err := n.hc.Do(req)
	if err != nil {
		return Copy{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Copy{}, err
	}
	out, ok := decodeRead(resp.StatusCode, body)
	if !ok {
		return Copy{}, fmt.Errorf("%s's own copy of %s/%s: %d %s", n.ID, user, key, resp.StatusCode, body)
	}
	return Copy{Node: n.ID, Found: out.Found, Version: out.Version, Value: out.Value}, nil
}

// rollbacks is every node's rollback collection: the w=1 keys (user/id)
// listed, and how many document states in all.
func (r *runner) rollbacks(ctx context.Context) (map[string]bool, int, error) {
	keys := map[string]bool{}
	n := 0
	for _, node := range r.c.Nodes {
		var v struct {
			RolledBack []store.RolledBack `json:"rolled_back"`
		}
		code, err := getJSON(ctx, node.hc, node.URL()+"/v1/admin/rollback?limit=10000", r.c.Token, nil, &v)
		if err == nil && code != 200 {
			err = fmt.Errorf("%s answered %d", node.ID, code)
		}
		if err != nil {
			return keys, n, err
		}
		for _, d := range v.RolledBack {
			if d.User == "_shoal" {
				continue // tenure markers
			}
			n++
			if d.Coll == w1Coll {
				keys[d.User+"/"+d.ID] = true
			}
		}
	}
	return keys, n, nil
}

// finalReads reads every register with X-Read-Concern: linearizable.
func (r *runner) finalReads(ctx context.Context, h *History) (map[string]FinalRead, error) {
	finals := map[string]FinalRead{}
	for _, doc := range h.Docs {
		_, err := await(ctx, 30*time.Second, "a linearizable read of register "+doc, func() (bool, string) {
			n := r.c.Nodes[len(finals)%len(r.c.Nodes)]
			req, _ := http.NewRequestWithContext(ctx, "GET", docURL(Target{ID: n.ID, URL: n.URL()}, h.RegisterUser, registerColl, doc), nil)
			req.Header.Set("Authorization", "Bearer "+r.c.Token)
			req.Header.Set("X-Read-Concern", string(ReadLinearizable))
			resp, err := n.hc.Do(req)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			out, ok := decodeRead(resp.StatusCode, body)
			if !ok {
				return false, fmt.Sprintf("%s answered %d %s", n.ID, resp.StatusCode, body)
			}
			finals[doc] = FinalRead{Node: n.ID, Found: out.Found, Value: out.Value, Version: out.Version}
			return true, ""
		})
		if err != nil {
			return finals, err
		}
	}
	return finals, nil
}

package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-db/shoal/store"
)

// Config is one torture run.
type Config struct {
	// Binary is the shoal executable the nodes run; Env is added to their
	// environment.
	Binary string
	Env    []string
	Nodes  int
	// ReplicationFactor is the nodes' REPLICATION_FACTOR (0: 3). Above
	// Nodes, the membership faults change the count of copies: the spare
	// put into the peer list raises it by one, taken out lowers it again.
	ReplicationFactor int
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
	// LogLevel is the nodes' LOG_LEVEL ("": info); debug logs every
	// lease round and replication request, for a run to be diagnosed.
	LogLevel string
	// KeepOutage keeps the logs of a passing run whose longest write
	// outage lasted at least this long too, so that a slow recovery can be
	// read afterwards (0: only failing runs, or every run with Keep).
	KeepOutage time.Duration
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Network is NetLoopback (also ""), NetNetns or NetAuto; only netns
	// can cut links.
	Network string
	// Kinds are the fault kinds to inject (nil: every kind the network
	// can, KindsFor).
	Kinds []string
	// Mongo, when its Command is set, runs every node on a MongoDB of its
	// own (the mongo engine) instead of the embedded store.
	Mongo MongoOptions
	// TombstoneRetention is the nodes' TOMBSTONE_RETENTION (0: their
	// default, 24h, which no run reaches). Set at all, a register deleted
	// and made again may start at any higher version (a run may outlast
	// Duration: tombstonesMayBePurged). Shorter than the run, the
	// nodes purge tombstones under the faults: the list appenders' deleted
	// elements must stay gone, and a replica behind a purge gets a full
	// copy.
	TombstoneRetention time.Duration
}

func (c Config) registerUser() string { return "registers" }

// tombstonesMayBePurged says the nodes may purge tombstones while the
// clients write: whenever a TOMBSTONE_RETENTION is set, however long, as a
// run goes on past Duration until every fault kind has run.
func (c Config) tombstonesMayBePurged() bool { return c.TombstoneRetention > 0 }

// replicationFactor is the nodes' REPLICATION_FACTOR.
func (c Config) replicationFactor() int {
	if c.ReplicationFactor == 0 {
		return 3
	}
	return c.ReplicationFactor
}

// partitions is the clusters' PARTITION_COUNT: few, so that faults aimed
// at one partition's master touch a good share of the data.
const partitions = 8

// keepRun says whether a run keeps its nodes' logs and data: when asked
// to, when it failed or could not finish, or when a write outage lasted
// KeepOutage or longer.
func keepRun(cfg Config, rep *Report, err error) bool {
	if cfg.Keep || err != nil || rep.Failed() {
		return true
	}
	return cfg.KeepOutage > 0 && rep.LongestOutage().Length() >= cfg.KeepOutage
}

type runner struct {
	cfg   Config
	c     *Cluster
	w     *Workload
	logMu sync.Mutex

	mu      sync.Mutex
	offline map[string][]store.RolledBack // rollback collections of stopped nodes, read before they stopped
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
	onMongo := cfg.Mongo.enabled()
	kinds := cfg.Kinds
	if kinds == nil {
		kinds = KindsFor(network)
		if onMongo {
			kinds = append(kinds, StoreFaultKinds...)
		}
	}
	for _, k := range kinds {
		if isLinkCut(k) && network != NetNetns {
			return nil, fmt.Errorf("%s faults need --network netns (%s)", k, netWhy)
		}
		if slices.Contains(StoreFaultKinds, k) && !onMongo {
			return nil, fmt.Errorf("%s faults need a MongoDB per node (--mongo-command)", k)
		}
	}
	rf := cfg.replicationFactor()
	if rf < 2 {
		return nil, fmt.Errorf("--replication-factor %d: the suite needs at least 2 (a write kept on one node is lost with it)", rf)
	}
	if cfg.TombstoneRetention < 0 {
		return nil, fmt.Errorf("--tombstone-retention %s: use a positive duration, or 0 for the nodes' default", cfg.TombstoneRetention)
	}
	steps := Schedule(cfg.Seed, cfg.Duration, kinds)
	rep = &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, ReplicationFactor: rf, Network: network, Store: "embedded", Kinds: kinds, Planned: steps, Faults: map[string]int{}, Ops: map[string]int{}}
	if onMongo {
		rep.Store = "mongo"
	}
	rep.Purge.Retention = cfg.TombstoneRetention
	settings := []string{"REPLICATION_FACTOR=" + strconv.Itoa(rf), "PARTITION_COUNT=" + strconv.Itoa(partitions), "STORE_SYNC=normal", "LEASE_TTL=" + leaseTTL.String()}
	if cfg.TombstoneRetention > 0 {
		settings = append(settings, "TOMBSTONE_RETENTION="+cfg.TombstoneRetention.String())
	}
	r := &runner{cfg: cfg}
	r.logf("network: %s", netWhy)
	if rep.Store == "mongo" {
		r.logf("store: the mongo engine, each node on a MongoDB of its own: %s", strings.Join(cfg.Mongo.Command, " "))
	}
	r.logf("seed %d: %d faults planned for %s:\n%s", cfg.Seed, len(steps), cfg.Duration, FormatSchedule(steps))
	c, err := StartCluster(ctx, ClusterOptions{Binary: cfg.Binary, Env: cfg.Env, Nodes: cfg.Nodes, Spares: 1, Dir: cfg.Dir, Netns: network == NetNetns, Mongo: cfg.Mongo,
		Settings: append(settings, nodeLogLevel(cfg.LogLevel)...)})
	if err != nil {
		return nil, err
	}
	r.c = c
	rep.Dir = c.Dir
	if c.Net != nil && len(c.Net.Swept) > 0 {
		r.logf("removed %d network namespaces of runs no longer alive: %s", len(c.Net.Swept), strings.Join(c.Net.Swept, " "))
	}
	defer func() {
		keep := keepRun(cfg, rep, err)
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
	for _, n := range c.Nodes[:cfg.Nodes] {
		targets = append(targets, Target{ID: n.ID, URL: n.URL()})
	}
	sub := max(1, cfg.Clients/2)
	r.w = NewWorkload(targets, WorkloadOptions{Token: c.Token, RegisterUser: cfg.registerUser(),
		RegisterClients: cfg.Clients, W1Clients: sub, ListClients: sub, Seed: cfg.Seed, Dial: c.Dial, TombstonesMayBePurged: cfg.tombstonesMayBePurged()})
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
		if r.w.Since() >= cfg.Duration && i > len(kinds) { // one of each kind, and a pair
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
			rep.problem("interrupted before the checks: nothing was checked")
			return rep, faultErr
		}
		rep.problem("the cluster did not heal: %v", faultErr)
	}
	// Heal whatever is left: every link, every node of the peer list
	// running, and a node out of it drained and stopped.
	if err := c.HealLinks(); err != nil {
		rep.problem("healing the links: %v", err)
	}
	for _, n := range c.Nodes {
		if n.mongo != nil && n.mongo.gone() {
			rep.problem("%s's MongoDB was not running after the faults (its log: %s)", n.ID, n.mongo.logPath)
			if err := c.startMongo(ctx, n); err != nil {
				rep.problem("restarting %s's MongoDB after the faults: %v", n.ID, err)
			}
		}
		if n.exitedByItself() {
			rep.problem("%s exited by itself during the faults (its log: %s)", n.ID, n.LogPath)
		}
	}
	for _, n := range c.Nodes {
		switch {
		case c.Listed(n.ID) && !n.Running():
			if err := n.Start(); err != nil {
				rep.problem("restarting %s after the faults: %v", n.ID, err)
			}
		case n.Running():
			n.Resume()
		}
	}
	for _, n := range c.Nodes {
		if !c.Listed(n.ID) && n.Running() {
			if err := r.retire(ctx, n); err != nil {
				rep.problem("after the faults: %v", err)
			}
		}
	}
	healed := time.Now()
	if _, err := c.WaitUp(ctx, 90*time.Second); err != nil {
		rep.problem("after the faults: %v", err)
	}
	r.check(ctx, rep, h, healed)
	if err := ctx.Err(); err != nil {
		rep.problem("interrupted during the checks: their verdicts are incomplete")
		return rep, err
	}
	return rep, nil
}

// check runs every checker on the healed cluster.
func (r *runner) check(ctx context.Context, rep *Report, h *History, healed time.Time) {
	c := Healed{Token: r.c.Token, HTTP: r.c.HTTP, Dir: r.c.Dir, KeepVisual: r.cfg.Keep, CommitLogs: r.c.Dir, Log: r.logf, Offline: map[string][]store.RolledBack{}}
	for _, n := range r.c.Nodes {
		if n.Running() {
			c.Nodes = append(c.Nodes, Target{ID: n.ID, URL: n.URL()})
		}
	}
	r.mu.Lock()
	for id, docs := range r.offline {
		if n, err := r.c.Node(id); err == nil && !n.Running() {
			c.Offline[id] = docs
		}
	}
	r.mu.Unlock()
	c.Check(ctx, rep, h, healed)
}

// keepRollbacks remembers the rollback collection of a node about to
// stop; forgetRollbacks drops it when the node runs again.
func (r *runner) keepRollbacks(id string, docs []store.RolledBack) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.offline == nil {
		r.offline = map[string][]store.RolledBack{}
	}
	r.offline[id] = docs
}

func (r *runner) forgetRollbacks(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.offline, id)
}

// nodeLogLevel is the nodes' LOG_LEVEL setting for level ("" or "info":
// none, the nodes' default).
func nodeLogLevel(level string) []string {
	if level == "" || level == "info" {
		return nil
	}
	return []string{"LOG_LEVEL=" + level}
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/torture"
)

// torture runs the fault suite against a cluster of this binary's nodes.
func tortureCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("torture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "number of nodes (all voters)")
	rf := fs.Int("replication-factor", 3, "the nodes' REPLICATION_FACTOR; above --nodes, adding the spare raises the count of copies by one and taking it out lowers it again")
	duration := fs.Duration("duration", 2*time.Minute, "how long faults are injected for; healing and checking follow")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule (0: one from the clock, printed); the same seed gives the same schedule")
	clients := fs.Int("clients", 8, "register clients; w=1 writers and list appenders are half as many each")
	keep := fs.Bool("keep", false, "keep the nodes' logs and data directories (a failing run always keeps them)")
	keepOutage := fs.Duration("keep-outage", 30*time.Second, "keep them too for a passing run whose longest write outage lasted this long or longer (0: never)")
	binary := fs.String("binary", "", "the shoal binary the nodes run (default: this executable)")
	dir := fs.String("dir", "", "directory for the nodes' data and logs (default: a new temporary directory); with --runs, one subdirectory per run")
	runs := fs.Int("runs", 1, "consecutive runs, of seeds --seed, --seed+1, ...; it stops at the first failing run and prints a summary of all")
	keepGoing := fs.Bool("keep-going", false, "with --runs: go on after a failing run (each keeps its logs) instead of stopping")
	logLevel := fs.String("log-level", "info", "the nodes' LOG_LEVEL (debug, info, warn or error); debug logs every lease round and replication request, to diagnose a seed")
	mongoCommand := fs.String("mongo-command", "", "run every node on a MongoDB of its own (the mongo engine) started by this command, split at spaces, where {addr} is the host:port it must listen on ({host} and {port} its parts) and {dir} its data directory, e.g. \"mongod --bind_ip {host} --port {port} --dbpath {dir}\" (with netns, 127.0.0.1:27017 in the node's namespace); it outlives the node's kills and restarts (default: the embedded store)")
	retention := fs.Duration("tombstone-retention", 0, "the nodes' TOMBSTONE_RETENTION (0: their default, 24h, which no run reaches); shorter than --duration, tombstones are purged under the faults. With any value but 0 the register checks let a register deleted and made again start at any version above its last, as the nodes make a document once they purged tombstones (a run may outlast --duration)")
	network := fs.String("network", torture.NetAuto, "loopback (every node on 127.0.0.1), netns (a network namespace per node, which adds link cuts; needs root and iproute2) or auto (netns when it can)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal torture [--nodes 3] [--replication-factor 3] [--duration 2m] [--seed N] [--clients 8] [--runs 1 [--keep-going]] [--keep] [--keep-outage 30s] [--binary PATH] [--dir DIR] [--network auto|netns|loopback] [--mongo-command CMD] [--tombstone-retention 0] [--log-level info]")
		fmt.Fprintln(stderr, "Runs a fault suite: starts --nodes `shoal serve` processes of --binary (it builds nothing) and one spare")
		fmt.Fprintln(stderr, "node, with clients doing majority puts, compare-and-sets and -deletes after linearizable reads, linearizable,")
		fmt.Fprintln(stderr, "majority and local reads and query pages (local and majority ones with their own writes' tokens),")
		fmt.Fprintln(stderr, "of registers; w=1 writes of keys written once; and majority appends to per-user lists, each appender deleting")
		fmt.Fprintln(stderr, "one of its elements every third append (with --tombstone-retention shorter than the run, tombstones are purged")
		fmt.Fprintln(stderr, "meanwhile), while a nemesis injects")
		fmt.Fprintln(stderr, "faults on a schedule derived from --seed: kill -9 and restart of the registers' master, of one of its replicas,")
		fmt.Fprintln(stderr, "or of every node at once; SIGSTOP/SIGCONT of the master for longer than LEASE_TTL; the spare put into the peer")
		fmt.Fprintln(stderr, "list under load, and taken out (it drains, then is stopped); with --network netns also link cuts between nodes")
		fmt.Fprintln(stderr, "(clients still reach every node): the master isolated from the other nodes, a replica isolated, and a bridge")
		fmt.Fprintln(stderr, "(two sides that do not reach each other, one node that reaches both); with --mongo-command also kill -9 and")
		fmt.Fprintln(stderr, "restart of the master's MongoDB; and pairs of these overlapping. Then it")
		fmt.Fprintln(stderr, "heals and checks: linearizability per register (porcupine), no acknowledged majority write lost, every")
		fmt.Fprintln(stderr, "read sent with a token seeing its client's write, no majority read returning a rolled-back state, every")
		fmt.Fprintln(stderr, "acknowledged list element present unless deleted and none whose delete was acknowledged back, every")
		fmt.Fprintln(stderr, "acknowledged w=1 write present or in a rollback collection, every copy converged to its master's exact")
		fmt.Fprintln(stderr, "content, never two nodes acknowledging writes of one partition at once (the nodes' COMMIT_LOG), and the")
		fmt.Fprintln(stderr, "longest write outage per fault kind. It prints a table (and with --runs, a summary) and exits 0 if every")
		fmt.Fprintln(stderr, "check passed, 1 if one failed (logs and porcupine's visualization are kept; the table says where), 2 on a")
		fmt.Fprintln(stderr, "usage error.")
		fs.PrintDefaults()
	}
	if code, done := parseArgs(fs, args, stderr, 2); done {
		return code
	}
	if config.CheckLogLevel(*logLevel) != nil {
		fmt.Fprintf(stderr, "shoal torture: --log-level %q: use debug, info, warn or error\n", *logLevel)
		return 2
	}
	if *binary == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "shoal torture: cannot find this executable to run the nodes with (pass --binary): %v\n", err)
			return 1
		}
		*binary = exe
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	if *duration <= 0 {
		fmt.Fprintf(stderr, "shoal torture: --duration %s: use a positive duration\n", *duration)
		return 2
	}
	if *runs < 1 {
		fmt.Fprintf(stderr, "shoal torture: --runs %d: use at least 1\n", *runs)
		return 2
	}
	if *mongoCommand != "" && len(strings.Fields(*mongoCommand)) == 0 {
		fmt.Fprintln(stderr, "shoal torture: --mongo-command is blank: give the command that runs a MongoDB, or leave the flag out")
		return 2
	}
	if *retention < 0 {
		fmt.Fprintf(stderr, "shoal torture: --tombstone-retention %s: use a positive duration, or 0 for the nodes' default\n", *retention)
		return 2
	}
	if *network != torture.NetAuto && *network != torture.NetNetns && *network != torture.NetLoopback {
		fmt.Fprintf(stderr, "shoal torture: --network %q: use auto, netns or loopback\n", *network)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var sum torture.Summary
	for i := 0; i < *runs; i++ {
		s := *seed + uint64(i)
		d := *dir
		if d != "" && *runs > 1 {
			d = filepath.Join(d, fmt.Sprintf("seed-%d", s))
		}
		if *runs > 1 {
			fmt.Fprintf(stdout, "\n=== run %d of %d\n", i+1, *runs)
		}
		fmt.Fprintf(stdout, "shoal torture: seed %d (repeat with --seed %d)\n", s, s)
		rep, err := torture.Run(ctx, torture.Config{Binary: *binary, Env: tortureEnv, Nodes: *nodes, ReplicationFactor: *rf, Duration: *duration, Seed: s,
			Clients: *clients, Dir: d, Keep: *keep, KeepOutage: *keepOutage, Log: stdout, Network: *network, LogLevel: *logLevel,
			Mongo: torture.MongoOptions{Command: strings.Fields(*mongoCommand)}, TombstoneRetention: *retention})
		if rep != nil && rep.History != nil {
			fmt.Fprint(stdout, "\n"+rep.Table())
		}
		if err != nil && *keepGoing && ctx.Err() == nil {
			fmt.Fprintf(stderr, "shoal torture: seed %d could not be run: %v\n", s, err)
			sum.Add(&torture.Report{Seed: s, Problems: []string{err.Error()}})
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "shoal torture: seed %d: %v\n", s, err)
			if rep != nil && rep.Kept {
				fmt.Fprintf(stderr, "shoal torture: the nodes' logs are in %s\n", rep.Dir)
			}
			if sum.Runs > 0 {
				fmt.Fprintf(stdout, "\n=== summary of the %d runs before (seeds %d to %d)\n%s", sum.Runs, *seed, *seed+uint64(sum.Runs)-1, sum.Table())
			}
			return 1
		}
		sum.Add(rep)
		if rep.Failed() && !*keepGoing {
			break
		}
	}
	if *runs > 1 {
		fmt.Fprintf(stdout, "\n=== summary of %d runs (seeds %d to %d)\n%s", sum.Runs, *seed, *seed+uint64(sum.Runs)-1, sum.Table())
	}
	if len(sum.Failed) > 0 {
		return 1
	}
	return 0
}

// tortureEnv is added to the nodes' environment (a test binary that
// doubles as shoal sets its switch here).
var tortureEnv []string

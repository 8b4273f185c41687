package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/internal/torture"
)

// torture runs the fault suite against a cluster of this binary's nodes.
func tortureCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("torture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "number of nodes (all voters, REPLICATION_FACTOR 3)")
	duration := fs.Duration("duration", 2*time.Minute, "how long faults are injected for; healing and checking follow")
	seed := fs.Uint64("seed", 0, "seed of the fault schedule (0: one from the clock, printed); the same seed gives the same schedule")
	clients := fs.Int("clients", 8, "register clients; w=1 writers and list appenders are half as many each")
	keep := fs.Bool("keep", false, "keep the nodes' logs and data directories (a failing run always keeps them)")
	binary := fs.String("binary", "", "the shoal binary the nodes run (default: this executable)")
	dir := fs.String("dir", "", "directory for the nodes' data and logs (default: a new temporary directory)")
	network := fs.String("network", torture.NetAuto, "loopback (every node on 127.0.0.1), netns (a network namespace per node, which adds link cuts; needs root and iproute2) or auto (netns when it can)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal torture [--nodes 3] [--duration 2m] [--seed N] [--clients 8] [--keep] [--binary PATH] [--dir DIR] [--network auto|netns|loopback]")
		fmt.Fprintln(stderr, "Runs a fault suite: starts --nodes `shoal serve` processes of --binary (it builds nothing),")
		fmt.Fprintln(stderr, "clients doing majority puts, compare-and-sets after linearizable reads and linearizable reads of registers,")
		fmt.Fprintln(stderr, "w=1 writes of keys written once, and majority appends to per-user lists, while a nemesis injects one fault at")
		fmt.Fprintln(stderr, "a time on a schedule derived from --seed: kill -9 and restart of the registers' master, of one of its replicas,")
		fmt.Fprintln(stderr, "or of every node at once, and SIGSTOP/SIGCONT of the master for longer than LEASE_TTL; with --network netns also")
		fmt.Fprintln(stderr, "link cuts between nodes (clients still reach every node): the master isolated from the other nodes, a replica")
		fmt.Fprintln(stderr, "isolated, and a bridge (two sides that do not reach each other, one node that reaches both). Then it heals and checks:")
		fmt.Fprintln(stderr, "linearizability per register (porcupine), no acknowledged majority write lost, every acknowledged w=1 write")
		fmt.Fprintln(stderr, "present or in a rollback collection, replicas converged to their master, and the longest write outage per")
		fmt.Fprintln(stderr, "fault kind. It prints a table and exits 0 if every check passed, 1 if one failed (logs and porcupine's")
		fmt.Fprintln(stderr, "visualization are kept; the table says where), 2 on a usage error.")
		fs.PrintDefaults()
	}
	if code, done := parseArgs(fs, args, stderr, 2); done {
		return code
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
	if *network != torture.NetAuto && *network != torture.NetNetns && *network != torture.NetLoopback {
		fmt.Fprintf(stderr, "shoal torture: --network %q: use auto, netns or loopback\n", *network)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "shoal torture: seed %d (repeat with --seed %d)\n", *seed, *seed)
	rep, err := torture.Run(ctx, torture.Config{Binary: *binary, Env: tortureEnv, Nodes: *nodes, Duration: *duration, Seed: *seed,
		Clients: *clients, Dir: *dir, Keep: *keep, Log: stdout, Network: *network})
	if rep != nil && rep.History != nil {
		fmt.Fprint(stdout, "\n"+rep.Table())
	}
	if err != nil {
		fmt.Fprintf(stderr, "shoal torture: %v\n", err)
		if rep != nil && rep.Kept {
			fmt.Fprintf(stderr, "shoal torture: the nodes' logs are in %s\n", rep.Dir)
		}
		return 1
	}
	if rep.Failed() {
		return 1
	}
	return 0
}

// tortureEnv is added to the nodes' environment (a test binary that
// doubles as shoal sets its switch here).
var tortureEnv []string

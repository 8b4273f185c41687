package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/devcluster"
)

// dev is `shoal dev`: it parses the flags and runs the cluster with
// internal/devcluster.
func dev(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "add-node":
			return devAddNode(args[1:], stdout, stderr)
		case "remove-node":
			return devRemoveNode(args[1:], stdout, stderr)
		}
	}
	fset := flag.NewFlagSet("dev", flag.ContinueOnError)
	fset.SetOutput(stderr)
	nodes := fset.Int("nodes", 3, "number of nodes (when DIR/peers.json exists with another count and --nodes is not given, the file wins)")
	dir := fset.String("dir", devcluster.DefaultDir, "directory for the cluster: peers.json, secrets.env, admin.token and one data directory per node")
	httpPort := fset.Int("http-port", 8081, "HTTP port of node1; node i listens on http-port+i-1 on 127.0.0.1")
	gossipPort := fset.Int("gossip-port", 7947, "gossip port (TCP and UDP) of node1; node i gossips on gossip-port+i-1 on 127.0.0.1")
	useTLS := fset.Bool("tls", false, "serve HTTPS: a development CA and node certificates in DIR/certs, nodes requiring each other's certificates (a DIR whose peers.json lists https urls is TLS without it)")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal dev [--nodes 3] [--dir .shoal-dev] [--http-port 8081] [--gossip-port 7947] [--tls]")
		fmt.Fprintln(stderr, "       shoal dev add-node [--dir .shoal-dev]")
		fmt.Fprintln(stderr, "       shoal dev remove-node ID [--dir .shoal-dev]")
		fmt.Fprintln(stderr, "Runs a local cluster of nodes on loopback as child processes until Ctrl-C, printing their logs")
		fmt.Fprintln(stderr, "prefixed with the node id. It starts a node for every loopback peer added to DIR/peers.json")
		fmt.Fprintln(stderr, "while it runs; `shoal dev add-node` adds one. `shoal dev remove-node ID` takes one out of the list:")
		fmt.Fprintln(stderr, "the node keeps running while it drains (hands its partitions and copies over) and is stopped once")
		fmt.Fprintln(stderr, "it holds nothing. Its data stays in DIR/ID; it does not start again unless it is listed again.")
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal dev: unexpected argument %q (did you mean `shoal dev add-node` or `shoal dev remove-node ID`?)\n", fset.Arg(0))
		return 2
	}
	set := map[string]bool{}
	fset.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := devcluster.CheckFlags(*nodes, *httpPort, *gossipPort); err != nil {
		fmt.Fprintf(stderr, "shoal dev: %v\n", err)
		return 2
	}
	setup, err := devcluster.Prepare(*dir, *nodes, *httpPort, *gossipPort, !set["nodes"], *useTLS)
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev: %v\n", err)
		return 1
	}
	if setup.Reused && (set["http-port"] || set["gossip-port"]) {
		setup.Notes = append(setup.Notes, "--http-port and --gossip-port do not apply: the ports come from "+setup.PeersPath+
			" (delete it, or pass another --nodes, to have it written anew)")
	}
	local, skipped := devcluster.LocalNodes(setup.List)
	if len(local) == 0 {
		fmt.Fprintf(stderr, "shoal dev: no peer in %s is on loopback, so there is nothing to start\n", setup.PeersPath)
		return 1
	}
	if err := devcluster.CheckPortsFree(local); err != nil {
		fmt.Fprintf(stderr, "shoal dev: %v; is another `shoal dev` running? Stop it, or choose other ports with --http-port and --gossip-port (or edit %s)\n",
			err, setup.PeersPath)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev: cannot find the shoal binary to run the nodes with: %v\n", err)
		return 1
	}
	starter := devcluster.NewExecStarter(exe)
	defer starter.Close()
	s := devcluster.NewSupervisor(setup, starter, devClusterAsker(setup.AdminToken, setup.Transport), stdout)
	for _, n := range setup.Notes {
		s.Logf("%s", n)
	}
	for _, n := range skipped {
		s.Logf("%s", n)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return s.Run(local, sigs)
}

// devClusterAsker asks a node for GET /v1/cluster the way `shoal status`
// does, with the admin token, and turns a failure into a few words.
func devClusterAsker(token string, transport http.RoundTripper) devcluster.AskCluster {
	const timeout = 2 * time.Second
	hc := &http.Client{Transport: transport}
	return func(ctx context.Context, base string) (api.ClusterAnswer, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		st, err := client.New(base, token, client.WithHTTPClient(hc)).Cluster(ctx)
		if err != nil {
			return api.ClusterAnswer{}, errors.New(shortFetchError(err, timeout))
		}
		return st.ClusterAnswer, nil
	}
}

func devAddNode(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("dev add-node", flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("dir", devcluster.DefaultDir, "directory of the shoal dev cluster")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal dev add-node [--dir .shoal-dev]")
		fmt.Fprintln(stderr, "Appends node<N+1> on the next free loopback ports to DIR/peers.json (sharding and replica, not a")
		fmt.Fprintln(stderr, "voter). A running `shoal dev --dir DIR` starts it; the other nodes read the new list and let it join.")
		fset.PrintDefaults()
	}
	if code, done := parseArgs(fset, args, stderr, 2); done {
		return code
	}
	p, path, err := devcluster.AddNode(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev add-node: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "added %s to %s: url %s, gossip %s, sharding and replica, not a voter\n", p.ID, path, p.URL, p.Gossip)
	fmt.Fprintf(stdout, "a running `shoal dev --dir %s` starts it within a second; the nodes read the new list within PEERS_REFRESH (%s)\n",
		devcluster.ShellQuote(filepath.Dir(path)), devcluster.PeersRefresh)
	return 0
}

func devRemoveNode(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("dev remove-node", flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("dir", devcluster.DefaultDir, "directory of the shoal dev cluster")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal dev remove-node ID [--dir .shoal-dev]")
		fmt.Fprintln(stderr, "Removes the peer ID from DIR/peers.json. The node keeps running and drains: it hands the")
		fmt.Fprintln(stderr, "partitions it masters to their new masters and its copies are made again elsewhere; a running")
		fmt.Fprintln(stderr, "`shoal dev --dir DIR` stops it once it holds nothing. Its data stays in DIR/ID, and it does not")
		fmt.Fprintln(stderr, "start again while it is not in the peer list. Refuses the last sharding peer and the last voter.")
		fset.PrintDefaults()
	}
	// Flags may come before or after the id.
	var ids []string
	rest := args
	for {
		if err := fset.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fset.NArg() == 0 {
			break
		}
		ids = append(ids, fset.Arg(0))
		rest = fset.Args()[1:]
	}
	switch {
	case len(ids) == 0:
		fmt.Fprintln(stderr, "shoal dev remove-node: name the node to remove: shoal dev remove-node ID [--dir DIR] (`shoal status` lists the ids)")
		return 2
	case len(ids) > 1:
		fmt.Fprintf(stderr, "shoal dev remove-node: unexpected argument %q: remove one node at a time\n", ids[1])
		return 2
	}
	p, path, err := devcluster.RemoveNode(*dir, ids[0])
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev remove-node: %v\n", err)
		return 1
	}
	abs := filepath.Dir(path)
	if p.Voter {
		fmt.Fprintf(stderr, "warning: %s was a lease voter: the voter set changes one member at a time; wait until `shoal status` "+
			"no longer shows \"Voter change in progress\" before you add or remove another voter\n", p.ID)
	}
	fmt.Fprintf(stdout, "removed %s from %s\n", p.ID, path)
	fmt.Fprintf(stdout, "a running `shoal dev --dir %s` keeps %s running while it hands its partitions and copies over, and stops it\n"+
		"once it holds nothing; follow it with `shoal status --dir %s`\n", devcluster.ShellQuote(abs), p.ID, devcluster.ShellQuote(abs))
	fmt.Fprintf(stdout, "its data stays in %s; it does not start again unless its entry is back in the peer list\n", filepath.Join(abs, p.ID))
	return 0
}

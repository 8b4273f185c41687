package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
)

const (
	devDefaultDir    = ".shoal-dev"
	devMaxNodes      = 50
	devVoters        = 3
	devTokenTTL      = 30 * 24 * time.Hour
	devAudience      = "shoal"
	devUser          = "alice"
	devPeersRefresh  = "2s"
	devReadyTimeout  = 60 * time.Second
	devStopTimeout   = 20 * time.Second
	devWatchInterval = time.Second
	devTailLines     = 20
	devMaxLineBytes  = 64 << 10
	devDrainLogEvery = 10 * time.Second
)

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
	dir := fset.String("dir", devDefaultDir, "directory for the cluster: peers.json, secrets.env, admin.token and one data directory per node")
	httpPort := fset.Int("http-port", 8081, "HTTP port of node1; node i listens on http-port+i-1 on 127.0.0.1")
	gossipPort := fset.Int("gossip-port", 7947, "gossip port (TCP and UDP) of node1; node i gossips on gossip-port+i-1 on 127.0.0.1")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal dev [--nodes 3] [--dir .shoal-dev] [--http-port 8081] [--gossip-port 7947]")
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
	if err := validDevFlags(*nodes, *httpPort, *gossipPort); err != nil {
		fmt.Fprintf(stderr, "shoal dev: %v\n", err)
		return 2
	}
	setup, err := prepareDevDir(*dir, *nodes, *httpPort, *gossipPort, !set["nodes"])
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev: %v\n", err)
		return 1
	}
	if setup.reused && (set["http-port"] || set["gossip-port"]) {
		setup.notes = append(setup.notes, "--http-port and --gossip-port do not apply: the ports come from "+setup.peersPath+
			" (delete it, or pass another --nodes, to have it written anew)")
	}
	local, skipped := devLocalNodes(setup.list)
	if len(local) == 0 {
		fmt.Fprintf(stderr, "shoal dev: no peer in %s is on loopback, so there is nothing to start\n", setup.peersPath)
		return 1
	}
	if err := checkDevPortsFree(local); err != nil {
		fmt.Fprintf(stderr, "shoal dev: %v; is another `shoal dev` running? Stop it, or choose other ports with --http-port and --gossip-port (or edit %s)\n",
			err, setup.peersPath)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev: cannot find the shoal binary to run the nodes with: %v\n", err)
		return 1
	}
	s := newSupervisor(setup, exe, stdout)
	for _, n := range setup.notes {
		s.logf("%s", n)
	}
	for _, n := range skipped {
		s.logf("%s", n)
	}
	return s.run(local)
}

func validDevFlags(nodes, httpPort, gossipPort int) error {
	switch {
	case nodes < 1 || nodes > devMaxNodes:
		return fmt.Errorf("--nodes %d: use 1..%d", nodes, devMaxNodes)
	case httpPort < 1 || httpPort+nodes-1 > 65535:
		return fmt.Errorf("--http-port %d: ports %d..%d must be within 1..65535", httpPort, httpPort, httpPort+nodes-1)
	case gossipPort < 1 || gossipPort+nodes-1 > 65535:
		return fmt.Errorf("--gossip-port %d: ports %d..%d must be within 1..65535", gossipPort, gossipPort, gossipPort+nodes-1)
	case httpPort < gossipPort+nodes && gossipPort < httpPort+nodes:
		return fmt.Errorf("--http-port %d and --gossip-port %d overlap for %d nodes: HTTP and gossip both use TCP, so their port ranges must be apart",
			httpPort, gossipPort, nodes)
	}
	return nil
}

// devSetup is what `shoal dev` prepared in its directory.
type devSetup struct {
	dir, peersPath string
	secrets        devSecrets
	list           cluster.PeerList
	peersData      []byte   // the peer list file as the nodes start with it
	notes          []string // what was created or reused, for the log
	reused         bool     // peers.json existed and is used as it is
	adminToken     string
	userTokenPath  string
}

// prepareDevDir creates dir (made absolute) with its secrets, peer list and
// tokens. An existing peers.json is kept as it is when it has nodes peers,
// or whatever its count when keepAnyCount (--nodes not given).
func prepareDevDir(dir string, nodes, httpPort, gossipPort int, keepAnyCount bool) (devSetup, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return devSetup{}, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return devSetup{}, fmt.Errorf("creating the cluster directory: %w", err)
	}
	s := devSetup{dir: abs, peersPath: filepath.Join(abs, "peers.json")}
	var created bool
	if s.secrets, created, err = loadOrCreateSecrets(filepath.Join(abs, "secrets.env")); err != nil {
		return devSetup{}, err
	}
	if created {
		s.notes = append(s.notes, "generated AUTH_SECRET and CLUSTER_SECRET in "+filepath.Join(abs, "secrets.env")+" (kept for the next runs)")
	}
	data, err := os.ReadFile(s.peersPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.notes = append(s.notes, "wrote the peer list "+s.peersPath)
	case err != nil:
		return devSetup{}, fmt.Errorf("reading the peer list: %w", err)
	default:
		list, perr := cluster.ParsePeerList(data, "")
		if perr != nil {
			return devSetup{}, fmt.Errorf("%s is not a valid peer list: %v; fix it, or delete it to have `shoal dev` write a new one", s.peersPath, perr)
		}
		if len(list.Peers) == nodes || keepAnyCount {
			s.list, s.peersData, s.reused = list, data, true
			s.notes = append(s.notes, fmt.Sprintf("using the peer list %s as it is (%s)", s.peersPath, plural(len(list.Peers), "peer")))
		} else {
			s.notes = append(s.notes, fmt.Sprintf("replaced the peer list %s: it had %s and --nodes asks for %d",
				s.peersPath, plural(len(list.Peers), "peer"), nodes))
		}
	}
	if s.peersData == nil {
		s.list = devPeerList(nodes, httpPort, gossipPort)
		s.peersData = formatPeerList(s.list)
		if err := writeFileAtomic(s.peersPath, s.peersData, 0o644); err != nil {
			return devSetup{}, fmt.Errorf("writing the peer list: %w", err)
		}
	}
	secret := []byte(s.secrets.auth)
	if s.adminToken, err = api.MintToken(secret, api.TokenSpec{Admin: true, Audience: devAudience, TTL: devTokenTTL}); err != nil {
		return devSetup{}, err
	}
	if err := writeFileAtomic(filepath.Join(abs, "admin.token"), []byte(s.adminToken+"\n"), 0o600); err != nil {
		return devSetup{}, fmt.Errorf("writing the admin token: %w", err)
	}
	userToken, err := api.MintToken(secret, api.TokenSpec{User: devUser, Audience: devAudience, TTL: devTokenTTL})
	if err != nil {
		return devSetup{}, err
	}
	s.userTokenPath = filepath.Join(abs, devUser+".token")
	if err := writeFileAtomic(s.userTokenPath, []byte(userToken+"\n"), 0o600); err != nil {
		return devSetup{}, fmt.Errorf("writing the user token: %w", err)
	}
	return s, nil
}

// devSecrets are the cluster's shared secrets, kept in DIR/secrets.env.
type devSecrets struct {
	auth, cluster string
}

// loadOrCreateSecrets reads path, or creates it (mode 0600) with new random
// secrets; created says which.
func loadOrCreateSecrets(path string) (devSecrets, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		s := devSecrets{auth: randomHex(32), cluster: randomHex(32)}
		content := "# Secrets of the `shoal dev` cluster in this directory; keep them private.\n" +
			"AUTH_SECRET=" + s.auth + "\nCLUSTER_SECRET=" + s.cluster + "\n"
		if err := writeFileAtomic(path, []byte(content), 0o600); err != nil {
			return devSecrets{}, false, fmt.Errorf("writing the secrets: %w", err)
		}
		return s, true, nil
	}
	if err != nil {
		return devSecrets{}, false, fmt.Errorf("reading the secrets: %w", err)
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return devSecrets{}, false, fmt.Errorf("%s: line %q is not KEY=VALUE; fix it, or delete the file to generate new secrets", path, line)
		}
		vals[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	s := devSecrets{auth: vals["AUTH_SECRET"], cluster: vals["CLUSTER_SECRET"]}
	for k, v := range map[string]string{"AUTH_SECRET": s.auth, "CLUSTER_SECRET": s.cluster} {
		if len(v) < 16 {
			return devSecrets{}, false, fmt.Errorf("%s: %s is missing or shorter than 16 bytes; fix it, or delete the file to generate new secrets", path, k)
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
		if err := os.Chmod(path, 0o600); err != nil {
			return devSecrets{}, false, fmt.Errorf("making %s private: %w", path, err)
		}
	}
	return s, false, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it over path, so a reader sees the old or the new content, never a part.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// devPeerList is the peer list of n nodes on loopback: every node shards
// and replicates, the first three vote.
func devPeerList(n, httpPort, gossipPort int) cluster.PeerList {
	var l cluster.PeerList
	for i := 1; i <= n; i++ {
		l.Peers = append(l.Peers, cluster.Peer{
			ID:       "node" + strconv.Itoa(i),
			URL:      "http://127.0.0.1:" + strconv.Itoa(httpPort+i-1),
			Gossip:   "127.0.0.1:" + strconv.Itoa(gossipPort+i-1),
			Sharding: true, Replica: true, Voter: i <= devVoters,
		})
	}
	return l
}

// formatPeerList writes a peer list with one peer per line, in natural id
// order, for people to read and edit.
func formatPeerList(l cluster.PeerList) []byte {
	peers := slices.Clone(l.Peers)
	slices.SortStableFunc(peers, func(a, b cluster.Peer) int {
		switch {
		case naturalLess(a.ID, b.ID):
			return -1
		case naturalLess(b.ID, a.ID):
			return 1
		}
		return 0
	})
	var b bytes.Buffer
	b.WriteString("{\n  \"peers\": [\n")
	for i, p := range peers {
		line, err := json.Marshal(p)
		if err != nil {
			panic(err) // a Peer is strings and booleans
		}
		b.WriteString("    ")
		b.Write(line)
		if i < len(peers)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// devNode is a peer `shoal dev` runs as a child process.
type devNode struct {
	cluster.Peer
	HTTPAddr string
}

// devNodeFor says how to run p on this machine, or why it cannot be: only
// peers whose url and gossip addresses are on loopback are run.
func devNodeFor(p cluster.Peer) (devNode, error) {
	rest, ok := strings.CutPrefix(p.URL, "http://")
	if !ok {
		return devNode{}, fmt.Errorf("its url %s is not http://", p.URL)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return devNode{}, fmt.Errorf("its url %s has no port", p.URL)
	}
	if !isLoopbackHost(host) {
		return devNode{}, fmt.Errorf("its url %s is not on loopback", p.URL)
	}
	ghost, _, err := net.SplitHostPort(p.Gossip)
	if err != nil || !isLoopbackHost(ghost) {
		return devNode{}, fmt.Errorf("its gossip address %s is not on loopback", p.Gossip)
	}
	return devNode{Peer: p, HTTPAddr: net.JoinHostPort(host, port)}, nil
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// devLocalNodes splits a peer list into the nodes to run here and notes
// about the others.
func devLocalNodes(l cluster.PeerList) (local []devNode, skipped []string) {
	for _, p := range l.Peers {
		n, err := devNodeFor(p)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("not starting %s: %v; start it yourself", p.ID, err))
			continue
		}
		local = append(local, n)
	}
	slices.SortStableFunc(local, func(a, b devNode) int {
		if naturalLess(a.ID, b.ID) {
			return -1
		}
		if naturalLess(b.ID, a.ID) {
			return 1
		}
		return 0
	})
	return local, skipped
}

// checkDevPortsFree checks that every node's HTTP port (TCP) and gossip port
// (TCP and UDP) can be bound.
func checkDevPortsFree(nodes []devNode) error {
	for _, n := range nodes {
		if err := tcpFree(n.HTTPAddr); err != nil {
			return fmt.Errorf("%s's HTTP address %s is in use (%v)", n.ID, n.HTTPAddr, err)
		}
		if err := tcpFree(n.Gossip); err != nil {
			return fmt.Errorf("%s's gossip address %s is in use over TCP (%v)", n.ID, n.Gossip, err)
		}
		if err := udpFree(n.Gossip); err != nil {
			return fmt.Errorf("%s's gossip address %s is in use over UDP (%v)", n.ID, n.Gossip, err)
		}
	}
	return nil
}

func tcpFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

func udpFree(addr string) error {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// peerDiff is how a peer list changed.
type peerDiff struct {
	Added, Removed, Changed []cluster.Peer // Changed holds the new entries
}

// diffPeerLists compares two peer lists by id.
func diffPeerLists(old, cur cluster.PeerList) peerDiff {
	var d peerDiff
	for _, p := range cur.Peers {
		o, ok := old.Get(p.ID)
		switch {
		case !ok:
			d.Added = append(d.Added, p)
		case o != p:
			d.Changed = append(d.Changed, p)
		}
	}
	for _, o := range old.Peers {
		if _, ok := cur.Get(o.ID); !ok {
			d.Removed = append(d.Removed, o)
		}
	}
	return d
}

// nextDevPeer is the peer `shoal dev add-node` appends: the next free
// node<N> id, and the ports one past the highest HTTP and gossip ports in
// use (skipping any port the list uses for the other purpose).
func nextDevPeer(l cluster.PeerList) (cluster.Peer, error) {
	n := len(l.Peers) + 1
	for {
		if _, taken := l.Get("node" + strconv.Itoa(n)); !taken {
			break
		}
		n++
	}
	used := map[int]bool{}
	maxHTTP, maxGossip := 0, 0
	for _, p := range l.Peers {
		if _, port, err := urlHostPort(p.URL); err == nil {
			used[port] = true
			maxHTTP = max(maxHTTP, port)
		}
		if _, ps, err := net.SplitHostPort(p.Gossip); err == nil {
			if port, err := strconv.Atoi(ps); err == nil {
				used[port] = true
				maxGossip = max(maxGossip, port)
			}
		}
	}
	if maxHTTP == 0 { // no port to follow: start at the defaults of `shoal dev`
		maxHTTP = 8080
	}
	if maxGossip == 0 {
		maxGossip = 7946
	}
	next := func(from int) int {
		for used[from] {
			from++
		}
		used[from] = true
		return from
	}
	h := next(maxHTTP + 1)
	g := next(maxGossip + 1)
	if h > 65535 || g > 65535 {
		return cluster.Peer{}, fmt.Errorf("no free port above the highest in the peer list (HTTP %d, gossip %d)", h, g)
	}
	return cluster.Peer{
		ID:       "node" + strconv.Itoa(n),
		URL:      "http://127.0.0.1:" + strconv.Itoa(h),
		Gossip:   "127.0.0.1:" + strconv.Itoa(g),
		Sharding: true, Replica: true, Voter: false,
	}, nil
}

// urlHostPort splits a peer's base URL into host and port (the scheme's
// default port when there is none).
func urlHostPort(u string) (string, int, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "", 0, fmt.Errorf("url %s has no scheme", u)
	}
	host, ps, err := net.SplitHostPort(rest)
	if err != nil {
		switch scheme {
		case "http":
			return rest, 80, nil
		case "https":
			return rest, 443, nil
		}
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, fmt.Errorf("url %s has a bad port", u)
	}
	return host, port, nil
}

func devAddNode(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("dev add-node", flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("dir", devDefaultDir, "directory of the shoal dev cluster")
	fset.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal dev add-node [--dir .shoal-dev]")
		fmt.Fprintln(stderr, "Appends node<N+1> on the next free loopback ports to DIR/peers.json (sharding and replica, not a")
		fmt.Fprintln(stderr, "voter). A running `shoal dev --dir DIR` starts it; the other nodes read the new list and let it join.")
		fset.PrintDefaults()
	}
	if code, done := parseArgs(fset, args, stderr, 2); done {
		return code
	}
	p, path, err := addDevNode(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "shoal dev add-node: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "added %s to %s: url %s, gossip %s, sharding and replica, not a voter\n", p.ID, path, p.URL, p.Gossip)
	fmt.Fprintf(stdout, "a running `shoal dev --dir %s` starts it within a second; the nodes read the new list within PEERS_REFRESH (%s)\n",
		shellQuote(filepath.Dir(path)), devPeersRefresh)
	return 0
}

// addDevNode appends the next node to DIR/peers.json, replacing the file
// atomically, and returns the new peer and the file's path.
func addDevNode(dir string) (cluster.Peer, string, error) {
	list, path, mode, err := readDevPeerList(dir)
	if err != nil {
		return cluster.Peer{}, "", err
	}
	p, err := nextDevPeer(list)
	if err != nil {
		return cluster.Peer{}, "", err
	}
	list.Peers = append(list.Peers, p)
	return p, path, writeDevPeerList(path, list, mode)
}

// readDevPeerList reads DIR/peers.json, and returns it with its path and
// file mode.
func readDevPeerList(dir string) (cluster.PeerList, string, os.FileMode, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return cluster.PeerList{}, "", 0, err
	}
	path := filepath.Join(abs, "peers.json")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cluster.PeerList{}, path, 0, fmt.Errorf("there is no peer list at %s: start `shoal dev --dir %s` first", path, shellQuote(abs))
	}
	if err != nil {
		return cluster.PeerList{}, path, 0, err
	}
	data, err := cluster.FetchPeerList(context.Background(), path, http.DefaultClient)
	if err != nil {
		return cluster.PeerList{}, path, 0, err
	}
	list, err := cluster.ParsePeerList(data, "")
	if err != nil {
		return cluster.PeerList{}, path, 0, fmt.Errorf("%s is not a valid peer list (%v): fix it first", path, err)
	}
	return list, path, fi.Mode().Perm(), nil
}

// writeDevPeerList replaces the file path with list, atomically, once the
// node's loader accepts it.
func writeDevPeerList(path string, list cluster.PeerList, mode os.FileMode) error {
	out := formatPeerList(list)
	if _, err := cluster.ParsePeerList(out, ""); err != nil {
		return fmt.Errorf("the new peer list would not be valid: %v", err)
	}
	if err := writeFileAtomic(path, out, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func devRemoveNode(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("dev remove-node", flag.ContinueOnError)
	fset.SetOutput(stderr)
	dir := fset.String("dir", devDefaultDir, "directory of the shoal dev cluster")
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
	p, path, err := removeDevNode(*dir, ids[0])
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
		"once it holds nothing; follow it with `shoal status --dir %s`\n", shellQuote(abs), p.ID, shellQuote(abs))
	fmt.Fprintf(stdout, "its data stays in %s; it does not start again unless its entry is back in the peer list\n", filepath.Join(abs, p.ID))
	return 0
}

// removeDevNode removes the peer id from DIR/peers.json, replacing the file
// atomically, and returns the removed peer and the file's path. It refuses
// an unknown id, the last sharding peer and the last voter.
func removeDevNode(dir, id string) (cluster.Peer, string, error) {
	list, path, mode, err := readDevPeerList(dir)
	if err != nil {
		return cluster.Peer{}, "", err
	}
	p, ok := list.Get(id)
	if !ok {
		return cluster.Peer{}, "", fmt.Errorf("%s has no peer %q; its peers are %s", path, id, strings.Join(devIDs(list), ", "))
	}
	var rest cluster.PeerList
	sharding, voters := 0, 0
	for _, o := range list.Peers {
		if o.ID == id {
			continue
		}
		rest.Peers = append(rest.Peers, o)
		if o.Sharding {
			sharding++
		}
		if o.Voter {
			voters++
		}
	}
	switch {
	case p.Sharding && sharding == 0:
		return cluster.Peer{}, "", fmt.Errorf("%s is the last sharding peer: its partitions would have nowhere to go; add a node first (`shoal dev add-node`)", id)
	case p.Voter && voters == 0:
		return cluster.Peer{}, "", fmt.Errorf("%s is the last lease voter: without one no master can be elected; make another peer a voter first "+
			"(\"voter\": true in %s) and wait until `shoal status` shows the voter change done", id, path)
	}
	if err := writeDevPeerList(path, rest, mode); err != nil {
		return cluster.Peer{}, "", err
	}
	return p, path, nil
}

// devIDs lists a peer list's ids in natural order.
func devIDs(l cluster.PeerList) []string {
	ids := l.IDs()
	slices.SortStableFunc(ids, naturalCmp)
	return ids
}

// devChildEnv is the environment of a node: the parent's, without any key
// Shoal reads (so nothing leaks in from the shell), plus vars.
func devChildEnv(parent []string, vars [][2]string) []string {
	shoalKeys := map[string]bool{}
	for _, k := range config.Keys() {
		shoalKeys[k] = true
	}
	var env []string
	for _, kv := range parent {
		k, _, _ := strings.Cut(kv, "=")
		if !shoalKeys[k] {
			env = append(env, kv)
		}
	}
	for _, v := range vars {
		env = append(env, v[0]+"="+v[1])
	}
	return env
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,@%=", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// --- the supervisor: runs the nodes as child processes ---

// lineOut serialises whole lines onto one writer, so lines of different
// nodes never interleave.
type lineOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *lineOut) write(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	io.WriteString(o.w, text)
}

// tailLines keeps the last lines a node printed, to show when it fails.
type tailLines struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailLines) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > devTailLines {
		t.lines = slices.Delete(t.lines, 0, len(t.lines)-devTailLines)
	}
}

func (t *tailLines) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// prefixWriter is a child's stdout or stderr: it cuts what the child writes
// into lines and writes each whole line with the node's prefix.
type prefixWriter struct {
	mu     sync.Mutex
	out    *lineOut
	prefix string
	tail   *tailLines
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) >= devMaxLineBytes { // a line without end: show it rather than grow
		w.emit(w.buf)
		w.buf = nil
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

// flush writes a last line the child did not end.
func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *prefixWriter) emit(line []byte) {
	s := strings.TrimSuffix(string(line), "\r")
	w.tail.add(s)
	w.out.write(w.prefix + s + "\n")
}

// devChild is one node process.
type devChild struct {
	devNode
	cmd            *exec.Cmd
	pidFile        string
	tail           *tailLines
	stdout, stderr *prefixWriter
	done           chan struct{} // closed once the process has exited and its output is written

	// Touched only by run's goroutine:
	stopDrain func() // ends the watch of its drain, while it is out of the peer list
	drained   bool   // it drained and was sent SIGTERM
}

// exitStatus says how the child ended ("exit status 0", "signal: killed").
func (c *devChild) exitStatus() string {
	if c.cmd.ProcessState == nil {
		return "still running"
	}
	return c.cmd.ProcessState.String()
}

type spawnRequest struct {
	cmd    *exec.Cmd
	result chan error
}

type supervisor struct {
	setup    devSetup
	exe      string
	out      *lineOut
	client   *http.Client
	width    int // of the prefix's id column; fixed, so every goroutine may read it
	spawns   chan spawnRequest
	exits    chan *devChild
	drained  chan *devChild       // a node out of the peer list that holds nothing
	children map[string]*devChild // the latest process of each node id; touched only by run's goroutine
	all      []*devChild          // every process started, in order
	live     int                  // processes whose exit run has not seen yet

	peersData []byte // the peer list content last seen
	peersList cluster.PeerList
	peersErr  string // the last error reading the peer list file, logged once

	readyTimeout, stopTimeout, watchInterval time.Duration
}

func newSupervisor(setup devSetup, exe string, stdout io.Writer) *supervisor {
	width := len("dev")
	for _, p := range setup.list.Peers {
		width = max(width, len(p.ID))
	}
	return &supervisor{
		setup: setup, exe: exe, out: &lineOut{w: stdout}, width: width,
		client:    &http.Client{Timeout: 2 * time.Second},
		spawns:    make(chan spawnRequest),
		exits:     make(chan *devChild),
		drained:   make(chan *devChild),
		children:  map[string]*devChild{},
		peersData: setup.peersData, peersList: setup.list,
		readyTimeout: devReadyTimeout, stopTimeout: devStopTimeout, watchInterval: devWatchInterval,
	}
}

func (s *supervisor) prefix(id string) string { return fmt.Sprintf("%-*s | ", s.width, id) }

func (s *supervisor) logf(format string, args ...any) {
	s.out.write(s.prefix("dev") + fmt.Sprintf(format, args...) + "\n")
}

// spawner starts every child from one goroutine locked to its OS thread:
// Linux sends Pdeathsig when the thread that forked the child exits, and Go
// may end an idle thread, so the forking thread must live as long as the
// children do.
func (s *supervisor) spawner() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for r := range s.spawns {
		r.result <- r.cmd.Start()
	}
}

// run starts the nodes and supervises them until a signal, and returns the
// exit code.
func (s *supervisor) run(nodes []devNode) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go s.spawner()
	defer close(s.spawns)
	ctx, cancel := context.WithCancel(context.Background())
	var waiters sync.WaitGroup
	defer waiters.Wait()
	defer cancel()

	var first []*devChild
	for _, n := range nodes {
		c, err := s.start(n)
		if err != nil {
			s.logf("could not start %s: %v", n.ID, err)
			return s.stop(sigs, 1)
		}
		first = append(first, c)
	}
	ready := make(chan error, 1)
	waiters.Go(func() { ready <- s.waitReady(ctx, first) })
	ticker := time.NewTicker(s.watchInterval)
	defer ticker.Stop()
	for {
		select {
		case sig := <-sigs:
			s.logf("%v: stopping every node", sig)
			cancel()
			return s.stop(sigs, 0)
		case c := <-s.exits:
			s.exited(c)
		case err := <-ready:
			ready = nil
			if err != nil {
				s.reportNotReady(err)
				cancel()
				return s.stop(sigs, 1)
			}
			s.out.write(s.banner(first))
		case c := <-s.drained:
			s.stopDrained(ctx, c, &waiters)
		case <-ticker.C:
			started, removed := s.watchPeerList()
			for _, c := range started {
				waiters.Go(func() {
					err := s.waitReady(ctx, []*devChild{c})
					switch {
					case err == nil:
						s.logf("%s is ready at %s", c.ID, c.URL)
					case ctx.Err() == nil:
						s.reportNotReady(err)
					}
				})
			}
			for _, c := range removed {
				dctx, stop := context.WithCancel(ctx)
				c.stopDrain = stop
				others := s.listedURLs()
				waiters.Go(func() { s.watchDrain(dctx, c, others) })
			}
		}
	}
}

// listedURLs are the urls of the peers in the peer list, in id order.
func (s *supervisor) listedURLs() []string {
	var urls []string
	for _, p := range s.peersList.Peers {
		urls = append(urls, p.URL)
	}
	return urls
}

// watchDrain polls GET /v1/cluster of c, a node out of the peer list, until
// it holds nothing, and then hands it to run's goroutine. When c does not
// answer, the nodes at others are asked about it. Progress is logged every
// devDrainLogEvery.
func (s *supervisor) watchDrain(ctx context.Context, c *devChild, others []string) {
	var logged time.Time
	for {
		done, progress := s.drainState(ctx, c, others)
		if done {
			select {
			case s.drained <- c:
			case <-ctx.Done():
			}
			return
		}
		if now := time.Now(); now.Sub(logged) >= devDrainLogEvery && ctx.Err() == nil {
			logged = now
			s.logf("%s drains: %s", c.ID, progress)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-time.After(s.watchInterval): // polling another process: nothing to wait on
		}
	}
}

// drainState asks c, then (when c does not answer) the nodes at others,
// whether c holds nothing any more, and says how far it is otherwise.
func (s *supervisor) drainState(ctx context.Context, c *devChild, others []string) (bool, string) {
	st, err := s.askCluster(ctx, c.URL)
	if err == nil {
		return drainedIn(st, c.ID)
	}
	progress := fmt.Sprintf("cannot ask it how far it is (%s)", shortFetchError(err, s.client.Timeout))
	for _, u := range others {
		if st, err := s.askCluster(ctx, u); err == nil {
			done, p := drainedIn(st, c.ID)
			if done {
				return true, p
			}
			progress += "; " + st.Node + " says it " + p
		}
	}
	return false, progress
}

func (s *supervisor) askCluster(ctx context.Context, base string) (clusterStatus, error) {
	return fetchClusterStatus(ctx, s.client, base, s.setup.adminToken)
}

// drainedIn reports whether the answer st of GET /v1/cluster shows the node
// id holding nothing: st's partition table gives every partition a master
// (a partition without one may yet need the copy id holds), and in it id
// masters none and holds no copy; when st is id's own answer, nothing moves
// from it either, and no writes of its own wait for a later master's check
// (api.PartitionSummary.Unreconciled). Otherwise it says what id still
// holds.
func drainedIn(st clusterStatus, id string) (bool, string) {
	ps := st.Partitions
	if ps == nil {
		return false, orDash(st.Node) + " gives no partition counts"
	}
	masters, held := ps.Masters[id], ps.Copies[id]
	moving := 0
	if st.Node == id {
		moving = len(st.Moves)
	}
	if done, why := ps.HoldsNothing(id, moving); done {
		return true, why
	}
	progress := fmt.Sprintf("masters %s, holds %s", plural(masters, "partition"), copies(held))
	if n := ps.Unreconciled[id]; n > 0 {
		progress += fmt.Sprintf(", holds writes of its own no later master has checked in %s", plural(n, "partition"))
	}
	if moving > 0 {
		progress += fmt.Sprintf(", %s moving from it", plural(moving, "partition"))
	}
	if ps.WithoutMaster > 0 {
		progress += fmt.Sprintf(" (%d partitions without a master in %s's table)", ps.WithoutMaster, orDash(st.Node))
	}
	return false, progress
}

// stopDrained stops c, out of the peer list and holding nothing, with
// SIGTERM, and SIGKILLs it if it does not stop within the stop timeout.
func (s *supervisor) stopDrained(ctx context.Context, c *devChild, waiters *sync.WaitGroup) {
	if c.stopDrain != nil {
		c.stopDrain()
		c.stopDrain = nil
	}
	if _, listed := s.peersList.Get(c.ID); listed || isDone(c) || s.children[c.ID] != c {
		return
	}
	c.drained = true
	s.logf("%s drained: it masters no partition and holds no copy; stopping it (SIGTERM to pid %d); its data stays in %s",
		c.ID, c.cmd.Process.Pid, filepath.Join(s.setup.dir, c.ID))
	c.cmd.Process.Signal(syscall.SIGTERM)
	waiters.Go(func() {
		select {
		case <-c.done:
		case <-ctx.Done(): // stop() takes over
		case <-time.After(s.stopTimeout):
			s.logf("%s did not stop within %s: killing it (SIGKILL)", c.ID, s.stopTimeout)
			c.cmd.Process.Kill()
		}
	})
}

// start runs node n as a child process.
func (s *supervisor) start(n devNode) (*devChild, error) {
	dataDir := filepath.Join(s.setup.dir, n.ID)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command(s.exe, "serve")
	cmd.Dir = dataDir // no stray .env from the user's working directory is read
	cmd.Env = devChildEnv(os.Environ(), [][2]string{
		{"NODE_ID", n.ID},
		{"HTTP_ADDR", n.HTTPAddr},
		{"GOSSIP_ADDR", n.Gossip},
		{"DATA_DIR", dataDir},
		{"PEERS_ENDPOINT", s.setup.peersPath},
		{"PEERS_REFRESH", devPeersRefresh},
		{"AUTH_SECRET", s.setup.secrets.auth},
		// The dev tokens live 30 days, past TOKEN_MAX_TTL's default.
		{"TOKEN_AUDIENCE", devAudience},
		{"TOKEN_MAX_TTL", devTokenTTL.String()},
		{"CLUSTER_SECRET", s.setup.secrets.cluster},
		{"LOG_LEVEL", "info"},
	})
	// Pdeathsig: the node gets SIGTERM when `shoal dev` dies, even by SIGKILL.
	// Setpgid: a Ctrl-C in the terminal reaches only `shoal dev`, which then
	// stops the nodes itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	tail := &tailLines{}
	c := &devChild{devNode: n, cmd: cmd, tail: tail, done: make(chan struct{}),
		pidFile: filepath.Join(s.setup.dir, n.ID+".pid"),
		stdout:  &prefixWriter{out: s.out, prefix: s.prefix(n.ID), tail: tail},
		stderr:  &prefixWriter{out: s.out, prefix: s.prefix(n.ID), tail: tail},
	}
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	result := make(chan error)
	s.spawns <- spawnRequest{cmd: cmd, result: result}
	if err := <-result; err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		s.logf("could not write %s: %v", c.pidFile, err)
	}
	s.children[n.ID] = c
	s.all = append(s.all, c)
	s.live++
	go func() {
		cmd.Wait()
		c.stdout.flush()
		c.stderr.flush()
		os.Remove(c.pidFile)
		close(c.done)
		s.exits <- c
	}()
	return c, nil
}

// exited handles a child that ended while the cluster runs.
func (s *supervisor) exited(c *devChild) {
	s.live--
	if c.stopDrain != nil {
		c.stopDrain()
		c.stopDrain = nil
	}
	if c.drained {
		s.logf("%s drained and was stopped (%s); it does not start again unless it is back in the peer list", c.ID, c.exitStatus())
		return
	}
	s.logf("%s exited unexpectedly (%s); the other nodes keep running and it is not restarted", c.ID, c.exitStatus())
	if s.running() == 0 {
		s.logf("no node is running any more: press Ctrl-C to quit")
	}
}

func (s *supervisor) running() int {
	n := 0
	for _, c := range s.children {
		select {
		case <-c.done:
		default:
			n++
		}
	}
	return n
}

// notReadyError says which node did not come up.
type notReadyError struct {
	child  *devChild
	reason string
}

func (e *notReadyError) Error() string { return e.child.ID + " " + e.reason }

// waitReady polls /readyz of every child until all answer 200, one exits,
// the ready timeout passes or ctx ends.
func (s *supervisor) waitReady(ctx context.Context, children []*devChild) error {
	deadline := time.Now().Add(s.readyTimeout)
	pending := children
	for {
		var still []*devChild
		for _, c := range pending {
			select {
			case <-c.done:
				return &notReadyError{c, "exited before it was ready (" + c.exitStatus() + ")"}
			default:
			}
			if !s.ready(ctx, c) {
				still = append(still, c)
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		if time.Now().After(deadline) {
			return &notReadyError{pending[0], fmt.Sprintf("did not answer %s/readyz within %s", pending[0].URL, s.readyTimeout)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond): // polling another process: nothing to wait on
		}
	}
}

func (s *supervisor) ready(ctx context.Context, c *devChild) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (s *supervisor) reportNotReady(err error) {
	var nr *notReadyError
	if !errors.As(err, &nr) {
		s.logf("waiting for the nodes: %v", err)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s did not come up: it %s\n", s.prefix("dev"), nr.child.ID, nr.reason)
	lines := nr.child.tail.get()
	if len(lines) == 0 {
		fmt.Fprintf(&b, "%s%s printed nothing\n", s.prefix("dev"), nr.child.ID)
	} else {
		fmt.Fprintf(&b, "%sits last %s:\n", s.prefix("dev"), plural(len(lines), "log line"))
		for _, l := range lines {
			fmt.Fprintf(&b, "%s    %s\n", s.prefix("dev"), l)
		}
	}
	s.out.write(b.String())
}

// watchPeerList re-reads the peer list; it starts a child for each new
// loopback peer and returns them, and returns the running children that
// left the list (they drain: run watches them and stops them once they
// hold nothing).
func (s *supervisor) watchPeerList() (started, removed []*devChild) {
	path := s.setup.peersPath
	data, err := os.ReadFile(path)
	if err != nil {
		if msg := err.Error(); msg != s.peersErr {
			s.peersErr = msg
			s.logf("cannot read the peer list: %v; the nodes keep the last good one", err)
		}
		return nil, nil
	}
	s.peersErr = ""
	if bytes.Equal(data, s.peersData) {
		return nil, nil
	}
	s.peersData = data // an invalid content is reported once, not every second
	list, err := cluster.ParsePeerList(data, "")
	if err != nil {
		s.logf("%s changed but is not a valid peer list: %v; the nodes keep the last good one", path, err)
		return nil, nil
	}
	d := diffPeerLists(s.peersList, list)
	s.peersList = list
	for _, p := range d.Removed {
		c := s.children[p.ID]
		switch {
		case c != nil && !isDone(c) && !c.drained && c.stopDrain == nil:
			s.logf("%s left the peer list: it keeps running while it hands its partitions and copies over, and is stopped once it holds nothing", p.ID)
			removed = append(removed, c)
		case c != nil && !isDone(c):
			s.logf("%s left the peer list", p.ID)
		default:
			s.logf("%s left the peer list; it does not run here", p.ID)
		}
	}
	for _, p := range d.Changed {
		s.logf("%s's entry changed in the peer list (url %s, gossip %s); its process keeps running as it started: restart `shoal dev` to apply it", p.ID, p.URL, p.Gossip)
	}
	for _, p := range d.Added {
		if c := s.children[p.ID]; c != nil && !isDone(c) {
			switch {
			case c.drained:
				s.logf("%s is in the peer list again, but it had drained and is stopping: restart `shoal dev` to run it again", p.ID)
			case c.stopDrain != nil:
				c.stopDrain()
				c.stopDrain = nil
				s.logf("%s is in the peer list again; its process is still running and stays", p.ID)
			default:
				s.logf("%s is in the peer list again; its process is still running", p.ID)
			}
			continue
		}
		n, err := devNodeFor(p)
		if err != nil {
			s.logf("%s joined the peer list but is not started here: %v; start it yourself", p.ID, err)
			continue
		}
		if err := checkDevPortsFree([]devNode{n}); err != nil {
			s.logf("%s joined the peer list but is not started: %v", p.ID, err)
			continue
		}
		s.logf("%s joined the peer list: starting it (HTTP %s, gossip %s, data %s)", p.ID, n.HTTPAddr, n.Gossip, filepath.Join(s.setup.dir, n.ID))
		c, err := s.start(n)
		if err != nil {
			s.logf("could not start %s: %v", p.ID, err)
			continue
		}
		started = append(started, c)
	}
	return started, removed
}

func isDone(c *devChild) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to every running child in id order, waits up to the
// stop timeout (a second signal cuts it short) and then SIGKILLs the rest.
// It returns code, or 1 if any child did not exit 0.
func (s *supervisor) stop(sigs <-chan os.Signal, code int) int {
	var running []*devChild
	for _, c := range s.all {
		if !isDone(c) {
			running = append(running, c)
		}
	}
	slices.SortStableFunc(running, func(a, b *devChild) int {
		if naturalLess(a.ID, b.ID) {
			return -1
		}
		if naturalLess(b.ID, a.ID) {
			return 1
		}
		return 0
	})
	for _, c := range running {
		s.logf("stopping %s (SIGTERM to pid %d)", c.ID, c.cmd.Process.Pid)
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
	timer := time.NewTimer(s.stopTimeout)
	defer timer.Stop()
	killAll := func() {
		for _, c := range s.all {
			if !isDone(c) {
				c.cmd.Process.Kill()
			}
		}
	}
	for s.live > 0 {
		select {
		case c := <-s.exits:
			s.live--
			s.logf("%s stopped (%s)", c.ID, c.exitStatus())
		case <-timer.C:
			s.logf("some nodes did not stop within %s: killing them (SIGKILL)", s.stopTimeout)
			killAll()
		case sig := <-sigs:
			s.logf("%v again: killing every node now (SIGKILL)", sig)
			killAll()
		}
	}
	var failed []string
	for _, c := range s.all {
		if c.cmd.ProcessState.ExitCode() != 0 {
			failed = append(failed, c.ID+" ("+c.exitStatus()+")")
		}
	}
	if len(failed) > 0 {
		s.logf("every node is stopped; not cleanly: %s", strings.Join(failed, ", "))
		return 1
	}
	if code == 0 {
		s.logf("every node stopped cleanly")
	}
	return code
}

// banner tells the user how to reach the cluster once it is up.
func (s *supervisor) banner(nodes []*devChild) string {
	dir := shellQuote(s.setup.dir)
	adminFile := shellQuote(filepath.Join(s.setup.dir, "admin.token"))
	userFile := shellQuote(s.setup.userTokenPath)
	var b strings.Builder
	fmt.Fprintf(&b, "\nShoal dev cluster: %s ready, files in %s\n\n", plural(len(nodes), "node"), s.setup.dir)
	for _, c := range nodes {
		fmt.Fprintf(&b, "  %-*s  %s  gossip %s  roles %s  data %s\n", s.width, c.ID, c.URL, c.Gossip,
			roles(c.Sharding, c.Replica, c.Voter), filepath.Join(s.setup.dir, c.ID))
	}
	u := nodes[0].URL
	fmt.Fprintf(&b, "\n  peer list:   %s (edited or grown, it is picked up within a second)\n", s.setup.peersPath)
	fmt.Fprintf(&b, "  admin token: %s\n", s.setup.adminToken)
	fmt.Fprintf(&b, "               (in %s, valid %s; user %s's token is in %s)\n\n", filepath.Join(s.setup.dir, "admin.token"),
		"30 days", devUser, s.setup.userTokenPath)
	fmt.Fprintf(&b, "Try:\n")
	fmt.Fprintf(&b, "  curl -H \"Authorization: Bearer $(cat %s)\" %s/v1/cluster\n", adminFile, u)
	fmt.Fprintf(&b, "  curl -H \"Authorization: Bearer $(cat %s)\" -X POST %s/v1/users/%s/collections/notes/documents -d '{\"title\":\"hello\"}'\n",
		userFile, u, devUser)
	fmt.Fprintf(&b, "  shoal status --dir %s\n", dir)
	fmt.Fprintf(&b, "  shoal dev add-node --dir %s\n\n", dir)
	fmt.Fprintf(&b, "Ctrl-C stops every node.\n\n")
	return b.String()
}

package torture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/api"
	shoalclient "github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/freeport"
)

// The cluster runner's gossip timing: quick enough that a dead node is
// DOWN within seconds (the README's bounds for these settings).
const (
	gossipInterval = 500 * time.Millisecond
	gossipSuspect  = 2500 * time.Millisecond
)

// ClusterOptions says how to run a cluster of `shoal serve` processes.
type ClusterOptions struct {
	// Binary is the shoal executable; each node runs `Binary serve`.
	Binary string
	// Env is added to every process's environment (a test binary that
	// doubles as shoal needs its switch here).
	Env []string
	// Nodes is how many nodes, all voters, on 127.0.0.1.
	Nodes int
	// Spares is how many more nodes are made ready (ports, data
	// directory) but neither listed in the peer list nor started: a
	// peer-list edit adds them (as sharding replicas, not voters).
	Spares int
	// Settings are KEY=value node settings on top of the runner's own
	// (node id, addresses, data directory, peer list, secrets, gossip
	// timing); they win over the runner's.
	Settings []string
	// Dir holds the peer list, one data directory and one log file per
	// node. Empty: a new temporary directory, which Close removes unless
	// told to keep it.
	Dir string
	// Netns runs every node in a network namespace of its own (Linux,
	// root and iproute2; see Network) instead of on 127.0.0.1, so that
	// links between nodes can be cut.
	Netns bool
	// Mongo, when its Command is set, gives every node a MongoDB of its
	// own (the mongo engine) instead of the embedded store.
	Mongo MongoOptions
}

// MongoOptions says how to run a node's own MongoDB: a process started
// with the cluster, in the node's namespace, that lives through the node's
// kills and restarts (as a mongod beside it would) until the cluster
// closes.
type MongoOptions struct {
	// Command is the program and its arguments; in each, {addr} is
	// replaced by the host:port it must listen on ({host} and {port} by
	// its two parts) and {dir} by a directory for its data.
	Command []string
	// Env is added to its environment.
	Env []string
}

// enabled reports whether the nodes run on MongoDBs of their own.
func (o MongoOptions) enabled() bool { return len(o.Command) > 0 }

// Cluster is a running cluster of `shoal serve` processes.
type Cluster struct {
	// Nodes are every node, the spares last.
	Nodes     []*Node
	Dir       string
	PeersFile string
	// Token is an admin token the nodes accept.
	Token string
	// Net is the namespaced network (nil: the nodes are on 127.0.0.1).
	Net *Network
	// Dial reaches the nodes (from the clients' namespace with Net); HTTP
	// is a client through it with a short timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	HTTP *http.Client

	ownDir bool
	stop   context.CancelFunc
	done   chan struct{}

	listMu sync.Mutex
	peers  []peerEntry // every node's entry, in Nodes' order
	listed map[string]bool
}

type peerEntry struct {
	ID     string `json:"id"`
	URL    string `json:"url"`
	Gossip string `json:"gossip"`
	Voter  bool   `json:"voter"`
}

// Node is one `shoal serve` process of a Cluster, restartable on its data.
type Node struct {
	ID           string
	Host         string // the address it listens on
	HTTP, Gossip int
	DataDir      string
	LogPath      string

	binary string
	env    []string
	hc     *http.Client                           // the cluster's HTTP
	start  func(cmd *exec.Cmd, wait func()) error // starts cmd, then has wait run once it started

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	paused bool

	mongo *mongoProcess // its own MongoDB, or nil on the embedded store
}

// URL is the node's API base URL.
func (n *Node) URL() string { return fmt.Sprintf("http://%s:%d", n.Host, n.HTTP) }

// StartCluster starts the nodes. Every process is killed, and a temporary
// Dir removed, by Close, and the processes also when ctx ends; on error
// nothing is left running.
func StartCluster(ctx context.Context, o ClusterOptions) (c *Cluster, err error) {
	if o.Nodes < 1 {
		return nil, fmt.Errorf("a cluster needs at least one node, not %d", o.Nodes)
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("the shoal binary to run the nodes with: %w", err)
	}
	c = &Cluster{Dir: o.Dir, done: make(chan struct{})}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "shoal-torture-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	} else if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close(false)
			c = nil
		}
	}()
	authSecret, clusterSecret := randomSecret(), randomSecret()
	if c.Token, err = api.MintToken([]byte(authSecret), api.TokenSpec{Admin: true, Audience: config.Defaults().TokenAudience, TTL: 24 * time.Hour}); err != nil {
		return c, err
	}
	c.Dial = (&net.Dialer{}).DialContext
	var ports, mongoPorts []int
	all := o.Nodes + o.Spares
	onMongo := o.Mongo.enabled()
	if o.Netns {
		var ids []string
		for i := 0; i < all; i++ {
			ids = append(ids, fmt.Sprintf("node%d", i+1))
		}
		if c.Net, err = NewNetwork(ids); err != nil {
			return c, err
		}
		c.Dial = c.Net.DialContext
		for range all { // a namespace each: the same ports for all
			ports = append(ports, 8080, 7946)
		}
	} else {
		want := 2 * all
		if onMongo {
			want += all // found at once: separate calls may find a port twice
		}
		if ports, err = freeport.Find(want); err != nil {
			return c, err
		}
		ports, mongoPorts = ports[:2*all], ports[2*all:]
	}
	c.HTTP = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: c.Dial, MaxIdleConnsPerHost: 4}}
	c.PeersFile = filepath.Join(c.Dir, "peers.json")
	c.listed = map[string]bool{}
	for i := 0; i < all; i++ {
		n := &Node{ID: fmt.Sprintf("node%d", i+1), Host: "127.0.0.1", HTTP: ports[2*i], Gossip: ports[2*i+1], binary: o.Binary, hc: c.HTTP, start: startHere}
		if c.Net != nil {
			n.Host, n.start = c.Net.Addr(n.ID), c.Net.starter(n.ID)
		}
		n.DataDir = filepath.Join(c.Dir, n.ID)
		n.LogPath = filepath.Join(c.Dir, n.ID+".log")
		if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
			return c, err
		}
		n.env = append(childEnv(), o.Env...)
		n.env = append(n.env, "NODE_ID="+n.ID, fmt.Sprintf("HTTP_ADDR=%s:%d", n.Host, n.HTTP), fmt.Sprintf("GOSSIP_ADDR=%s:%d", n.Host, n.Gossip),
			"DATA_DIR="+n.DataDir, "PEERS_ENDPOINT="+c.PeersFile, "PEERS_REFRESH=1s", "AUTH_SECRET="+authSecret,
			"CLUSTER_SECRET="+clusterSecret, "GOSSIP_INTERVAL="+gossipInterval.String(), "GOSSIP_SUSPECT_TIMEOUT="+gossipSuspect.String())
		if onMongo {
			n.mongo = &mongoProcess{addr: "127.0.0.1:27017", dir: filepath.Join(c.Dir, n.ID+"-mongo"), logPath: filepath.Join(c.Dir, n.ID+"-mongo.log"), opts: o.Mongo, start: n.start}
			if c.Net == nil {
				n.mongo.addr = fmt.Sprintf("127.0.0.1:%d", mongoPorts[i])
			}
			n.env = append(n.env, "MONGO_URI=mongodb://"+n.mongo.addr+"/", "MONGO_DB=shoal")
		}
		n.env = append(n.env, o.Settings...)
		c.Nodes = append(c.Nodes, n)
		c.peers = append(c.peers, peerEntry{ID: n.ID, URL: n.URL(), Gossip: fmt.Sprintf("%s:%d", n.Host, n.Gossip), Voter: i < o.Nodes})
		c.listed[n.ID] = i < o.Nodes
	}
	if err := c.writePeers(); err != nil {
		return c, err
	}
	if onMongo {
		if err := c.startMongos(ctx); err != nil {
			return c, err
		}
	}
	for _, n := range c.Nodes[:o.Nodes] {
		if err := n.Start(); err != nil {
			return c, err
		}
	}
	var watch context.Context
	watch, c.stop = context.WithCancel(ctx)
	go func() {
		defer close(c.done)
		<-watch.Done()
		c.killAll()
		if c.Net != nil {
			c.Net.Close()
		}
	}()
	return c, nil
}

// writePeers writes the peer list of the listed nodes: to a temporary
// file renamed over it, so that a node never reads half a list.
func (c *Cluster) writePeers() error {
	var doc struct {
		Peers []peerEntry `json:"peers"`
	}
	for _, p := range c.peers {
		if c.listed[p.ID] {
			doc.Peers = append(doc.Peers, p)
		}
	}
	data, _ := json.Marshal(doc)
	tmp := c.PeersFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.PeersFile)
}

// SetListed puts node id into the peer list, or takes it out.
func (c *Cluster) SetListed(id string, listed bool) error {
	c.listMu.Lock()
	defer c.listMu.Unlock()
	if _, err := c.Node(id); err != nil {
		return err
	}
	c.listed[id] = listed
	return c.writePeers()
}

// Listed reports whether node id is in the peer list.
func (c *Cluster) Listed(id string) bool {
	c.listMu.Lock()
	defer c.listMu.Unlock()
	return c.listed[id]
}

// childEnv is this process's environment without any node setting, so
// that none of the caller's settings leaks into the cluster's nodes.
func childEnv() []string {
	keys := map[string]bool{}
	for _, s := range config.Settings {
		keys[s.Key] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !keys[k] {
			env = append(env, kv)
		}
	}
	return env
}

func randomSecret() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Close kills every node and waits for them, deletes the namespaces of
// Net, then removes a temporary Dir unless keep. It may be called more
// than once.
func (c *Cluster) Close(keep bool) error {
	if c.stop != nil {
		c.stop()
		<-c.done
	} else {
		c.killAll()
	}
	var err error
	if c.Net != nil {
		err = c.Net.Close()
	}
	if c.ownDir && !keep {
		os.RemoveAll(c.Dir)
	}
	return err
}

func (c *Cluster) killAll() {
	for _, n := range c.Nodes {
		n.Kill()
	}
	for _, n := range c.Nodes { // after the nodes: none sees its store go
		if n.mongo != nil {
			n.mongo.kill(true)
		}
	}
}

// Start starts the node's process on its data (it must not be running).
// Its output is appended to LogPath.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("%s is already running", n.ID)
	}
	cmd := exec.Command(n.binary, "serve")
	cmd.Env = append(append([]string(nil), n.env...), "COMMIT_LOG="+n.CommitLogPath())
	cmd.Dir = n.DataDir // no stray .env file is read
	exited, err := startLogged(n.start, cmd, n.LogPath, n.ID)
	if err != nil {
		return fmt.Errorf("starting %s: %w", n.ID, err)
	}
	n.cmd, n.exited, n.paused = cmd, exited, false
	return nil
}

// startLogged starts cmd through start (in a namespace, or here), its
// output appended to logPath after a line saying who starts when;
// exited is closed once the process has been waited for.
func startLogged(start func(cmd *exec.Cmd, wait func()) error, cmd *exec.Cmd, logPath, who string) (exited chan struct{}, err error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== torture: %s starting at %s\n", who, time.Now().Format(time.RFC3339Nano))
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	exited = make(chan struct{})
	if err := start(cmd, func() { cmd.Wait(); f.Close(); close(exited) }); err != nil {
		f.Close()
		return nil, err
	}
	return exited, nil
}

// exitedByItself reports whether the node's process, started and not
// stopped by the suite, has exited; if so it is marked stopped.
func (n *Node) exitedByItself() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		n.cmd, n.paused = nil, false
		return true
	default:
		return false
	}
}

// Running reports whether the node's process is running (paused or not).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Kill sends SIGKILL (a paused process dies too) and waits for the exit.
func (n *Node) Kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Kill()
	<-n.exited
	n.cmd, n.paused = nil, false
}

// Stop sends SIGTERM and waits for the exit, for at most timeout; then
// it kills the process.
func (n *Node) Stop(timeout time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	if n.paused {
		n.cmd.Process.Signal(syscall.SIGCONT)
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(timeout):
		n.cmd.Process.Kill()
		<-n.exited
	}
	n.cmd, n.paused = nil, false
}

// Live reports whether the node's process runs and is not paused.
func (n *Node) Live() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.paused
}

// Pause sends SIGSTOP.
func (n *Node) Pause() error { return n.signal(syscall.SIGSTOP, true) }

// Resume sends SIGCONT.
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(s syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", n.ID)
	}
	if err := n.cmd.Process.Signal(s); err != nil {
		return fmt.Errorf("%s: %s: %w", n.ID, s, err)
	}
	n.paused = paused
	return nil
}

// Logs is everything the node's processes wrote so far.
func (n *Node) Logs() string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", n.LogPath, err)
	}
	return string(b)
}

// Tail is the last lines of the node's log.
func (n *Node) Tail(lines int) string {
	l := strings.Split(strings.TrimSpace(n.Logs()), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// getJSON GETs url with the admin token into v; it returns the status.
func getJSON(ctx context.Context, hc *http.Client, url, token string, hdr map[string]string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, val := range hdr {
		req.Header.Set(k, val)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return resp.StatusCode, fmt.Errorf("decoding %s: %w", url, err)
	}
	return 200, nil
}

// startHere starts cmd in this process's network namespace.
func startHere(cmd *exec.Cmd, wait func()) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	go wait()
	return nil
}

// View is node n's view of the cluster.
func (n *Node) View(ctx context.Context, token string) (cluster.View, error) {
	st, err := shoalclient.New(n.URL(), token, shoalclient.WithHTTPClient(n.hc)).Cluster(ctx)
	if code, ok := answered(err); ok {
		err = fmt.Errorf("%s answered /v1/cluster with %d", n.ID, code)
	}
	return st.View, err
}

// Placement is node n's placement of user.
func (n *Node) Placement(ctx context.Context, token, user string) (api.PlacementView, error) {
	return PlacementOf(ctx, n.hc, Target{ID: n.ID, URL: n.URL()}, token, user)
}

// PlacementOf is node n's placement of user, asked through hc (nil: a
// client with a 2 s timeout) with token.
func PlacementOf(ctx context.Context, hc *http.Client, n Target, token, user string) (api.PlacementView, error) {
	if hc == nil {
		hc = defaultHTTP
	}
	v, err := shoalclient.New(n.URL, token, shoalclient.WithHTTPClient(hc)).Placement(ctx, user)
	if code, ok := answered(err); ok {
		err = fmt.Errorf("%s answered the placement of %s with %d", n.ID, user, code)
	}
	return v, err
}

// answered is the status of err when it is a node's answer other than
// 200.
func answered(err error) (int, bool) {
	var he *shoalclient.HTTPError
	if errors.As(err, &he) {
		return he.StatusCode, true
	}
	return 0, false
}

// defaultHTTP is the client of checks given none: loopback nodes.
var defaultHTTP = &http.Client{Timeout: 2 * time.Second}

// await polls cond until it holds, ctx ends or timeout passes; the error
// says what was awaited and the last reason it did not hold.
func await(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) (time.Duration, error) {
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond) // polling other processes: nothing to be notified by
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("%s: not true after %s; last: %s", what, timeout, why)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("%s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// WaitUp waits until every running node sees every running node UP.
func (c *Cluster) WaitUp(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	return await(ctx, timeout, "every running node UP in every running node's view", func() (bool, string) {
		for _, o := range c.Nodes {
			if !o.Running() {
				continue
			}
			v, err := o.View(ctx, c.Token)
			if err != nil {
				return false, err.Error()
			}
			for _, n := range c.Nodes {
				if !n.Running() {
					continue
				}
				st := cluster.State("")
				for _, m := range v.Members {
					if m.ID == n.ID {
						st = m.State
					}
				}
				if st != cluster.Up {
					return false, fmt.Sprintf("%s sees %s as %q", o.ID, n.ID, st)
				}
			}
		}
		return true, ""
	})
}

// errNoNode is returned for a node id the cluster does not have.
var errNoNode = errors.New("no such node")

// Node is the node of id.
func (c *Cluster) Node(id string) (*Node, error) {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", errNoNode, id)
}

// Package testcluster runs a whole Shoal cluster inside one test process:
// real nodes with their own embedded stores, real HTTP on loopback, real
// memberlist, and a fault table that can cut links between chosen nodes.
// Every node records the history of the writes it acknowledged, so tests can
// check that no two nodes ever accepted writes for one partition at once.
package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/node"
	"github.com/shoal-db/shoal/internal/nodetls"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// Settings of test clusters: fast failure detection and short leases,
// though not so short that a starved machine (the race detector, the
// process tests beside, a shared CI host) turns slow store writes and late
// heartbeats into lapsed leases and false DOWN states: with LEASE_TTL 1s a
// lease round had 333 ms to record its votes, and CI saw it miss.
const (
	GossipInterval = 200 * time.Millisecond
	SuspectTimeout = 2 * time.Second
	LeaseTTL       = 2 * time.Second
	ReplaceAfter   = 2 * time.Second
	Partitions     = 32
)

// Commit is one acknowledged group commit.
type Commit struct {
	Node       string
	Partition  int
	Epoch      uint64
	Start, End time.Time
}

// History is every acknowledged commit of every node.
type History struct {
	mu      sync.Mutex
	commits []Commit
}

func (h *History) add(c Commit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits = append(h.commits, c)
}

// Of returns the commits of one partition, by start time.
func (h *History) Of(partition int) []Commit {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Commit
	for _, c := range h.commits {
		if c.Partition == partition {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Overlaps lists pairs of commits of one partition by different nodes whose
// intervals (from the lease check to the end of the commit) overlap: each
// is a moment at which two nodes both accepted writes.
func (h *History) Overlaps() []string {
	h.mu.Lock()
	cs := slices.Clone(h.commits)
	h.mu.Unlock()
	var out []string
	for i := range cs {
		for j := i + 1; j < len(cs); j++ {
			a, b := cs[i], cs[j]
			if a.Partition == b.Partition && a.Node != b.Node && a.Start.Before(b.End) && b.Start.Before(a.End) {
				out = append(out, fmt.Sprintf("partition %d: %s@%d [%s, %s] and %s@%d [%s, %s]", a.Partition,
					a.Node, a.Epoch, a.Start.Format("15:04:05.000"), a.End.Format("15:04:05.000"),
					b.Node, b.Epoch, b.Start.Format("15:04:05.000"), b.End.Format("15:04:05.000")))
			}
		}
	}
	return out
}

// Node is one node of a test cluster.
type Node struct {
	*node.Node
	ID        string
	Config    config.Config
	t         testing.TB
	stopped   bool
	transport http.RoundTripper // nil: the default
}

// Stop closes the node gracefully (once).
func (n *Node) Stop() {
	if n.stopped {
		return
	}
	n.stopped = true
	if err := n.Close(context.Background()); err != nil {
		n.t.Logf("closing %s: %v", n.ID, err)
	}
}

// Stopped reports whether the node was stopped.
func (n *Node) Stopped() bool { return n.stopped }

// Client returns a client of this node using token (trusting the
// cluster's CA when it runs TLS).
func (n *Node) Client(token string) *testnode.Client {
	c := testnode.NewClient(n.t, n.URL(), token)
	if n.transport != nil {
		c.HTTP.Transport = n.transport
	}
	return c
}

// Cluster is a running test cluster.
type Cluster struct {
	Nodes     []*Node
	Faults    *cluster.Faults
	History   *History
	t         testing.TB
	peersFile string
	peers     []map[string]any
	opts      options
	dir       string
	// CertDir holds the CA and the nodes' certificates of a TLS cluster
	// (devcerts' files); "" without TLS.
	CertDir   string
	transport http.RoundTripper
}

// nodeConfig is the configuration of one test node.
func (c *Cluster) nodeConfig(id string, httpPort, gossipPort int) config.Config {
	cfg := testnode.Config(filepath.Join(c.dir, id))
	cfg.NodeID = id
	cfg.HTTPAddr = fmt.Sprintf("127.0.0.1:%d", httpPort)
	cfg.GossipAddr = fmt.Sprintf("127.0.0.1:%d", gossipPort)
	cfg.PeersEndpoint = c.peersFile
	cfg.PeersRefresh = time.Second
	cfg.ClusterSecret = "test-cluster-secret-0123"
	cfg.GossipInterval, cfg.GossipSuspectTimeout, cfg.LeaseTTL = GossipInterval, SuspectTimeout, LeaseTTL
	if c.opts.tolerant {
		cfg.GossipSuspectTimeout = 3 * time.Second
	}
	cfg.PartitionCount = Partitions
	cfg.ReplicaReplaceAfter = ReplaceAfter
	if c.opts.replaceAfter > 0 {
		cfg.ReplicaReplaceAfter = c.opts.replaceAfter
	}
	cfg.ReplicationFactor = c.opts.replicationFactor
	if c.opts.tombstoneRetention > 0 {
		cfg.TombstoneRetention = c.opts.tombstoneRetention
	}
	if c.opts.maxMoves > 0 {
		cfg.MaxConcurrentMoves = c.opts.maxMoves
	}
	if c.opts.tls {
		if err := devcerts.Write(c.CertDir, []string{id}, nil); err != nil {
			c.t.Fatal(err)
		}
		cfg.TLSCertFile = filepath.Join(c.CertDir, devcerts.CertFile(id))
		cfg.TLSKeyFile = filepath.Join(c.CertDir, devcerts.KeyFile(id))
		cfg.TLSCAFile = filepath.Join(c.CertDir, devcerts.CAFile)
		cfg.TLSClientAuth = "require"
	}
	return cfg
}

// scheme is the peers' url scheme.
func (o options) scheme() string {
	if o.tls {
		return "https"
	}
	return "http"
}

// writePeers rewrites the peer list (atomically) and has every running
// node re-read it now.
func (c *Cluster) writePeers() {
	c.t.Helper()
	data, _ := json.Marshal(map[string]any{"peers": c.peers})
	tmp := c.peersFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, c.peersFile); err != nil {
		c.t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if !n.stopped {
			n.ReloadPeers()
		}
	}
}

// AddNode starts one more node (sharding and replica, not a voter), adds
// it to the peer list and has every node re-read the list.
func (c *Cluster) AddNode() *Node {
	c.t.Helper()
	id := fmt.Sprintf("node%d", len(c.Nodes)+1)
	ports := testnode.FreePorts(c.t, 2)
	c.peers = append(c.peers, map[string]any{"id": id, "url": fmt.Sprintf("%s://127.0.0.1:%d", c.opts.scheme(), ports[0]),
		"gossip": fmt.Sprintf("127.0.0.1:%d", ports[1]), "voter": false})
	// The new node reads the list with itself in it; the others re-read it.
	data, _ := json.Marshal(map[string]any{"peers": c.peers})
	if err := os.WriteFile(c.peersFile, data, 0o644); err != nil {
		c.t.Fatal(err)
	}
	n := c.startNode(c.nodeConfig(id, ports[0], ports[1]))
	c.Nodes = append(c.Nodes, n)
	c.writePeers()
	return n
}

// RemoveFromPeers takes id out of the peer list, and has every node re-read
// it; the node keeps running (it drains).
func (c *Cluster) RemoveFromPeers(id string) {
	c.t.Helper()
	c.peers = slices.DeleteFunc(c.peers, func(p map[string]any) bool { return p["id"] == id })
	c.writePeers()
}

// SetHoldsData rewrites the peer list so that id holds partitions
// (sharding and replica) or none, and has every node re-read it now.
func (c *Cluster) SetHoldsData(id string, holds bool) {
	c.t.Helper()
	for _, p := range c.peers {
		if p["id"] == id {
			p["sharding"], p["replica"] = holds, holds
		}
	}
	c.writePeers()
}

// SetVoters rewrites the peer list so that exactly ids are lease voters,
// and has every node re-read it now.
func (c *Cluster) SetVoters(ids ...string) {
	c.t.Helper()
	for _, p := range c.peers {
		p["voter"] = slices.Contains(ids, p["id"].(string))
	}
	c.writePeers()
}

// Option changes how a test cluster is started.
type Option func(*options)

type options struct {
	voters             int
	replicationQueue   int
	replicationFactor  int
	tombstoneRetention time.Duration
	maxMoves           int
	tolerant           bool
	replaceAfter       time.Duration
	batchDocs          int
	noWait             bool
	tls                bool
}

// TLS runs the cluster over HTTPS: certificates of a CA of the test's
// own (Cluster.CertDir), nodes requiring each other's certificates
// (TLS_CLIENT_AUTH=require), and Node.Client trusting the CA.
func TLS() Option { return func(o *options) { o.tls = true } }

// NoWait returns from Start as soon as the nodes run, without waiting for
// masters and replicas: for tests of what a node says while it starts.
func NoWait() Option { return func(o *options) { o.noWait = true } }

// MaxConcurrentMoves sets MAX_CONCURRENT_MOVES.
func MaxConcurrentMoves(n int) Option { return func(o *options) { o.maxMoves = n } }

// ReplicationFactor sets REPLICATION_FACTOR (default 2).
func ReplicationFactor(n int) Option { return func(o *options) { o.replicationFactor = n } }

// Voters makes only the first k nodes lease voters (default: all).
func Voters(k int) Option { return func(o *options) { o.voters = k } }

// ReplicationQueue bounds the replication queues (small values force
// catch-ups from the store).
func ReplicationQueue(docs int) Option { return func(o *options) { o.replicationQueue = docs } }

// ReplicationBatch bounds the documents of one replication request (a
// live batch, a catch-up or copy chunk): small values make a copy of a
// few hundred documents take many chunks, so a test can act while one is
// under way without writing thousands first.
func ReplicationBatch(docs int) Option { return func(o *options) { o.batchDocs = docs } }

// Tolerant gives the cluster GOSSIP_SUSPECT_TIMEOUT 3s instead of
// SuspectTimeout: for tests of moves under a heavy write load that do not
// measure failover, so that late heartbeats on a starved machine do not
// turn into false DOWN states.
func Tolerant() Option { return func(o *options) { o.tolerant = true } }

// ReplicaReplaceAfter sets REPLICA_REPLACE_AFTER instead of ReplaceAfter:
// for tests whose nodes stay down, by design, for longer than a starved
// machine can promise to keep within 2 s, and that must not see them
// replaced meanwhile.
func ReplicaReplaceAfter(d time.Duration) Option { return func(o *options) { o.replaceAfter = d } }

// TombstoneRetention sets every node's TOMBSTONE_RETENTION (small values
// purge deletes within the test, so a lagging replica needs a full copy).
func TombstoneRetention(d time.Duration) Option { return func(o *options) { o.tombstoneRetention = d } }

// Start starts n nodes (node1..nodeN) and waits until every partition has a
// master and a replica that every node knows of.
func Start(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	o := options{voters: n, replicationFactor: 2}
	for _, f := range opts {
		f(&o)
	}
	voters := o.voters
	ports := testnode.FreePorts(t, 2*n)
	dir := t.TempDir()
	var doc struct {
		Peers []map[string]any `json:"peers"`
	}
	for i := 0; i < n; i++ {
		doc.Peers = append(doc.Peers, map[string]any{"id": fmt.Sprintf("node%d", i+1),
			"url": fmt.Sprintf("%s://127.0.0.1:%d", o.scheme(), ports[2*i]), "gossip": fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), "voter": i < voters})
	}
	peersFile := filepath.Join(dir, "peers.json")
	data, _ := json.Marshal(doc)
	if err := os.WriteFile(peersFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Faults: cluster.NewFaults(), History: &History{}, t: t, peersFile: peersFile, peers: doc.Peers, opts: o, dir: dir}
	if o.tls {
		c.CertDir = filepath.Join(dir, "certs")
		if err := devcerts.WriteCA(c.CertDir); err != nil {
			t.Fatal(err)
		}
		m, err := nodetls.Load(nodetls.Files{CA: filepath.Join(c.CertDir, devcerts.CAFile)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.transport = m.Transport()
	}
	c.Nodes = make([]*Node, n)
	for i := 0; i < n; i++ {
		c.Nodes[i] = c.startNode(c.nodeConfig(fmt.Sprintf("node%d", i+1), ports[2*i], ports[2*i+1]))
	}
	if !o.noWait {
		c.WaitForMasters(30 * time.Second)
		c.WaitForReplicas(30 * time.Second)
	}
	return c
}

// WaitForReplicas waits until every partition's master has chosen its
// replicas (REPLICATION_FACTOR - 1 each, as far as the cluster has nodes)
// and every running node knows the responsible list.
func (c *Cluster) WaitForReplicas(timeout time.Duration) {
	c.t.Helper()
	testnode.Eventually(c.t, timeout, "every partition has a replica", func() (bool, string) {
		for p := 0; p < Partitions; p++ {
			m := c.MasterOf(p)
			if m == "" {
				return false, fmt.Sprintf("partition %d has no master", p)
			}
			want := c.Node(m).Placement(p).Responsible
			if len(want) < min(c.opts.replicationFactor, len(c.Nodes)) {
				return false, fmt.Sprintf("partition %d: responsible %v", p, want)
			}
			for _, n := range c.Nodes {
				if got := n.Placement(p).Responsible; !n.stopped && !slices.Equal(got, want) {
					return false, fmt.Sprintf("partition %d: %s knows %v, its master %v", p, n.ID, got, want)
				}
			}
		}
		return true, ""
	})
}

func (c *Cluster) startNode(cfg config.Config) *Node {
	c.t.Helper()
	id := cfg.NodeID
	nd, err := node.StartWith(context.Background(), cfg, testnode.Logger(c.t), node.Options{Faults: c.Faults, ReplicationQueue: c.opts.replicationQueue, ReplicationBatchDocs: c.opts.batchDocs,
		OnCommit: func(p int, epoch uint64, start, end time.Time) {
			c.History.add(Commit{Node: id, Partition: p, Epoch: epoch, Start: start, End: end})
		}})
	if err != nil {
		c.t.Fatalf("starting %s: %v", id, err)
	}
	tn := &Node{Node: nd, ID: id, Config: cfg, t: c.t, transport: c.transport}
	c.t.Cleanup(tn.Stop)
	return tn
}

// StopAll stops every node at once, as a full shutdown of the cluster
// does: a node stopped one after another keeps running meanwhile (its
// HTTP server's shutdown waits for requests in flight), and may replace
// the copies of the nodes stopped before it.
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
}

// Restart stops the node id (if running) and starts it again on the same
// data directory and addresses.
func (c *Cluster) Restart(id string) *Node {
	c.t.Helper()
	for i, n := range c.Nodes {
		if n.ID == id {
			n.Stop()
			c.Nodes[i] = c.startNode(n.Config)
			return c.Nodes[i]
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// Node returns the node with id.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// IDs lists the nodes' ids.
func (c *Cluster) IDs() []string {
	var ids []string
	for _, n := range c.Nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

// MasterOf returns the node holding partition's lease now ("" if none).
func (c *Cluster) MasterOf(partition int) string {
	holder := ""
	for _, n := range c.Nodes {
		if n.stopped {
			continue
		}
		if _, ok := n.Leases().Holds(partition); ok {
			if holder != "" {
				c.t.Fatalf("partition %d held by %s and %s at once", partition, holder, n.ID)
			}
			holder = n.ID
		}
	}
	return holder
}

// WaitForMasters waits until every partition has exactly one holder and
// every running node's placement names it.
func (c *Cluster) WaitForMasters(timeout time.Duration) {
	c.t.Helper()
	testnode.Eventually(c.t, timeout, "every partition has a master known to every node", func() (bool, string) {
		for p := 0; p < Partitions; p++ {
			m := c.MasterOf(p)
			if m == "" {
				return false, fmt.Sprintf("partition %d has no master", p)
			}
			for _, n := range c.Nodes {
				if !n.stopped && n.Placement(p).Master != m {
					return false, fmt.Sprintf("%s believes %q masters partition %d, not %s", n.ID, n.Placement(p).Master, p, m)
				}
			}
		}
		return true, ""
	})
}

// PreferredByANewNode returns the partitions whose preferred master would
// be "node4" once it joins node1..node3 (the ids Start and AddNode give).
func PreferredByANewNode(t testing.TB) []int {
	t.Helper()
	var members []shard.Member
	for i := 1; i <= 4; i++ {
		members = append(members, shard.Member{ID: fmt.Sprintf("node%d", i), Sharding: true, Replica: true, Voter: i <= 3})
	}
	ring, err := shard.NewRing(members, Partitions)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for p := range Partitions {
		if ring.Owner(p) == "node4" {
			out = append(out, p)
		}
	}
	return out
}

// FillUser writes docs documents of payloadBytes each (ids d00000000,
// d00000001, ...) to user's collection "c" through cl, from 32 clients at
// once, and returns how long it took.
func FillUser(t testing.TB, cl *testnode.Client, user string, docs, payloadBytes int) time.Duration {
	t.Helper()
	start := time.Now()
	body := `{"payload":"` + strings.Repeat("x", payloadBytes) + `"}`
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for range 32 {
		wg.Go(func() {
			for k := range next {
				r, err := cl.TryDo("PUT", fmt.Sprintf("/v1/users/%s/collections/c/documents/d%08d", user, k), body)
				if err == nil && r.Status != 201 {
					err = fmt.Errorf("status %d: %s", r.Status, r.Body)
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	for k := range docs {
		next <- k
	}
	close(next)
	wg.Wait()
	if failed != nil {
		t.Fatalf("filling %s: %v", user, failed)
	}
	return time.Since(start)
}

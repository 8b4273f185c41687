package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/net/http/httpguts"

	"github.com/shoal-db/shoal/api/wire"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/internal/readall"
)

// Config is what the membership of one node needs.
type Config struct {
	NodeID    string
	PublicURL string // shown to clients; default: the node's url in the peer list
	DataDir   string // its free space is gossiped
	// PeersEndpoint is a file path or http(s) URL; empty: a cluster of one.
	PeersEndpoint  string
	PeersRefresh   time.Duration
	GossipAddr     string // bind address, host:port
	Secret         []byte // CLUSTER_SECRET
	GossipInterval time.Duration
	SuspectTimeout time.Duration
	Version        string
	Logger         *slog.Logger
	// HTTPClient fetches an http(s) peer list (default: a client with a
	// timeout and TLS).
	HTTPClient *http.Client
	// DialTLS dials the other nodes' (and an https peer list's) TLS
	// connections, verifying them and presenting this node's certificate
	// (nodetls.Material.DialTLS); nil: the transport's default.
	DialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	// Now is the clock for member states (default time.Now).
	Now func() time.Time
	// Gossiper carries other components' state over gossip (the partition
	// table); nil: none.
	Gossiper Gossiper
	// Faults cuts links between nodes in tests; nil in production.
	Faults *Faults
}

// Gossiper is state that other components spread through gossip: a full
// copy in every push-pull, and updates as broadcasts. Merge runs on the
// cluster's own goroutine, never inside a memberlist callback; LocalState is
// called by memberlist and must only copy state out.
type Gossiper interface {
	LocalState() []byte
	Merge(data []byte)
}

// Cluster is this node's view of the cluster: the peer list, gossip
// membership and the state of every peer.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	ml     *memberlist.Memberlist // nil for a cluster of one
	signer *Signer
	events chan event
	queue  *memberlist.TransmitLimitedQueue
	http   *http.Client
	reload chan struct{}
	join   chan struct{}
	start  time.Time

	mu       sync.Mutex
	peers    PeerList
	loadedAt time.Time
	refusal  *Refusal
	removed  bool                   // the peer list in force does not name this node
	members  map[string]*memberInfo // by node name (id), as gossip knows them
	meta     NodeMeta               // this node's metadata
	metaLogs *logsafe.Limiter       // refusals of peers' metadata (made on first use)

	// gossiped is the latest node each memberlist event reported, copied
	// in the callback (where memberlist holds its lock), alive unless the
	// last was a leave. resync rebuilds liveness from it in case events
	// were dropped: the nodes Members() returns are memberlist's own, which
	// it rewrites while they are read.
	gossipMu sync.Mutex
	gossiped map[string]gossipedNode

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Refusal records a peer list that was not taken.
type Refusal = wire.Refusal

// NodeMeta is what a node gossips about itself (at most 512 bytes encoded).
type NodeMeta struct {
	ID          string `json:"id"`
	PublicURL   string `json:"url,omitempty"`
	InternalURL string `json:"iurl,omitempty"`
	FreeBytes   uint64 `json:"free"`
	Flags       string `json:"flags,omitempty"` // S sharding, R replica, V voter
	Version     string `json:"ver,omitempty"`
	Incarnation int64  `json:"inc"` // start time of the process, ms
	// SealsAnswers: the node seals its answers to signed requests
	// (HeaderAnswerSignature). An older node does not, and leaves it out;
	// its answers are taken unsealed until it is upgraded.
	SealsAnswers bool `json:"seal,omitempty"`
}

type gossipedNode struct {
	node  memberlist.Node
	alive bool
}

type memberInfo struct {
	node      memberlist.Node
	meta      NodeMeta
	alive     bool
	lastHeard time.Time
	// sealedSince is the latest incarnation whose metadata said it seals
	// its answers (0: none seen): metadata of that incarnation or an
	// earlier one that says otherwise is an old message (gossip has no
	// replay protection), and does not make its answers go unchecked.
	sealedSince int64
}

type eventKind int

const (
	evJoin eventKind = iota
	evLeave
	evUpdate
	evHeartbeat
	evState
)

type event struct {
	kind eventKind
	node memberlist.Node
	from string // heartbeat sender
	at   time.Time
	data []byte // evState: gossiped state
}

const (
	msgHeartbeat byte = 1
	msgState     byte = 2
	metaLimit         = memberlist.MetaMaxSize
	diskEvery         = 5 * time.Second
)

// Start loads the peer list and joins the gossip. With no PeersEndpoint the
// node is a cluster of one and nothing is started.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
		if cfg.DialTLS != nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.DialTLSContext = cfg.DialTLS
			cfg.HTTPClient.Transport = t
		}
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger, events: make(chan event, 4096), reload: make(chan struct{}, 1),
		join: make(chan struct{}, 1), members: map[string]*memberInfo{}, gossiped: map[string]gossipedNode{}, start: cfg.Now()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute, DialTLSContext: cfg.DialTLS},
		// Never follow a redirect: it would carry signatures and client
		// tokens to an address outside the peer list.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if len(cfg.Secret) > 0 {
		c.signer = NewSigner(cfg.Secret, cfg.NodeID, cfg.Now, c.knows)
	}
	if cfg.PeersEndpoint == "" {
		c.peers = PeerList{Peers: []Peer{{ID: cfg.NodeID, URL: cfg.PublicURL, Sharding: true, Replica: true, Voter: true}}}
		c.meta = c.selfMeta(c.peers.Peers[0])
		return c, nil
	}
	data, err := FetchPeerList(ctx, cfg.PeersEndpoint, cfg.HTTPClient)
	if err == nil {
		c.peers, err = ParsePeerList(data, cfg.NodeID)
	}
	if err != nil {
		return nil, fmt.Errorf("PEERS_ENDPOINT %s: %w", cfg.PeersEndpoint, err)
	}
	c.loadedAt = cfg.Now()
	self, _ := c.peers.Get(cfg.NodeID)
	c.meta = c.selfMeta(self)
	if err := c.startGossip(self); err != nil {
		return nil, err
	}
	c.wg.Add(3)
	go c.run()
	go c.joinLoop()
	go c.refreshLoop()
	c.requestJoin()
	c.log.Info("joined the gossip", "gossip", cfg.GossipAddr, "advertise", self.Gossip, "peers", strings.Join(c.peers.IDs(), ","))
	return c, nil
}

func (c *Cluster) selfMeta(self Peer) NodeMeta {
	pub := c.cfg.PublicURL
	if pub == "" {
		pub = self.URL
	}
	flags := ""
	for _, f := range []struct {
		on bool
		c  string
	}{{self.Sharding, "S"}, {self.Replica, "R"}, {self.Voter, "V"}} {
		if f.on {
			flags += f.c
		}
	}
	return NodeMeta{ID: c.cfg.NodeID, PublicURL: pub, InternalURL: self.URL, FreeBytes: freeBytes(c.cfg.DataDir),
		Flags: flags, Version: c.cfg.Version, Incarnation: c.start.UnixMilli(), SealsAnswers: true}
}

// Incarnation is this process's incarnation as the others see it in its
// gossip metadata (NodeMeta.Incarnation): its start time in ms.
func (c *Cluster) Incarnation() int64 { return c.start.UnixMilli() }

// memberlistConfig maps Shoal's settings onto memberlist's. The README's
// "Failure detection" section documents the mapping; keep the two in step.
func memberlistConfig(cfg Config, advertise string) (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	host, port, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("GOSSIP_ADDR %q must be host:port (or :port): %w", cfg.GossipAddr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if mc.BindPort, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("GOSSIP_ADDR %q: bad port", cfg.GossipAddr)
	}
	mc.BindAddr = host
	if ahost, aport, err := net.SplitHostPort(advertise); err == nil {
		ips, err := net.LookupIP(ahost)
		if err != nil || len(ips) == 0 {
			return nil, fmt.Errorf("this node's gossip address %q in the peer list does not resolve: %v", advertise, err)
		}
		mc.AdvertiseAddr = ips[0].String()
		mc.AdvertisePort, _ = strconv.Atoi(aport)
	}
	mc.SecretKey = deriveKey(cfg.Secret, "gossip")[:32]
	mc.ProbeInterval = cfg.GossipInterval
	mc.ProbeTimeout = min(cfg.GossipInterval/2, 500*time.Millisecond)
	// A fixed suspicion time (no early expiry from confirmations) keeps the
	// detection time predictable: SuspicionMult x ProbeInterval, scaled by
	// log10(members) once there are more than 10.
	mc.SuspicionMult = int(math.Ceil(float64(cfg.SuspectTimeout) / float64(cfg.GossipInterval)))
	mc.SuspicionMaxTimeoutMult = 1
	mc.DeadNodeReclaimTime = cfg.GossipInterval
	mc.TCPTimeout = max(2*cfg.GossipInterval, time.Second)
	// Full state (the partition table) is exchanged this often; broadcasts
	// carry changes in between, and this repairs any they lost.
	mc.PushPullInterval = max(5*cfg.GossipInterval, 2*time.Second)
	mc.Logger = log.New(newSlogWriter(cfg.Logger, cfg.Now), "", 0)
	return mc, nil
}

func (c *Cluster) startGossip(self Peer) error {
	mc, err := memberlistConfig(c.cfg, self.Gossip)
	if err != nil {
		return err
	}
	mc.Delegate = delegate{c}
	mc.Events = eventDelegate{c}
	if c.cfg.Faults != nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger})
		if err != nil {
			return fmt.Errorf("starting gossip on GOSSIP_ADDR %s: %w", c.cfg.GossipAddr, err)
		}
		mc.Transport = &faultyTransport{NodeAwareTransport: nt, self: c.cfg.NodeID, faults: c.cfg.Faults}
		c.nameGossipAddrs()
	}
	// The queue exists before memberlist starts: its gossip goroutines call
	// GetBroadcasts from the moment Create starts them, so the queue and the
	// member count it reads must not be assigned after.
	var created atomic.Pointer[memberlist.Memberlist]
	c.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: 3, NumNodes: func() int {
		if ml := created.Load(); ml != nil {
			return ml.NumMembers()
		}
		return 1
	}}
	ml, err := memberlist.Create(mc)
	if err != nil {
		c.queue = nil
		return fmt.Errorf("starting gossip on GOSSIP_ADDR %s: %w", c.cfg.GossipAddr, err)
	}
	created.Store(ml)
	c.ml = ml
	return nil
}

// nameGossipAddrs tells the fault table which node each gossip address is.
func (c *Cluster) nameGossipAddrs() {
	for _, p := range c.peers.Peers {
		host, port, err := net.SplitHostPort(p.Gossip)
		if err != nil {
			continue
		}
		if ips, err := net.LookupIP(host); err == nil {
			for _, ip := range ips {
				c.cfg.Faults.nameGossipAddr(net.JoinHostPort(ip.String(), port), p.ID)
			}
		}
		c.cfg.Faults.nameGossipAddr(p.Gossip, p.ID)
	}
}

// Broadcast spreads data to every member through gossip (best effort; the
// periodic push-pull of Gossiper.LocalState repairs what is lost). data must
// fit in a UDP packet: keep it under 1 KB.
func (c *Cluster) Broadcast(data []byte) {
	if c.queue == nil {
		return
	}
	c.queue.QueueBroadcast(broadcast(append([]byte{msgState}, data...)))
}

type broadcast []byte

func (b broadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b broadcast) Message() []byte                       { return b }
func (b broadcast) Finished()                             {}

// PeerURL is the API base URL of a peer of the list, or of a node removed
// from the list that still gossips (it is draining: it hands its
// partitions over, and must be reachable until it has).
func (c *Cluster) PeerURL(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.peers.Get(id); ok {
		return p.URL, true
	}
	if m := c.members[id]; m != nil && m.alive && m.meta.InternalURL != "" {
		return m.meta.InternalURL, true
	}
	return "", false
}

// knows reports whether id may sign requests to this node: a peer of the
// list, or a node removed from it that still gossips (it drains, and hands
// its partitions over through internal calls). This node's own id is never
// a sender.
func (c *Cluster) knows(id string) bool {
	if id == c.cfg.NodeID {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.peers.Get(id); ok {
		return true
	}
	m := c.members[id]
	return m != nil && m.alive
}

// ErrNotSent marks a Send that failed before the request could reach the
// peer (unknown peer, link cut, connection refused): retrying it cannot
// apply it twice. Any other error may come after the peer got it.
var ErrNotSent = errors.New("not sent")

// Removed reports whether the peer list in force no longer names this
// node: it drains (hands over what it holds) and then holds nothing.
func (c *Cluster) Removed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed
}

// Send sends req to the peer id: req's URL is resolved against the peer's
// URL from the peer list (only peers of the list are ever sent to, so a
// client's token never leaves the cluster). With sign, the request is
// signed as a node-to-node call addressed to peer (no other node accepts
// it), and its answer is read whole and its seal checked
// (HeaderAnswerSignature): an answer that is not peer's to this request
// is an error (ErrUnsealedAnswer), as is one larger than
// MaxInternalAnswer. A link cut by Faults fails like a dead network, in
// either direction.
func (c *Cluster) Send(peer string, req *http.Request, sign bool) (*http.Response, error) {
	base, ok := c.PeerURL(peer)
	if !ok {
		return nil, fmt.Errorf("%w: node %q is not in the peer list", ErrNotSent, peer)
	}
	if err := c.LinkCut(peer, req.URL.Path); err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, u.Host
	if sign {
		if c.signer == nil {
			return nil, errors.New("no CLUSTER_SECRET to sign node-to-node calls with")
		}
		var body []byte
		if req.Body != nil {
			if body, err = readall.Sized(req.Body, req.ContentLength); err != nil {
				return nil, err
			}
			req.Body.Close()
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		if len(body) == 0 {
			// A declared length of 0, never chunked: the receiver needs one.
			req.Body = http.NoBody
		}
		c.signer.Sign(req, body, peer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
		}
		return nil, err
	}
	if err := c.AnswerCut(peer); err != nil {
		resp.Body.Close()
		return nil, err
	}
	// A stream's answers (101 to a request that asked to switch, with
	// Connection: Upgrade, which only this node sets: the connection is
	// the stream's) are sealed frame by frame
	// (replicate.StreamProtocolSealed); a 101 to any other request is
	// checked, and fails.
	if sign && !(resp.StatusCode == http.StatusSwitchingProtocols && httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade")) && c.sealsAnswers(peer) {
		if err := c.signer.CheckAnswer(req, resp, peer); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// sealsAnswers reports whether peer's answers to signed requests must be
// sealed: unless gossip shows it is a node of a version that does not
// seal them (NodeMeta.SealsAnswers; gossip is encrypted and authenticated
// with the cluster secret, so no one else can say so) and this process
// has not seen it, or a later process of it, say it does (an old message
// replayed says otherwise). A peer gossip has not shown yet must seal:
// during a rolling upgrade, the answers of an older node to an upgraded
// one are refused until gossip tells the upgraded one which it is.
func (c *Cluster) sealsAnswers(peer string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[peer]
	return m == nil || m.meta.ID == "" || m.meta.SealsAnswers || (m.sealedSince > 0 && m.meta.Incarnation <= m.sealedSince)
}

// LinkCut answers the error Send would for a call to peer on path that a
// test's Faults cut (nil otherwise), counting the call as Send does: a
// stream checks it for every request it carries.
func (c *Cluster) LinkCut(peer, path string) error {
	if c.cfg.Faults.callsBlocked(c.cfg.NodeID, peer) || c.cfg.Faults.replicationBlocked(c.cfg.NodeID, peer, path) || c.cfg.Faults.leaseBlocked(c.cfg.NodeID, peer, path) {
		return fmt.Errorf("%w: sending to %s: %w", ErrNotSent, peer, ErrLinkCut)
	}
	return nil
}

// AnswerCut answers the error Send would for an answer from peer that a
// test's Faults cut after its call went through (nil otherwise).
func (c *Cluster) AnswerCut(peer string) error {
	if c.cfg.Faults.callsBlocked(c.cfg.NodeID, peer) {
		return fmt.Errorf("answer from %s: %w", peer, ErrLinkCut)
	}
	return nil
}

// StreamKey is the key of the frames of a stream that req, signed by Send,
// opened (Signer.StreamKey); nil without a secret.
func (c *Cluster) StreamKey(req *http.Request) []byte {
	if c.signer == nil {
		return nil
	}
	return c.signer.StreamKey(req)
}

// Signer signs and verifies node-to-node calls (nil without a secret).
func (c *Cluster) Signer() *Signer { return c.signer }

// Reload re-reads the peer list now (SIGHUP).
func (c *Cluster) Reload() {
	select {
	case c.reload <- struct{}{}:
	default:
	}
}

func (c *Cluster) requestJoin() {
	select {
	case c.join <- struct{}{}:
	default:
	}
}

// Close leaves the gossip and stops every goroutine of the cluster.
func (c *Cluster) Close() error {
	c.cancel()
	c.wg.Wait()
	if c.ml == nil {
		return nil
	}
	if err := c.ml.Leave(time.Second); err != nil {
		c.log.Warn("leaving the gossip", "err", err)
	}
	return c.ml.Shutdown()
}

// push hands an event from a memberlist callback to the run loop without
// ever blocking; if the loop is that far behind, the event is dropped and
// the loop resynchronises from memberlist.
func (c *Cluster) push(e event) {
	select {
	case c.events <- e:
	default:
	}
}

func (c *Cluster) run() {
	defer c.wg.Done()
	heartbeat := time.NewTicker(c.cfg.GossipInterval)
	defer heartbeat.Stop()
	disk := time.NewTicker(diskEvery)
	defer disk.Stop()
	resync := time.NewTicker(10 * c.cfg.GossipInterval)
	defer resync.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case e := <-c.events:
			if e.kind == evState {
				if c.cfg.Gossiper != nil {
					c.cfg.Gossiper.Merge(e.data)
				}
				continue
			}
			c.apply(e)
		case <-heartbeat.C:
			c.sendHeartbeats()
		case <-disk.C:
			c.refreshDisk()
		case <-resync.C:
			c.resync()
		}
	}
}

func (c *Cluster) apply(e event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := e.node.Name
	if e.kind == evHeartbeat {
		name = e.from
	}
	if name == c.cfg.NodeID {
		return
	}
	m := c.members[name]
	if m == nil {
		m = &memberInfo{}
		c.members[name] = m
	}
	switch e.kind {
	case evJoin, evUpdate:
		if e.kind == evJoin || !m.alive {
			c.log.Info("peer joined", "peer", logsafe.Clip(name), "addr", e.node.Address())
		}
		m.node, m.alive, m.lastHeard = e.node, true, e.at
		c.takeMeta(m, name, e.node.Meta)
	case evLeave:
		if m.alive {
			c.log.Warn("peer is down", "peer", logsafe.Clip(name))
		}
		m.node, m.alive = e.node, false
	case evHeartbeat:
		if m.alive {
			m.lastHeard = e.at
		}
	}
}

// resync rebuilds liveness from what memberlist reported, in case events
// were dropped.
func (c *Cluster) resync() {
	live := map[string]memberlist.Node{}
	c.gossipMu.Lock()
	for name, g := range c.gossiped {
		if g.alive {
			live[name] = g.node
		}
	}
	c.gossipMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	for name, n := range live {
		if name == c.cfg.NodeID {
			continue
		}
		m := c.members[name]
		if m == nil {
			m = &memberInfo{lastHeard: now}
			c.members[name] = m
		}
		if !m.alive {
			m.lastHeard = now
		}
		m.node, m.alive = n, true
		c.takeMeta(m, name, n.Meta)
	}
	for name, m := range c.members {
		if _, ok := live[name]; !ok {
			m.alive = false
		}
	}
}

// takeMeta sets the metadata peer name gossiped, or none (unknown) when it
// is invalid or names another node; a refusal is logged clipped and
// rate-limited. c.mu is held.
func (c *Cluster) takeMeta(m *memberInfo, name string, raw []byte) {
	meta, err := decodeMeta(raw)
	if err == nil && meta.ID != name {
		err = fmt.Errorf("node metadata names node %q", meta.ID)
	}
	if err != nil {
		m.meta = NodeMeta{}
		if c.metaLogs == nil {
			c.metaLogs = logsafe.NewLimiter(metaLogMax, metaLogWindow, c.cfg.Now)
		}
		if ok, suppressed := c.metaLogs.Allow(); ok {
			c.log.Warn("peer gossips invalid metadata: taken as unknown", "peer", logsafe.ClipTo(name, 80),
				"err", logsafe.Clip(err.Error()), "suppressed", suppressed)
		}
		return
	}
	m.meta = meta
	if meta.SealsAnswers {
		m.sealedSince = max(m.sealedSince, meta.Incarnation)
	}
}

// At most metaLogMax refusals of peers' metadata are logged per
// metaLogWindow.
const (
	metaLogMax    = 5
	metaLogWindow = time.Minute
)

func (c *Cluster) sendHeartbeats() {
	c.mu.Lock()
	var to []memberlist.Node
	for _, m := range c.members {
		if m.alive {
			to = append(to, m.node)
		}
	}
	c.mu.Unlock()
	msg := append([]byte{msgHeartbeat}, c.cfg.NodeID...)
	for i := range to {
		if err := c.ml.SendBestEffort(&to[i], msg); err != nil {
			c.log.Debug("heartbeat not sent", "peer", to[i].Name, "err", err)
		}
	}
}

// refreshLoop re-reads the peer list every PEERS_REFRESH and on Reload. A
// fetch can take seconds (an http endpoint), so it never runs on the loop
// that sends heartbeats.
func (c *Cluster) refreshLoop() {
	defer c.wg.Done()
	refresh := time.NewTicker(c.cfg.PeersRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-refresh.C:
		case <-c.reload:
		}
		c.refreshPeers()
		c.requestJoin()
	}
}

func (c *Cluster) refreshPeers() {
	data, err := FetchPeerList(c.ctx, c.cfg.PeersEndpoint, c.cfg.HTTPClient)
	var list PeerList
	if err == nil {
		// A list without this node is taken too: the node was removed, and
		// drains.
		list, err = ParsePeerList(data, "")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if err == nil {
		_, listed := list.Get(c.cfg.NodeID)
		switch {
		case !listed && !c.removed:
			c.log.Warn("this node is no longer in the peer list: it hands its partitions over and then holds nothing; stop it once `shoal status` shows it gone")
		case listed && c.removed:
			c.log.Info("this node is in the peer list again")
		}
		c.removed = !listed
	}
	if err != nil {
		if c.refusal == nil || c.refusal.Reason != err.Error() {
			c.log.Error("peer list refused; keeping the last good one", "source", c.cfg.PeersEndpoint, "err", err)
		}
		c.refusal = &Refusal{At: now, Reason: err.Error()}
		return
	}
	if c.refusal != nil {
		c.log.Info("peer list accepted again", "source", c.cfg.PeersEndpoint)
	}
	c.refusal = nil
	if !reflect.DeepEqual(list, c.peers) {
		c.log.Info("peer list changed", "before", strings.Join(c.peers.IDs(), ","), "after", strings.Join(list.IDs(), ","))
		c.peers = list
		if c.cfg.Faults != nil {
			c.nameGossipAddrs()
		}
	}
	c.loadedAt = now
}

// joinLoop joins the peers of the list that are not live members: at start,
// after every refresh, and so after a split or a restart. Joins block on
// the network, so they run here, off the run loop.
func (c *Cluster) joinLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.join:
		}
		c.mu.Lock()
		var addrs []string
		for _, p := range c.peers.Peers {
			if m := c.members[p.ID]; p.ID != c.cfg.NodeID && (m == nil || !m.alive) {
				addrs = append(addrs, p.Gossip)
			}
		}
		c.mu.Unlock()
		if len(addrs) == 0 {
			continue
		}
		n, err := c.ml.Join(addrs)
		if err != nil {
			c.log.Debug("could not reach every peer", "tried", strings.Join(addrs, ","), "reached", n, "err", err)
		}
	}
}

func (c *Cluster) refreshDisk() {
	free := freeBytes(c.cfg.DataDir)
	c.mu.Lock()
	old := c.meta.FreeBytes
	changed := diskChanged(old, free)
	if changed {
		c.meta.FreeBytes = free
	}
	c.mu.Unlock()
	if changed {
		if err := c.ml.UpdateNode(c.cfg.GossipInterval); err != nil {
			c.log.Debug("gossiping new free disk", "err", err)
		}
	}
}

// diskChanged says whether free space moved enough to be worth gossiping:
// by more than 1% or 256 MiB.
func diskChanged(old, cur uint64) bool {
	d := max(old, cur) - min(old, cur)
	return d > 256<<20 || float64(d) > 0.01*float64(old)
}

// freeBytes is the space available on the volume holding dir.
func freeBytes(dir string) uint64 {
	for d := dir; d != ""; {
		var st syscall.Statfs_t
		if err := syscall.Statfs(d, &st); err == nil {
			return st.Bavail * uint64(st.Bsize)
		}
		parent := d[:max(strings.LastIndex(d, "/"), 0)]
		if parent == d {
			break
		}
		d = parent
	}
	var st syscall.Statfs_t
	if syscall.Statfs("/", &st) == nil {
		return st.Bavail * uint64(st.Bsize)
	}
	return 0
}

// encodeMeta encodes m within limit bytes, dropping the least useful
// fields if it must (memberlist panics on larger metadata).
func encodeMeta(m NodeMeta, limit int) []byte {
	// Peers refuse metadata with an invalid public URL or version; they
	// are only shown, so they are dropped rather than the rest refused.
	if (NodeMeta{ID: "x", PublicURL: m.PublicURL}).checkOptional() != nil {
		m.PublicURL = ""
	}
	if (NodeMeta{ID: "x", Version: m.Version}).checkOptional() != nil {
		m.Version = ""
	}
	for _, trim := range []func(*NodeMeta){func(*NodeMeta) {}, func(m *NodeMeta) { m.Version = "" }, func(m *NodeMeta) { m.PublicURL = "" }} {
		trim(&m)
		if b, err := json.Marshal(m); err == nil && len(b) <= limit {
			return b
		}
	}
	b, _ := json.Marshal(NodeMeta{ID: m.ID, Incarnation: m.Incarnation, SealsAnswers: m.SealsAnswers})
	if len(b) > limit {
		return nil
	}
	return b
}

type delegate struct{ c *Cluster }

func (d delegate) NodeMeta(limit int) []byte {
	d.c.mu.Lock()
	m := d.c.meta
	d.c.mu.Unlock()
	return encodeMeta(m, min(limit, metaLimit))
}

func (d delegate) NotifyMsg(b []byte) {
	if len(b) < 2 {
		return
	}
	switch b[0] {
	case msgHeartbeat:
		d.c.push(event{kind: evHeartbeat, from: string(b[1:]), at: d.c.cfg.Now()})
	case msgState:
		d.c.push(event{kind: evState, data: append([]byte(nil), b[1:]...)})
	}
}

func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	if d.c.queue == nil {
		return nil
	}
	out := d.c.queue.GetBroadcasts(overhead, limit)
	if d.c.cfg.Faults.stateMutedFor(d.c.cfg.NodeID) {
		out = slices.DeleteFunc(out, func(b []byte) bool { return len(b) > 0 && b[0] == msgState })
	}
	return out
}

func (d delegate) LocalState(join bool) []byte {
	if d.c.cfg.Gossiper == nil || d.c.cfg.Faults.stateMutedFor(d.c.cfg.NodeID) {
		return nil
	}
	return d.c.cfg.Gossiper.LocalState()
}

func (d delegate) MergeRemoteState(buf []byte, join bool) {
	if len(buf) > 0 {
		d.c.push(event{kind: evState, data: append([]byte(nil), buf...)})
	}
}

type eventDelegate struct{ c *Cluster }

func (e eventDelegate) NotifyJoin(n *memberlist.Node)   { e.c.notify(evJoin, *n) }
func (e eventDelegate) NotifyLeave(n *memberlist.Node)  { e.c.notify(evLeave, *n) }
func (e eventDelegate) NotifyUpdate(n *memberlist.Node) { e.c.notify(evUpdate, *n) }

// notify records n, copied while memberlist holds its lock, for resync,
// and hands the event on. gossipMu is held only for a map write.
func (c *Cluster) notify(kind eventKind, n memberlist.Node) {
	c.gossipMu.Lock()
	c.gossiped[n.Name] = gossipedNode{node: n, alive: kind != evLeave}
	c.gossipMu.Unlock()
	c.push(event{kind: kind, node: n, at: c.cfg.Now()})
}

// slogWriter carries memberlist's log lines into slog at debug level
// (warnings and errors at warn). Anyone who reaches the gossip port can
// cause a warning per packet (one that does not decrypt), so warnings are
// clipped and rate-limited: at most memberlistLogMax per
// memberlistLogWindow, the next one saying how many were held back.
type slogWriter struct {
	log   *slog.Logger
	warns *logsafe.Limiter
}

// Memberlist warnings are logged at most memberlistLogMax times per
// memberlistLogWindow.
const (
	memberlistLogMax    = 10
	memberlistLogWindow = time.Minute
)

func newSlogWriter(log *slog.Logger, now func() time.Time) slogWriter {
	return slogWriter{log: log, warns: logsafe.NewLimiter(memberlistLogMax, memberlistLogWindow, now)}
}

func (w slogWriter) Write(p []byte) (int, error) {
	line := logsafe.ClipTo(strings.TrimSpace(string(p)), 512)
	if !strings.Contains(line, "[ERR]") && !strings.Contains(line, "[WARN]") {
		w.log.Debug(line, "component", "memberlist")
		return len(p), nil
	}
	ok, suppressed := w.warns.Allow()
	switch {
	case !ok:
	case suppressed > 0:
		w.log.Warn(line, "component", "memberlist", "suppressed", suppressed)
	default:
		w.log.Warn(line, "component", "memberlist")
	}
	return len(p), nil
}

// View is this node's view of the cluster, as GET /v1/cluster shows it;
// PeerListStatus and MemberStatus are its parts. The types are the API's
// (api/wire), so that the Go client reads them without building this
// package.
type (
	View           = wire.View
	PeerListStatus = wire.PeerListStatus
	MemberStatus   = wire.MemberStatus
)

// suspectAfter is how long a live peer may stay silent before it is SUSPECT:
// two missed heartbeats and some slack.
func (c *Cluster) suspectAfter() time.Duration {
	return 2*c.cfg.GossipInterval + c.cfg.GossipInterval/2
}

// States returns the state of every peer of the list, and of every node
// removed from it that still gossips (draining), by id.
func (c *Cluster) States() map[string]State {
	v := c.View()
	out := make(map[string]State, len(v.Members))
	for _, m := range v.Members {
		out[m.ID] = m.State
	}
	return out
}

// View returns this node's view: every peer of the list, then any node that
// gossips but is not in the list.
func (c *Cluster) View() View {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	v := View{Node: c.cfg.NodeID, Version: c.cfg.Version,
		PeerList: PeerListStatus{Source: c.cfg.PeersEndpoint, Peers: len(c.peers.Peers), Refusal: c.refusal}}
	if !c.loadedAt.IsZero() {
		t := c.loadedAt.UTC()
		v.PeerList.LoadedAt = &t
	}
	listed := map[string]bool{}
	for _, p := range c.peers.Peers {
		listed[p.ID] = true
		ms := MemberStatus{ID: p.ID, InPeerList: true, URL: p.URL, Gossip: p.Gossip, Sharding: p.Sharding, Replica: p.Replica, Voter: p.Voter}
		if p.ID == c.cfg.NodeID {
			ms.Self, ms.State = true, Up
			meta := c.meta
			ms.FreeBytes, ms.Version, ms.Incarnation, ms.PublicURL = &meta.FreeBytes, meta.Version, meta.Incarnation, meta.PublicURL
			heard, ago := now.UTC(), int64(0)
			ms.LastHeard, ms.LastHeardMsAgo = &heard, &ago
		} else {
			m := c.members[p.ID]
			if m == nil {
				ms.State = Down
			} else {
				c.fillFromGossip(&ms, m, now)
			}
		}
		v.Members = append(v.Members, ms)
	}
	var unknown []MemberStatus
	for name, m := range c.members {
		if listed[name] || !m.alive {
			continue
		}
		ms := MemberStatus{ID: name}
		if m.node.Addr != nil {
			ms.Gossip = m.node.Address()
		}
		c.fillFromGossip(&ms, m, now)
		unknown = append(unknown, ms)
	}
	if !listed[c.cfg.NodeID] {
		// Removed from the list, still running (draining).
		meta := c.meta
		heard, ago := now.UTC(), int64(0)
		unknown = append(unknown, MemberStatus{ID: c.cfg.NodeID, Self: true, State: Up, URL: meta.InternalURL, PublicURL: meta.PublicURL,
			FreeBytes: &meta.FreeBytes, Version: meta.Version, Incarnation: meta.Incarnation, LastHeard: &heard, LastHeardMsAgo: &ago})
	}
	sort.Slice(unknown, func(i, j int) bool { return unknown[i].ID < unknown[j].ID })
	v.Members = append(v.Members, unknown...)
	return v
}

func (c *Cluster) fillFromGossip(ms *MemberStatus, m *memberInfo, now time.Time) {
	ms.State = stateOf(observation{alive: m.alive, lastHeard: m.lastHeard}, now, c.suspectAfter())
	if m.meta.ID != "" {
		free := m.meta.FreeBytes
		ms.FreeBytes, ms.Version, ms.Incarnation, ms.PublicURL = &free, m.meta.Version, m.meta.Incarnation, m.meta.PublicURL
		if !ms.InPeerList {
			ms.URL = m.meta.InternalURL
		}
	}
	if !m.lastHeard.IsZero() {
		heard := m.lastHeard.UTC()
		ago := now.Sub(m.lastHeard).Milliseconds()
		ms.LastHeard, ms.LastHeardMsAgo = &heard, &ago
	}
}

// Peers returns the current peer list.
func (c *Cluster) Peers() PeerList {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peers
}

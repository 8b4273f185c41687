// Package node wires one Shoal node together: its store, its partition
// writers, its API and its HTTP server, started and stopped as one.
package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/nodetls"
	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/placement"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// Node is a running Shoal node.
type Node struct {
	cfg     config.Config
	log     *slog.Logger
	store   *store.Store
	writer  *store.Writer
	api     *api.Server
	cluster *cluster.Cluster
	leases  *lease.Manager
	shipper *replicate.Shipper
	metrics *api.Metrics
	handoff *handoffs
	promote *promotion
	started time.Time
	commits *commitRecorder // COMMIT_LOG (nil: off)
	// emptyAtStart: the store held nothing at start (a new node, or one
	// whose data directory was emptied).
	emptyAtStart bool

	table    *shard.Table
	place    *peerRing
	running  sync.WaitGroup
	listener net.Listener
	// closers close what StartWith opened, last first (Close).
	closers closers

	// tenureWake wakes startTenures: a tenure may have become writable.
	tenureWake chan struct{}
	// replicasWake wakes chooseReplicasLoop: a tenure began, whose
	// replica list must be recorded before it takes writes.
	replicasWake chan struct{}
	// deciding holds, per partition (int -> []string), the regular copies
	// this node as master replaces in the round of replica choice under
	// way (decided) and those whose replacement it is deciding now (see
	// countedOf, replacement).
	deciding sync.Map
	// listHistory: per partition, the lists of copies of its tenure this
	// node recorded since the one the voters were last known to keep,
	// that one included (refreshCountable); owned by chooseReplicas.
	listHistory map[int]listHistory
	// decided: per partition, the copies a ReplaceNow decision of this
	// round replaces (written by chooseReplicas' round, cleared with
	// deciding; decidedMu held, as a test decides a swap beside the round).
	decided   map[int][]string
	decidedMu sync.Mutex
	// countable is, per partition, the copies whose acknowledgements count
	// (countedOf), worked out by refreshCountable; replaced whole.
	countable atomic.Pointer[map[int]countableCopies]
	// keptLists is closed and replaced when the voters keep a new list
	// of copies (commits waiting in awaitWritable, and a paused swap,
	// watch it: nextListKept).
	keptLists struct {
		sync.Mutex
		ch chan struct{}
	}
	// checks are the nodes that asked this node, as a partition's master,
	// to check their copy (see askForChecks).
	checks copyChecks
	// tenureLists: the replica lists of the partitions this node mastered,
	// as last recorded in its store; owned by chooseReplicas once the node
	// runs.
	tenureLists     map[int]store.TenureList
	listsSaveLogged time.Time
	// recordedLists is tenureLists as last recorded, for the lease
	// manager's renewals (copyList); replaced whole, never changed.
	recordedLists atomic.Pointer[map[int]store.TenureList]
	// firstLists: the incarnations of the copies (master first) of each
	// list this node recorded, in this run, as a tenure's first while
	// the partition held nothing here, for its renewals to carry
	// (record.CopyList.Incarnations); replaced whole, never changed.
	firstLists atomic.Pointer[map[int]firstList]
	// stopping is set when Close begins: the node takes no lease after.
	stopping atomic.Bool
	// ready is what /readyz says.
	ready *readiness
	// tenures gathers the partitions won for one log line per round.
	tenures tenureLog
	// verdicts is the campaign rule's last verdict per partition, logged
	// at debug when it changes.
	verdicts verdictLog
	// drainWaits: since when draining copies are kept (chooseReplicas).
	drainWaits drainWaits
}

// Options are the parts tests replace; production uses the zero value.
type Options struct {
	// Faults cuts links between nodes (gossip and node-to-node HTTP).
	Faults *cluster.Faults
	// OnCommit is told of every acknowledged commit (see store.WriterOptions).
	OnCommit func(partition int, epoch uint64, start, end time.Time)
	// ReplicationQueue bounds the changes queued per replica and partition
	// (0: the default); tests make it small to force catch-ups.
	ReplicationQueue int
	// ReplicationBatchDocs bounds the documents of one replication request
	// (0: replicate.DefaultMaxBatchDocs); tests make it small so that a
	// copy of a few hundred documents takes many chunks.
	ReplicationBatchDocs int
}

// Start opens the store, checks it belongs to this configuration, and
// serves the API on cfg.HTTPAddr (":0" or "127.0.0.1:0" pick a free port).
// Everything Start started is stopped by Close.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger) (*Node, error) {
	return StartWith(ctx, cfg, log, Options{})
}

// StartWith is Start with test options.
func StartWith(ctx context.Context, cfg config.Config, log *slog.Logger, opts Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node", cfg.NodeID)
	if cfg.Insecure {
		log.Warn("running with --insecure: every request is treated as admin, no token is checked; never do this outside development")
	}
	var tlsFiles *nodetls.Material
	if cfg.TLS().Enabled() {
		m, err := nodetls.Load(cfg.TLS(), log)
		if err != nil {
			return nil, err
		}
		tlsFiles = m
	}
	metrics := api.NewMetrics()
	st, err := store.Open(ctx, store.Options{URI: cfg.MongoURI, Database: cfg.MongoDB, DataDir: cfg.DataDir, SyncNormal: cfg.StoreSync == "normal",
		Logger: log, Observe: metrics.ObserveStore})
	if err != nil {
		return nil, err
	}
	// Each part opened from here pushes what closes it: a start that fails
	// closes what it opened, last first, and returns the error that
	// stopped it; Close closes the rest the same way.
	var cs closers
	cs.push(func(ctx context.Context) error {
		if err := st.Close(ctx); err != nil {
			return fmt.Errorf("closing the store: %w", err)
		}
		return nil
	})
	fail := func(err error) (*Node, error) {
		cs.close(ctx)
		return nil, err
	}
	// A store no node has started on (no meta recorded) is new: its
	// copies are marked as awaiting full copies before its meta is
	// recorded, so that a start that fails in between leaves it new.
	recorded, _, err := st.PartitionCount(ctx)
	if err != nil {
		return fail(err)
	}
	newStore := recorded == 0
	if !newStore {
		if err := st.CheckPartitionCount(ctx, cfg.NodeID, cfg.PartitionCount); err != nil {
			return fail(err)
		}
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fail(fmt.Errorf("listening on HTTP_ADDR %s: %w", cfg.HTTPAddr, err))
	}
	cs.push(func(context.Context) error {
		ln.Close() // once served, the HTTP server's shutdown closed it already
		return nil
	})
	pub := cfg.PublicURL
	if pub == "" && cfg.PeersEndpoint == "" {
		pub = listenURL(ln, tlsFiles.Serving())
	}
	var dialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	if tlsFiles != nil {
		dialTLS = tlsFiles.DialTLS((&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	}
	table := shard.NewTable(cfg.PartitionCount)
	cl, err := cluster.Start(ctx, cluster.Config{NodeID: cfg.NodeID, PublicURL: pub, DataDir: cfg.DataDir,
		PeersEndpoint: cfg.PeersEndpoint, PeersRefresh: cfg.PeersRefresh, GossipAddr: cfg.GossipAddr,
		Secret: []byte(cfg.ClusterSecret), GossipInterval: cfg.GossipInterval, SuspectTimeout: cfg.GossipSuspectTimeout,
		Version: Version, Logger: log, Gossiper: tableGossip{table: table, log: log}, Faults: opts.Faults, DialTLS: dialTLS})
	if err != nil {
		return fail(err)
	}
	cs.push(func(context.Context) error {
		if err := cl.Close(); err != nil {
			return fmt.Errorf("leaving the cluster: %w", err)
		}
		return nil
	})
	if self, ok := cl.Peers().Get(cfg.NodeID); ok && cfg.PeersEndpoint != "" {
		if err := checkScheme(self.URL, tlsFiles.Serving()); err != nil {
			return fail(err)
		}
	}
	place := &peerRing{partitions: cfg.PartitionCount, cluster: cl, log: log}
	if place.Ring() == nil {
		return fail(fmt.Errorf("the peer list cannot be placed on a ring of %d partitions: %s", cfg.PartitionCount, place.err))
	}
	n := &Node{cfg: cfg, log: log, store: st, cluster: cl, table: table, place: place, listener: ln,
		started: time.Now(), metrics: metrics, tenureWake: make(chan struct{}, 1), replicasWake: make(chan struct{}, 1),
		listHistory: map[int]listHistory{}, decided: map[int][]string{}}
	solo := cfg.PeersEndpoint == ""
	var initialVoters []string
	if stored, _, err := st.VoterSet(ctx); err == nil && len(stored) == 0 && !solo {
		initialVoters = learnVoterSet(ctx, cl, cfg.NodeID, cfg.LeaseTTL, log)
	}
	n.leases, err = lease.NewManager(ctx, lease.ManagerConfig{Self: cfg.NodeID, Partitions: cfg.PartitionCount, TTL: cfg.LeaseTTL,
		Store: st, Transport: leaseTransport{cl}, Plan: n.leasePlan, WaitAtStart: !solo, OnChange: n.masterChanged, Logger: log,
		OnListKept: func(int) {
			n.keptLists.Lock()
			if n.keptLists.ch != nil {
				close(n.keptLists.ch)
				n.keptLists.ch = nil
			}
			n.keptLists.Unlock()
			n.wakeReplicas()
			n.wakeTenures()
		},
		InitialVoters: initialVoters})
	if err != nil {
		return fail(err)
	}
	// Its clocks start with the lease manager's, whose voter waits out
	// one LEASE_TTL from now (none for a node of its own).
	startWait := cfg.LeaseTTL
	if solo {
		startWait = 0
	}
	n.ready = &readiness{started: time.Now(), startWait: startWait, leaseTTL: cfg.LeaseTTL, withoutMaster: func() []int {
		// A master this node names itself but does not hold the lease of
		// is a tenure from before its start (its store's record), or one
		// that lapsed: not a master that takes writes (a full restart
		// names every partition's old master at once).
		var none []int
		for _, a := range table.Snapshot() {
			if _, held := n.leases.Holds(a.Partition); a.Master == "" || a.Master == cfg.NodeID && !held {
				none = append(none, a.Partition)
			}
		}
		return none
	}}
	replicas := newReplicaTransport(cl, time.Now)
	n.shipper = replicate.New(replicate.Config{Logger: log, MaxQueued: opts.ReplicationQueue, MaxBatchDocs: opts.ReplicationBatchDocs,
		Mastership: shipperMastership{n}, Source: shipperSource{n}, Transport: replicas,
		Observer: copyMetrics{metrics: metrics, place: place}})
	metrics.Registry.MustRegister(api.NewReplicationCollector(n.shipper.Lags))
	n.writer = store.NewWriter(st, cfg.PartitionCount, store.WriterOptions{CacheBytes: cfg.DocCacheBytes, OnCommitted: n.shipper.Committed,
		ObserveBatch: metrics.ObserveCommit, Logger: log, Lease: n.writable, AwaitLease: n.awaitWritable, OnCommit: opts.OnCommit,
		OnStaleEpoch: n.leases.Fence})
	// Handoffs and promotion get the parts they use, and the node's rules
	// as functions. Nothing calls them before the node runs (the lease
	// manager reads only the plan's voters while it is made).
	n.handoff = newHandoffs(&handoffDeps{self: cfg.NodeID, incarnation: cl.Incarnation(), partitions: cfg.PartitionCount, leaseTTL: cfg.LeaseTTL,
		maxMoves: cfg.MaxConcurrentMoves, log: log, leases: n.leases, writer: n.writer, shipper: n.shipper, table: table,
		peers: cl, ring: place.Ring, observe: metrics.ObserveHandoff,
		writable: n.writable, caughtUp: n.caughtUp, masterChanged: n.masterChanged, stopping: n.stopping.Load})
	n.promote = newPromotion(&promotionDeps{self: cfg.NodeID, incarnation: cl.Incarnation(), partitions: cfg.PartitionCount, leaseTTL: cfg.LeaseTTL,
		log: log, leases: n.leases, writer: n.writer, table: table, peers: cl, voters: place.Voters,
		copies: n.copies, lapseOf: n.lapseOf, lost: n.memberLost, wakeTenures: n.wakeTenures, wakeReplicas: n.wakeReplicas,
		broadcast: func(as []shard.Assignment) { n.cluster.Broadcast(shard.EncodeAssignments(as)) }})
	if err := n.writer.LoadAll(ctx); err != nil {
		return fail(fmt.Errorf("reading partition positions: %w", err))
	}
	if newStore {
		// This node may have held partitions in a data directory that
		// was lost: no copy of this store counts until it is whole.
		if err := n.writer.MarkNew(ctx); err != nil {
			return fail(err)
		}
		if err := st.CheckPartitionCount(ctx, cfg.NodeID, cfg.PartitionCount); err != nil {
			return fail(err)
		}
	}
	// What this node knows of each partition's masters survives a restart
	// through its own tenures: a node that mastered a partition names
	// itself at that epoch until the cluster tells it of a later master,
	// so that after a full restart no node takes the empty-table path
	// (the preferred master campaigning) for a partition with history.
	// It names the replicas it had recorded for that tenure too, not
	// itself alone: a copy that holds majority writes keeps its slot until
	// the replicas chosen after it hold them (the fault suite's seed 9300:
	// after a full restart the master chose two other replicas at once,
	// and one of them, without the last writes, was promoted).
	if n.tenureLists, err = st.TenureReplicas(ctx); err != nil {
		return fail(err)
	}
	loaded := n.tenureLists
	n.recordedLists.Store(&loaded)
	// A store that held nothing at start (no lease record, no tenure, no
	// history of any partition) is a new node's, or one whose data
	// directory was emptied: its knowing nothing of a partition does not
	// mean the partition has no history (placement.WantInput.EmptyStore).
	n.emptyAtStart = n.leases.StartedEmpty() && len(n.tenureLists) == 0
	for p := 0; p < cfg.PartitionCount && n.emptyAtStart; p++ {
		n.emptyAtStart = n.writer.NewestEpoch(p) == 0
	}
	for p := 0; p < cfg.PartitionCount; p++ {
		// Epochs this node's store has seen are never proposed again, even
		// if the voters' records were lost.
		n.leases.Learn(p, n.writer.NewestEpoch(p))
		if e := n.writer.Tenure(p); e > 0 {
			table.Merge(placement.TenureAssignment(cfg.NodeID, p, e, n.tenureLists[p].Epoch, n.tenureLists[p].Replicas))
		}
	}
	var acks api.Acknowledger
	if cfg.CommitLog != "" {
		if n.commits, err = openCommitLog(cfg.CommitLog, cfg.NodeID, log); err != nil {
			return fail(err)
		}
		cs.push(func(context.Context) error {
			if err := n.commits.Close(); err != nil {
				return fmt.Errorf("closing COMMIT_LOG: %w", err)
			}
			return nil
		})
		acks = n.commits
		log.Warn("COMMIT_LOG is set: every acknowledged write is recorded (fault testing)", "path", cfg.CommitLog)
	}
	// Nothing fails from here. The writer and the shipper run nothing
	// before the node does, so a failed start has left them alone; their
	// closers go here, where they close after the background loops: the
	// shipper stops, then the writer commits what is still queued.
	// SHUTDOWN_GRACE bounds the server's shutdown and those last commits
	// together, from the start of the first.
	graceEnd := sync.OnceValue(func() time.Time { return time.Now().Add(cfg.ShutdownGrace) })
	cs.push(func(ctx context.Context) error {
		graceCtx, cancel := context.WithDeadline(ctx, graceEnd())
		defer cancel()
		return n.writer.Close(graceCtx)
	})
	cs.push(func(context.Context) error {
		n.shipper.Close()
		return nil
	})
	n.api = api.New(api.Config{NodeID: cfg.NodeID, PartitionCount: cfg.PartitionCount, MaxBodyBytes: cfg.MaxBodyBytes,
		MaxDocumentBytes: cfg.MaxDocumentBytes, MaxDocumentFields: cfg.MaxDocumentFields,
		BodyReadTimeout: cfg.BodyReadTimeout, WriteTimeout: cfg.WriteTimeout,
		QueryBudget: cfg.QueryBudget, MaxPageBytes: cfg.MaxPageBytes,
		AuthSecret: []byte(cfg.AuthSecret), TokenAudience: cfg.TokenAudience, TokenMaxTTL: cfg.TokenMaxTTL, Insecure: cfg.Insecure, Pprof: cfg.Pprof, NodeCertificates: cfg.TLS().RequireClientCert, Logger: log, Metrics: metrics, Cluster: cl,
		Leases: leaseView{n}, Table: table, Voter: n.leases, Placement: n, VoterSets: n.leases.VoterSets,
		Replication: n.shipper, Copies: n.copies, Counted: n.countedOf, Committed: n.Committed, ReadTryTimeout: cfg.ReadTryTimeout, Handoffs: n.handoff,
		Moves: n.handoff.Moves, Unreconciled: n.unreconciled, CheckCopy: n.checkCopy, Acknowledgements: acks,
		Readiness: func() api.Readiness { return n.ready.now(time.Now()) }}, st, n.writer)
	// The background loops stop after the server: requests in flight
	// finish while they still run.
	runCtx, stop := context.WithCancel(context.Background())
	cs.push(func(context.Context) error {
		stop()
		n.running.Wait()
		return nil
	})
	// ReadTimeout and WriteTimeout bound what the server reads and writes
	// outside the API's own per-request deadlines (see api deadlines):
	// headers, the body a handler left unread, the server's own answers.
	server := &http.Server{Handler: n.api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ReadTimeout: cfg.BodyReadTimeout, WriteTimeout: cfg.WriteTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), TLSConfig: tlsFiles.ServerConfig()}
	served := make(chan error, 1)
	go func() {
		if tlsFiles.Serving() {
			served <- server.ServeTLS(ln, "", "")
			return
		}
		served <- server.Serve(ln)
	}()
	// Close first stops taking requests and lets those in flight finish.
	cs.push(func(ctx context.Context) error {
		n.api.SetReady(false)
		graceCtx, cancel := context.WithDeadline(ctx, graceEnd())
		defer cancel()
		// The replication streams this node serves are connections the
		// HTTP server no longer tracks: they end beside its Shutdown
		// (api.CloseStreams). Those it opened to its replicas are its own.
		replicas.Close()
		streamsClosed := make(chan struct{})
		go func() {
			defer close(streamsClosed)
			n.api.CloseStreams()
		}()
		var errs []error
		if err := server.Shutdown(graceCtx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			server.Close()
		}
		select { // a request being applied on one takes at most api.streamApplyTimeout
		case <-streamsClosed:
		case <-graceCtx.Done():
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	n.closers = cs
	if solo {
		// A cluster of one is its own only voter: take every lease before
		// taking traffic.
		n.leases.Round(runCtx)
	}
	n.running.Add(7)
	go func() {
		defer n.running.Done()
		n.leases.Run(runCtx)
	}()
	go func() {
		defer n.running.Done()
		n.handoff.run(runCtx)
	}()
	go func() {
		defer n.running.Done()
		n.promote.run(runCtx)
	}()
	go func() {
		defer n.running.Done()
		n.chooseReplicasLoop(runCtx)
	}()
	go func() {
		defer n.running.Done()
		n.purgeLoop(runCtx)
	}()
	go func() {
		defer n.running.Done()
		n.startTenures(runCtx)
	}()
	go func() {
		defer n.running.Done()
		n.askForChecks(runCtx)
	}()
	n.api.SetReady(true)
	mode := "embedded store in " + cfg.DataDir
	if cfg.MongoURI != "" {
		mode = "MongoDB database " + cfg.MongoDB
	}
	log.Info("node started", "url", n.URL(), "store", mode, "partitions", cfg.PartitionCount)
	return n, nil
}

// learnVoterSet asks the peers, for a node whose store holds no voter set
// (new, or wiped), which lease voter set the cluster uses, so that it steps
// from that set toward its peer list's one member at a time like every
// node. It returns nil when no peer answers within LEASE_TTL (a new
// cluster: every node starts from the peer list).
func learnVoterSet(ctx context.Context, cl *cluster.Cluster, self string, ttl time.Duration, log *slog.Logger) []string {
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	for _, p := range cl.Peers().Peers {
		if p.ID == self {
			continue
		}
		var answer api.VoterSetsAnswer
		if err := callPeer(ctx, cl, "peer", p.ID, "/internal/v1/voters", struct{}{}, &answer); err != nil || len(answer.Current) == 0 {
			continue
		}
		log.Info("no lease voter set stored; starting from the one in use", "voters", answer.Current, "told_by", p.ID)
		return answer.Current
	}
	return nil
}

// URL is where the node's API answers.
func (n *Node) URL() string { return listenURL(n.listener, n.cfg.TLSCertFile != "") }

func listenURL(ln net.Listener, https bool) string {
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}

// checkScheme refuses a peer-list url of this node that does not match
// how it serves: the other nodes would call it in the wrong protocol.
func checkScheme(url string, https bool) error {
	switch {
	case https && strings.HasPrefix(url, "http://"):
		return fmt.Errorf("this node serves HTTPS (TLS_CERT_FILE) but its url in the peer list is %s: make it https:// there, or the other nodes cannot reach it", url)
	case !https && strings.HasPrefix(url, "https://"):
		return fmt.Errorf("this node's url in the peer list is %s but it serves plain HTTP: set TLS_CERT_FILE and TLS_KEY_FILE, or make the url http://", url)
	}
	return nil
}

// leasePlan is what the lease manager wants each round: the voters of the
// peer list, and per partition whether this node should master it (see
// placement.Decide).
func (n *Node) leasePlan() lease.Plan {
	ring, voters := n.place.current()
	view := n.cluster.View()
	states := map[string]cluster.State{}
	members := map[string]cluster.MemberStatus{}
	for _, m := range view.Members {
		states[m.ID], members[m.ID] = m.State, m
	}
	now := time.Now()
	lost := func(id string) bool { return n.lostIn(members, id, now) }
	copies := n.copies()
	return lease.Plan{Voters: voters, Settle: n.cfg.LeaseTTL + n.cfg.PeersRefresh, List: n.copyList,
		Want: func(p int) bool {
			// A node is passed over when gossip does not see it UP, or when
			// this node, as a voter, saw its lease of p end with nobody
			// after it: the lapsed holder, and a master the table names at
			// that epoch or before (its tenure is over even if a later
			// campaign got a grant here and then lapsed).
			l := n.lapseOf(p)
			_, holding := n.leases.Holds(p)
			a := n.table.Get(p)
			_, learned := n.leases.Learned(p)
			in := placement.WantInput{
				Self: n.cfg.NodeID, Assignment: a, Regular: shard.WriteQuorum(copies).Regular(a.Responsible), Succession: shard.Succession(ring, p),
				Holding: holding, Stopping: n.stopping.Load(), HandingOff: n.handoff.inProgress(p), Receiving: n.handoff.receiving(p),
				NewestEpoch: n.writer.NewestEpoch(p), LearnedHolder: learned, EmptyStore: n.emptyAtStart,
				// Superseded also when this node gave its tenure up
				// because a copy was ahead (ConfirmTenure).
				Superseded: learned != "" && learned != n.cfg.NodeID || a.Master == n.cfg.NodeID && n.promote.yieldedAt(p, a.Epoch),
				Up:         func(id string) bool { return states[id] == cluster.Up && !l.Over(id, a) },
				Lost:       lost,
			}
			verdict := placement.Decide(in)
			want := verdict.Settle(in, placement.Answers{
				Promote: func(regular []string, up func(string) bool, named string) bool {
					return n.promote.mayCampaign(p, regular, up, func(id string) bool { return states[id] == cluster.Up }, named)
				},
				TakeOver: func(master string) bool {
					return states[master] == cluster.Up && n.promote.mayTakeOver(p, master)
				},
				Retake: func(regular []string, up func(string) bool) bool {
					return n.promote.mayRetake(p, n.writer.Applied(p), regular, up)
				},
			})
			n.verdicts.note(n.log, p, fmt.Sprintf("ask %s, campaign %v", verdict.Ask, want), in, l)
			return want
		}}
}

// lapseOf is what this node knows of partition p's last lease: its own
// voter record, or else what a majority of the voters said recently.
func (n *Node) lapseOf(p int) placement.Lapse {
	var own placement.Lapse
	own.Holder, own.Epoch, own.Ended = n.leases.Lapsed(p)
	return placement.KnownLapse(own, n.promote.lapseHeard(p), n.table.Get(p).Epoch)
}

// writable reports whether this node may change partition p now, and at
// which epoch: it holds the lease, a tenure won by the promotion rule has
// been confirmed (until then it neither writes nor ships), and a majority
// of the lease voters keeps the list of regular copies its table counts
// writes on. That list is recorded in this node's store first (only a
// recorded list is carried to the voters, see copyList): a master
// restarted with no list of its tenure names itself alone (see
// placement.TenureAssignment), and the replicas it chooses then count at
// once, so had the tenure written before its list was recorded, its
// majority writes could be on copies that list no longer names. And a
// node that takes the partition over reads the list from the voters, not
// from gossip.
func (n *Node) writable(p int) (uint64, bool) {
	e, ok, _ := n.writableOrListPending(p)
	return e, ok
}

// writableOrListPending is writable, and when not, whether only the list
// of copies stands in the way (listPending): this node holds its
// confirmed lease at epoch and masters p in its table, but the voters do
// not keep a list naming every copy the table counts on yet.
func (n *Node) writableOrListPending(p int) (epoch uint64, ok, listPending bool) {
	e, ok := n.leases.Holds(p)
	if !ok || !n.promote.confirmed(p, e) {
		return 0, false, false
	}
	a := n.table.Peek(p) // on every commit's path: only read
	if a.Master != n.cfg.NodeID || a.Epoch != e {
		return 0, false, false
	}
	if !n.leases.KeptCovers(p, e, shard.WriteQuorum(n.copies()).Regular(a.Responsible)) {
		return e, false, true
	}
	return e, true, false
}

// awaitWritable waits, after a commit at epoch that writable refused, while
// only partition p's list of copies is changing: this node still holds
// its confirmed lease at epoch and masters p in its table, but the voters
// keep a list that does not name every copy the table counts on (a
// replica swap made without a pause: the voters keep the new list first,
// and the table takes it at the next round of replica choice, which their
// keeping wakes; or the count of copies changed and a list of the new
// count is on its way to them). It checks again at every change of the
// table and every list the voters keep, for at most LEASE_TTL, and
// reports whether p is writable at epoch again; the commit is then
// acknowledged on the new list rather than failed as of unknown outcome.
func (n *Node) awaitWritable(ctx context.Context, p int, epoch uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL)
	defer cancel()
	for {
		// Taken before the checks: a change after them closes them.
		changed, kept := n.table.Changed(), n.nextListKept()
		e, ok, listPending := n.writableOrListPending(p)
		if ok || !listPending || e != epoch {
			return ok && e == epoch
		}
		select {
		case <-changed:
		case <-kept:
		case <-ctx.Done():
			e, ok := n.writable(p) // a change may have come with the deadline
			return ok && e == epoch
		}
	}
}

// nextListKept returns a channel closed when the voters next keep a new
// list of copies of any partition this node masters.
func (n *Node) nextListKept() <-chan struct{} {
	n.keptLists.Lock()
	defer n.keptLists.Unlock()
	if n.keptLists.ch == nil {
		n.keptLists.ch = make(chan struct{})
	}
	return n.keptLists.ch
}

// masterChanged records a master this node became or learned of in the
// partition table, and gossips it when it is news.
func (n *Node) masterChanged(partition int, holder string, epoch uint64) {
	a := shard.Assignment{Partition: partition, Master: holder, Epoch: epoch, Responsible: []string{holder}}
	if holder == n.cfg.NodeID {
		// A new tenure keeps the replicas the previous master had chosen
		// (sticky); chooseReplicas then repairs the list.
		if old := n.table.Get(partition); len(old.Responsible) > 1 {
			for _, r := range old.Responsible {
				if r != holder {
					a.Responsible = append(a.Responsible, r)
				}
			}
		}
	}
	if holder == n.cfg.NodeID {
		n.promote.won(partition, epoch, n.table.Get(partition))
	}
	if n.table.Merge(a) && holder == n.cfg.NodeID {
		n.log.Debug("master of partition", "partition", partition, "epoch", epoch)
		n.tenures.add(partition, epoch)
		n.cluster.Broadcast(shard.EncodeAssignments([]shard.Assignment{a}))
	}
	if holder == n.cfg.NodeID {
		// Woken once the table names the tenure: chooseReplicas skips a
		// tenure the table does not know yet, and a wake-up taken before
		// the merge left the list to the next tick.
		n.wakeTenures()
		n.wakeReplicas()
	}
}

// chooseReplicasLoop keeps the responsible list of every partition this
// node masters: the master, then REPLICATION_FACTOR-1 replicas chosen by
// most free disk among UP peers with replica: true, sticky once chosen.
func (n *Node) chooseReplicasLoop(ctx context.Context) {
	tick := time.NewTicker(max(n.cfg.LeaseTTL/3, 200*time.Millisecond))
	defer tick.Stop()
	turn := 0
	retryAt := map[int]time.Time{} // a paused swap that failed is not tried again before
	for {
		select {
		case <-ctx.Done():
			n.tenures.flush(n.log)
			return
		case <-tick.C:
		case <-n.replicasWake:
		}
		n.tenures.flush(n.log)
		if due := placement.SwapsDue(n.chooseReplicas(ctx), retryAt, time.Now()); len(due) > 0 {
			// One paused swap per tick, the partitions taking turns.
			s := due[turn%len(due)]
			if n.replaceUnderPause(ctx, s, n.replicasWake) {
				retryAt[s.Partition] = time.Now().Add(swapBackoff * n.cfg.LeaseTTL)
			}
			turn++
		}
		n.shipper.Ensure(n.cfg.PartitionCount)
	}
}

// replaceUnderPause lets a partition's newcomers take the slots of the
// regular copies they replace while the partition's writes are paused: the
// replaced copies keep taking every live change until then, as fast as the
// newcomers or faster (a draining node that holds little applies its
// batches sooner), so under a steady write load the newcomers may never
// be found holding what those copies hold (seed 2002: a removed node kept
// as a replica for two minutes). With the history standing still the
// newcomers reach the master's last change, and chooseReplicas, run again
// before writes resume, makes the swap; no write can be acknowledged on
// the replaced copies' account in between.
//
// A swap gives way when wake fires (a tenure began on this node): the
// tenure takes no writes until this loop records its replica list (see
// writable), and a swap may wait LEASE_TTL for the pause and 2 s more
// for the newcomers (a handoff's receiver refused writes for those 2 s).
//
// backoff says the swap failed and waits swapBackoff before it is tried
// again; one that gave way is tried again at once, after the tenure's list
// is recorded.
func (n *Node) replaceUnderPause(ctx context.Context, s placement.PausedSwap, wake <-chan struct{}) (backoff bool) {
	swapCtx, woken, stop := untilWoken(ctx, wake)
	defer func() {
		stop()
		if woken() {
			// The wake-up was taken here: pass it on, whatever the
			// outcome, so that the loop records the new tenure's list
			// at once.
			n.wakeReplicas()
			backoff = false
		}
	}()
	pauseCtx, cancel := context.WithTimeout(swapCtx, n.cfg.LeaseTTL)
	resume, err := n.writer.Pause(pauseCtx, s.Partition)
	cancel()
	if err != nil {
		return true
	}
	defer resume()
	if _, ok := n.leases.Holds(s.Partition); !ok {
		return true // the lease went while the pause was awaited
	}
	last := n.writer.Position(s.Partition)
	shipCtx, cancel := context.WithTimeout(swapCtx, handoffShipTimeout)
	_, err = n.shipper.WaitReplicated(shipCtx, s.Partition, last, func() []string { return s.Newcomers }, len(s.Newcomers))
	cancel()
	if err != nil {
		if !woken() {
			n.log.Debug("newcomer replicas did not catch up while writes paused; tried again later", "partition", s.Partition,
				"newcomers", s.Newcomers, "position", last, "copies", describeCopies(n.shipper, s.Partition, s.Newcomers), "err", err)
		}
		return true
	}
	// The new list counts once the voters keep it and the table takes it
	// (chooseReplicas, again at every list they keep): writes stay paused
	// until then, or the copies replaced could acknowledge writes the
	// newcomers lack while a node that takes the partition over reads the
	// new list.
	deadline := time.Now().Add(n.cfg.LeaseTTL)
	for {
		kept := n.nextListKept() // before the round: a list kept after it closes it
		n.chooseReplicas(ctx)
		if n.listsNewcomers(s) || !time.Now().Before(deadline) || swapCtx.Err() != nil {
			return false
		}
		select {
		case <-kept:
		case <-time.After(time.Until(deadline)):
		case <-swapCtx.Done():
		}
	}
}

// listsNewcomers reports whether the table lists the newcomers of swap s
// among the regular copies.
func (n *Node) listsNewcomers(s placement.PausedSwap) bool {
	a := n.table.Get(s.Partition)
	regular := shard.WriteQuorum(n.copies()).Regular(a.Responsible)
	for _, id := range s.Newcomers {
		if !slices.Contains(regular, id) {
			return false
		}
	}
	return true
}

// untilWoken returns a context cancelled when wake fires (or parent ends),
// whether wake fired, and stop, which ends the watch; woken is final once
// stop has returned.
func untilWoken(parent context.Context, wake <-chan struct{}) (ctx context.Context, woken func() bool, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	var fired atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-wake:
			fired.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, fired.Load, func() { cancel(); <-done }
}

// swapBackoff is how many LEASE_TTLs a partition whose paused swap failed
// waits before the next: a newcomer that cannot catch up within the pause
// (cut off from the master while gossip sees it UP, or busy) would
// otherwise stall the partition's writes every round.
const swapBackoff = 5

// purgeLoop removes tombstones older than TOMBSTONE_RETENTION, on every
// node and for every partition it holds, master or replica: each node's
// horizon covers what it purged itself.
func (n *Node) purgeLoop(ctx context.Context) {
	tick := time.NewTicker(purgeInterval(n.cfg.TombstoneRetention))
	defer tick.Stop()
	var lastLogged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		purged, err := n.writer.PurgeTombstones(ctx, time.Now().Add(-n.cfg.TombstoneRetention))
		n.metrics.ObservePurged(purged)
		if err != nil && ctx.Err() == nil && time.Since(lastLogged) > time.Minute {
			lastLogged = time.Now()
			n.log.Warn("purging tombstones failed; retrying every tick (logged once a minute)", "err", err)
		}
	}
}

// purgeInterval is how often tombstones are purged: a quarter of the
// retention, between 50ms and 10 minutes.
func purgeInterval(retention time.Duration) time.Duration {
	return min(max(retention/4, 50*time.Millisecond), 10*time.Minute)
}

// copies is how many copies a partition should have: REPLICATION_FACTOR,
// or the number of peers that can hold one when the cluster is smaller.
func (n *Node) copies() int {
	holders := 0
	for _, p := range n.cluster.Peers().Peers {
		if p.Sharding || p.Replica {
			holders++
		}
	}
	return min(n.cfg.ReplicationFactor, max(holders, 1))
}

// Committed is the newest position of a partition's history this node
// knows a majority of the partition's copies hold: as its master, what the
// replicas' acknowledgements of this tenure show (replicate.Shipper.
// MajorityHeld); as a replica, what its master shipped, capped at what
// this copy applied (store.Writer.Committed). A node that became master
// keeps what it learned as a replica (its history holds it) until its own
// tenure's writes reach a majority. Zero when unknown (after a restart,
// until the master's next batch).
func (n *Node) Committed(partition int) store.Position {
	known, held := n.writer.Committed(partition), n.shipper.MajorityHeld(partition)
	if held.Compare(known) > 0 {
		return held
	}
	return known
}

// unreconciled lists the partitions this node does not master whose copy
// holds writes of its own last tenure that no later master has checked
// (see placement.UnreconciledCopy).
func (n *Node) unreconciled() []int {
	var out []int
	for p := 0; p < n.cfg.PartitionCount; p++ {
		_, holding := n.leases.Holds(p)
		if placement.UnreconciledCopy(holding, n.writer.Tenure(p), n.writer.Position(p), n.writer.NewestEpoch(p)) {
			out = append(out, p)
		}
	}
	return out
}

// replicasOf lists the replicas of a partition this node masters.
func (n *Node) replicasOf(p int) []string {
	if _, ok := n.leases.Holds(p); !ok {
		return nil
	}
	return n.table.Get(p).ReplicasOf(n.cfg.NodeID)
}

// chooseReplicas updates the responsible list of every partition this
// node masters, and returns the partitions whose newcomers wait only for
// the copies they replace to stand still (see replaceUnderPause).
func (n *Node) chooseReplicas(ctx context.Context) (due []placement.PausedSwap) {
	var cands []shard.Candidate
	now := time.Now()
	for _, m := range n.cluster.View().Members {
		if !m.InPeerList {
			continue
		}
		// A replica DOWN for longer than REPLICA_REPLACE_AFTER (counted
		// from when it was last heard, or from this node's start) is
		// replaced; the new one is caught up from scratch.
		c := shard.Candidate{ID: m.ID, Replica: m.Replica, Up: m.State == cluster.Up, Listed: true, DownTooLong: n.downTooLong(m, now)}
		if m.FreeBytes != nil {
			c.FreeBytes = *m.FreeBytes
		}
		cands = append(cands, c)
	}
	ring := n.place.Ring()
	upListed := map[string]bool{}
	for _, c := range cands {
		upListed[c.ID] = c.Up && c.Listed
	}
	draining := map[string]bool{}
	for _, m := range n.cluster.View().Members {
		if !m.InPeerList && !m.Self && m.State == cluster.Up {
			draining[m.ID] = true
		}
	}
	// The partitions this node masters, and the plan of each.
	var masters []shard.Assignment
	var plans []placement.ReplicaPlan
	var prevCounted []int // per plan: the count its list's writes were counted under
	keptDraining := map[drainWait]bool{}
	defer n.drainWaits.forgetAllBut(keptDraining)
	copies := n.copies()
	for p := 0; p < n.cfg.PartitionCount; p++ {
		epoch, ok := n.leases.Holds(p)
		if !ok {
			continue
		}
		a := n.table.Get(p)
		if a.Master != n.cfg.NodeID || a.Epoch != epoch {
			continue // the table learns of this tenure first
		}
		var current []string
		if len(a.Responsible) > 1 {
			current = a.Responsible[1:]
		}
		owner := ring.Owner(p)
		// More regular copies than copies counts now when the peer list
		// lost a node that could hold one: they stay until the copies left
		// hold what they held.
		recorded := n.tenureLists[p]
		listCopies := placement.ListCopies(epoch, recorded.Epoch, recorded.Replicas, current, n.cfg.ReplicationFactor)
		plan := placement.PlanReplicas(placement.ReplicaFacts{Partition: p, Self: n.cfg.NodeID, Current: current,
			Candidates: cands, ReplicationFactor: n.cfg.ReplicationFactor, Copies: copies, ListCopies: listCopies, Draining: draining,
			Asking: n.checks.asking(p, now, checkAskedFor*n.cfg.LeaseTTL), Owner: owner, OwnerUpListed: upListed[owner]},
			placement.ReplicaProgress{
				Replacement: func(newcomers, replaced []string) placement.ReplaceStep {
					return n.replacement(p, epoch, newcomers, replaced)
				},
				CaughtUp: func(replicas []string) bool { return n.caughtUp(p, replicas) },
				Heard:    func(r string) bool { return n.shipper.Heard(r, p, epoch) },
			})
		if plan.Paused != nil {
			due = append(due, placement.PausedSwap{Partition: p, Newcomers: plan.Paused})
		}
		n.checks.done(p, plan.Checked)
		if regular := plan.RegularReplicas(copies); len(regular) > max(copies-1, 0) {
			// The count of copies fell: copies leaving the regular ones
			// wait for the others to hold what they acknowledged.
			for _, r := range regular[max(copies-1, 0):] {
				keptDraining[drainWait{p, r}] = true
				if kept, log := n.drainWaits.kept(p, r, now); log {
					n.log.Info("a copy that no longer counts (the peer list holds fewer nodes for copies than REPLICATION_FACTOR) is kept until the copies that count hold what it acknowledged",
						"partition", p, "epoch", epoch, "replica", r, "kept_for", kept.Round(time.Second), "position", n.writer.Position(p),
						"copies", describeCopies(n.shipper, p, plan.Replicas))
				}
			}
		}
		for _, k := range plan.KeptDraining {
			keptDraining[drainWait{p, k.Replica}] = true
			if kept, log := n.drainWaits.kept(p, k.Replica, now); log {
				n.log.Info("a draining node's copy is still kept in a partition's list", "partition", p, "epoch", epoch,
					"draining", k.Replica, "kept_for", kept.Round(time.Second), "replicas_caught_up", k.CaughtUp,
					"draining_copy_checked", k.Heard, "position", n.writer.Position(p),
					"copies", describeCopies(n.shipper, p, plan.Replicas))
			}
		}
		masters = append(masters, a)
		plans = append(plans, plan)
		// The count the list's writes are counted under before this round:
		// as recorded in this tenure (none said: the count now), or, in a
		// tenure that recorded none, at most the copies its list held and
		// the count of the lists it was confirmed on (the voters' newest
		// hides them once this tenure's is kept: a copy that joined under a
		// lower count and has not caught up must not count at once).
		prev := min(copies, listCopies)
		if recorded.Epoch == epoch {
			prev = cmp.Or(recorded.Counted, copies)
		} else {
			for _, l := range n.leases.NewestLists(p, epoch) {
				if l.Counted > 0 {
					prev = min(prev, l.Counted)
				}
			}
		}
		prevCounted = append(prevCounted, prev)
	}
	for _, i := range placement.AdmitMoves(plans, n.cfg.MaxConcurrentMoves) {
		n.log.Info("copying a partition to its preferred master before handing it over", "partition", masters[i].Partition, "to", plans[i].Incoming)
	}
	// The regular copies of each list are recorded, so that a restart
	// names every copy a write may have been counted on. Only they are:
	// extra copies (a move's incoming master, a draining or checked copy)
	// come and go with every move and count for nothing. A list stays
	// until this node records a newer one for its partition: the later
	// master that superseded it may have recorded none yet. While the
	// store refuses the record, a change of regular copies waits for it
	// (placement.ListToApply), and a new tenure takes no writes (see
	// writable); extra copies still come and go (a loaded store refused
	// records for seconds, and every move and drain stalled behind it
	// when all changes waited).
	q := shard.WriteQuorum(copies)
	recordedNow := true // no change to record, or recorded
	lists := maps.Clone(n.tenureLists)
	for i, a := range masters {
		p, regular := a.Partition, plans[i].RegularReplicas(copies)
		// Copies that joined the regular ones as the count rose count
		// towards a check of the list only once they hold the partition's
		// whole history: until then the list says the lower count.
		counted, joined := placement.CountedFor(prevCounted[i], copies, regular, func(ids []string) placement.ReplaceStep {
			return n.joined(p, ids)
		})
		if joined != nil && plans[i].Paused == nil {
			due = append(due, placement.PausedSwap{Partition: p, Newcomers: joined})
		}
		next := store.TenureList{Epoch: a.Epoch, Replicas: slices.Clone(regular), Seq: 1, Counted: counted}
		if before, ok := lists[p]; ok && before.Epoch == a.Epoch {
			next.Seq = before.Seq
			if !slices.Equal(before.Replicas, next.Replicas) || before.Counted != next.Counted {
				next.Seq++
			}
		}
		lists[p] = next
	}
	saved := false
	if !maps.EqualFunc(lists, n.tenureLists, func(a, b store.TenureList) bool {
		return a.Epoch == b.Epoch && a.Seq == b.Seq && slices.Equal(a.Replicas, b.Replicas) && a.Counted == b.Counted
	}) {
		saveCtx, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL)
		err := n.store.SaveTenureReplicas(saveCtx, lists)
		cancel()
		recordedNow, saved = err == nil, err == nil
		if err != nil && time.Since(n.listsSaveLogged) > time.Minute {
			n.listsSaveLogged = time.Now()
			n.log.Warn("could not record the regular copies of this node's partitions; tried again every round (logged once a minute)", "err", err)
		}
	}
	recordedLists := n.tenureLists
	if saved {
		recordedLists = lists
	}
	var changed []shard.Assignment
	for i, a := range masters {
		var current []string
		if len(a.Responsible) > 1 {
			current = a.Responsible[1:]
		}
		recorded := recordedLists[a.Partition]
		replicas := placement.ListToApply(current, plans[i].Replicas, plans[i].RegularReplicas(copies), a.Epoch, recorded.Epoch, recorded.Replicas, recordedNow)
		if !slices.Equal(q.Replicas(replicas), q.Replicas(current)) && !n.listKept(a.Partition, recorded) &&
			!n.onlyLeaving(a.Partition, a.Epoch, q.Replicas(current), q.Replicas(replicas)) {
			// A change of regular copies waits until the lease voters keep
			// the new list: a node that takes the partition over reads the
			// list from them, not from gossip (the next renewal carries it).
			replicas = current
		}
		if slices.Equal(replicas, current) {
			continue
		}
		a.Responsible = append([]string{n.cfg.NodeID}, replicas...)
		a.Revision++
		if n.table.Merge(a) {
			changed = append(changed, a)
		}
	}
	if saved {
		// The new lists go to the voters only now, after the table: a
		// list without a copy the table still counts writes on would
		// leave the voters' list short of it (writable refuses every
		// commit until the table drops the copy too).
		var carry []int
		for p, l := range lists {
			if before, ok := n.tenureLists[p]; !ok || before.Epoch != l.Epoch || before.Seq != l.Seq {
				carry = append(carry, p)
			}
		}
		n.noteFirstLists(lists, carry) // before renewals can carry them
		n.tenureLists = lists
		n.recordedLists.Store(&lists)
		for _, p := range carry {
			n.leases.CarryList(p)
		}
	}
	// A swap decided this round is on the lists published above; one not
	// made, or not recorded, counts its copies again, and a count waiting
	// for one of them is made again.
	n.refreshCountable()
	n.decidedMu.Lock()
	n.deciding.Clear()
	clear(n.decided)
	n.decidedMu.Unlock()
	n.shipper.Recount()
	// Broadcasts must fit a UDP packet: a few assignments each.
	for len(changed) > 0 {
		k := min(len(changed), 8)
		n.cluster.Broadcast(shard.EncodeAssignments(changed[:k]))
		changed = changed[k:]
	}
	return due
}

// onlyLeaving is placement.LeavesFirst for partition p, this node's
// tenure at epoch, going from regular replicas current to next. Call
// before chooseReplicas publishes this round's lists: tenureLists is then
// the last list recorded before next's.
func (n *Node) onlyLeaving(p int, epoch uint64, current, next []string) bool {
	before, ok := n.tenureLists[p]
	return placement.LeavesFirst(current, next, ok && before.Epoch == epoch && n.listKept(p, before),
		n.leases.KeptCovers(p, epoch, append([]string{n.cfg.NodeID}, next...)))
}

// countedOf is replicate.Mastership.Counted (and the API's count of a
// write concern's copies): those of replicas, the copies of partition p
// this node masters at epoch, whose acknowledgements count now. A copy
// counts only while it is on every list of copies of the tenure that the
// lease voters may keep, as of this node's last round of replica choice
// (countable: the list they were last known to keep and every one
// recorded since), and while no swap that replaces it is being decided
// (deciding). A swap made without a pause (the newcomer holds what the
// copy it replaces acknowledged) records the new list and keeps the table
// until the voters keep it; a write acknowledged meanwhile by the master
// and the replaced copy could be on no copy of the list the voters keep,
// which a node taking over reads. So could one acknowledged while the
// swap is decided: the copies it replaces stop counting before it reads
// what they hold (replacement). Counting fewer copies only ever waits
// longer.
func (n *Node) countedOf(p int, epoch uint64, replicas []string) []string {
	var deciding []string
	if d, ok := n.deciding.Load(p); ok {
		deciding = d.([]string)
	}
	// No rule worked out for this tenure yet: nothing counts (a tenure
	// takes writes only once its list is recorded, and refreshCountable
	// runs, then Recount, in that same round).
	var allowed []string
	if c := n.countable.Load(); c != nil {
		if cc, ok := (*c)[p]; ok && cc.epoch == epoch {
			allowed = cc.copies
		}
	}
	counts := func(r string) bool { return !slices.Contains(deciding, r) && slices.Contains(allowed, r) }
	if !slices.ContainsFunc(replicas, func(r string) bool { return !counts(r) }) {
		return replicas // on every count's path: no copy unless one is left out
	}
	var out []string
	for _, r := range replicas {
		if counts(r) {
			out = append(out, r)
		}
	}
	return out
}

// refreshCountable works out, at the end of a round of replica choice,
// which copies of each partition count (see countedOf): for each list
// this node recorded, the copies on every list of its tenure the lease
// voters may keep, the one they were last known to keep and every one
// recorded since (listHistory; the newest always). A list the voters do
// not keep yet may already be on some of them, and a node taking over
// reads the newest two of a majority.
func (n *Node) refreshCountable() {
	next := make(map[int]countableCopies, len(n.tenureLists))
	for p, l := range n.tenureLists {
		h := n.listHistory[p]
		if h.epoch != l.Epoch {
			h = listHistory{epoch: l.Epoch}
		}
		var keptSeq uint64
		if kept := n.leases.ListOnVoters(p); kept != nil && kept.Epoch == l.Epoch {
			keptSeq = kept.Seq
		}
		h.lists = placement.ListsVotersMayKeep(h.lists, placement.RecordedList{Seq: l.Seq, Replicas: l.Replicas}, keptSeq)
		n.listHistory[p] = h
		next[p] = countableCopies{epoch: l.Epoch, copies: placement.CountedReplicas(h.lists)}
	}
	n.countable.Store(&next)
}

// listHistory is the lists of copies of a tenure (epoch) the lease voters
// may keep (placement.ListsVotersMayKeep).
type listHistory struct {
	epoch uint64
	lists []placement.RecordedList
}

// countableCopies is the copies of a partition that count (see
// refreshCountable) for its tenure at epoch.
type countableCopies struct {
	epoch  uint64
	copies []string
}

// listKept reports whether a majority of the lease voters keeps l, the
// list recorded for partition p (lease.Manager.ListOnVoters).
func (n *Node) listKept(p int, l store.TenureList) bool {
	kept := n.leases.ListOnVoters(p)
	return kept != nil && kept.Epoch == l.Epoch && kept.Seq >= l.Seq
}

// copyList is this node's recorded list of regular copies of partition
// p, master first, as its lease renewals carry it (nil: none recorded,
// or its tenure not confirmed yet). It reads only the published record
// and promotion's state (whose lock is never held while calling the
// lease manager): the lease manager asks it holding its own lock.
func (n *Node) copyList(p int) *record.CopyList {
	lists := n.recordedLists.Load()
	if lists == nil {
		return nil
	}
	l, ok := (*lists)[p]
	if !ok || l.Epoch == 0 {
		return nil
	}
	if !n.promote.confirmed(p, l.Epoch) {
		// Not before its tenure is confirmed: the voters keep one list
		// and the newest hides the older ones from a later winner's
		// check, and an unconfirmed tenure's replicas (chosen afresh
		// after a restart) may hold none of the writes the list before
		// counted.
		return nil
	}
	list := &record.CopyList{Epoch: l.Epoch, Seq: max(l.Seq, 1), Copies: append([]string{n.cfg.NodeID}, l.Replicas...), Counted: l.Counted}
	if first, ok := n.noteOf(p); ok && first.epoch == list.Epoch && first.seq == list.Seq && len(first.incarnations) == len(list.Copies) {
		list.Incarnations = first.incarnations
	}
	return list
}

// firstList is the incarnation of each copy (master first) of a list
// recorded as its tenure's first while the partition held nothing.
type firstList struct {
	epoch, seq   uint64
	incarnations []int64
}

// noteOf is partition p's note of noteFirstLists, if any.
func (n *Node) noteOf(p int) (firstList, bool) {
	notes := n.firstLists.Load()
	if notes == nil {
		return firstList{}, false
	}
	first, ok := (*notes)[p]
	return first, ok
}

// noteFirstLists notes, for each partition of changed whose list in lists
// is its tenure's first (seq 1) and that this node holds nothing of, the
// incarnation of each copy's process as gossip tells it now (0: unknown).
// No write can have been counted on such a list yet (the tenure takes
// none until the voters keep it), nor on any before it (this master,
// confirmed before it carries the list, holds every majority write, and
// holds nothing): a copy whose process is still that one when it takes
// the partition over, and holds nothing, acknowledged nothing the list
// counted (lease.ConfirmHoldingNothing). Every other changed list drops
// its note.
func (n *Node) noteFirstLists(lists map[int]store.TenureList, changed []int) {
	if len(changed) == 0 {
		return
	}
	incarnations := map[string]int64{} // as gossip shows them (0: unknown)
	for _, m := range n.cluster.View().Members {
		incarnations[m.ID] = m.Incarnation
	}
	notes := map[int]firstList{}
	if before := n.firstLists.Load(); before != nil {
		notes = maps.Clone(*before)
	}
	for _, p := range changed {
		l := lists[p]
		delete(notes, p)
		if l.Seq != 1 || n.writer.Position(p) != (store.Position{}) || n.writer.Applied(p) != (store.Position{}) {
			continue
		}
		first := firstList{epoch: l.Epoch, seq: l.Seq, incarnations: []int64{n.cluster.Incarnation()}}
		for _, id := range l.Replicas {
			first.incarnations = append(first.incarnations, incarnations[id])
		}
		notes[p] = first
	}
	n.firstLists.Store(&notes)
}

// wakeReplicas has chooseReplicasLoop choose and record the replica lists
// at once (a tenure began). It never blocks.
func (n *Node) wakeReplicas() {
	select {
	case n.replicasWake <- struct{}{}:
	default:
	}
}

// replacement is what the master does this round about the newcomers
// chosen to replace regular copies of partition p at epoch (see
// placement.KeepReplacedCopies), from what each has acknowledged.
func (n *Node) replacement(p int, epoch uint64, newcomers, replaced []string) placement.ReplaceStep {
	n.decidedMu.Lock()
	defer n.decidedMu.Unlock()
	// The copies replaced stop counting before their acknowledgements are
	// read: DecideReplacement compares the newcomers with what they
	// acknowledged, and a write they acknowledge after that must not be
	// counted on their account (see countedOf).
	n.deciding.Store(p, append(slices.Clone(n.decided[p]), replaced...))
	acks := func(ids []string) []placement.Ack {
		out := make([]placement.Ack, len(ids))
		for i, id := range ids {
			out[i].Pos, out[i].Known = n.shipper.Acked(id, p)
		}
		return out
	}
	step := placement.DecideReplacement(epoch, n.writer.Position(p), acks(newcomers), acks(replaced))
	if step == placement.ReplaceNow {
		n.decided[p] = append(n.decided[p], replaced...)
	} else {
		// Not replaced this round: they stay on every list; count again now
		// rather than for the rest of the round (a store save may follow).
		n.deciding.Store(p, slices.Clone(n.decided[p]))
		n.shipper.Recount()
	}
	return step
}

// joined is what the master does this round about copies that joined
// partition p's regular ones as the count of copies rose (see
// placement.CountedFor), from what each has acknowledged.
func (n *Node) joined(p int, ids []string) placement.ReplaceStep {
	acks := make([]placement.Ack, len(ids))
	for i, id := range ids {
		acks[i].Pos, acks[i].Known = n.shipper.Acked(id, p)
	}
	return placement.DecideJoined(n.writer.Position(p), acks)
}

// memberLost says a member is gone for good, by this node's view now
// (see lostIn).
func (n *Node) memberLost(id string) bool {
	members := map[string]cluster.MemberStatus{}
	for _, m := range n.cluster.View().Members {
		members[m.ID] = m
	}
	return n.lostIn(members, id, time.Now())
}

// lostIn says member id is gone for good, its copies lost: DOWN past
// REPLICA_REPLACE_AFTER, or neither in the peer list nor gossiping (not
// among members, a view's).
func (n *Node) lostIn(members map[string]cluster.MemberStatus, id string, now time.Time) bool {
	m, ok := members[id]
	return !ok || n.downTooLong(m, now)
}

// downTooLong reports whether member m has been DOWN for longer than
// REPLICA_REPLACE_AFTER, counted from when it was last heard, or from this
// node's start: its copies count as lost.
func (n *Node) downTooLong(m cluster.MemberStatus, now time.Time) bool {
	heard := n.started
	if m.LastHeard != nil && m.LastHeard.After(heard) {
		heard = *m.LastHeard
	}
	return m.State == cluster.Down && now.Sub(heard) > n.cfg.ReplicaReplaceAfter
}

// caughtUp reports whether every one of replicas holds partition p's
// history nearly up to this master's last change.
func (n *Node) caughtUp(p int, replicas []string) bool {
	acks := make([]placement.Ack, len(replicas))
	for i, r := range replicas {
		acks[i].Pos, acks[i].Known = n.shipper.Acked(r, p)
	}
	return placement.NearlyCaughtUp(n.writer.Position(p), acks)
}

// Placement describes where a user's partition lives, for the API: the
// partition's view (partitionView, as in Partitions), its succession and
// the state of every node it names.
func (n *Node) Placement(partition int) api.PlacementView {
	ring := n.place.Ring()
	v := n.partitionView(ring, n.table.Get(partition)).Placement()
	states := n.cluster.States()
	v.Succession, v.States = shard.Succession(ring, partition), map[string]string{}
	for _, id := range append(slices.Clone(v.Succession), v.Responsible...) {
		v.States[id] = string(states[id])
	}
	return v
}

// Partitions is every partition as Placement describes it, from one
// snapshot of the partition table and one ring, for
// GET /v1/cluster?partitions=1: in-memory state only.
func (n *Node) Partitions() []api.PartitionView {
	ring := n.place.Ring()
	as := n.table.Snapshot()
	out := make([]api.PartitionView, len(as))
	for i, a := range as {
		out[i] = n.partitionView(ring, a)
	}
	return out
}

// partitionView is the partition of assignment a (this node's table's) as
// this node sees it, for Placement and Partitions alike: the ring's
// preferred master and this node's own lease added (api.PartitionViewOf).
func (n *Node) partitionView(ring *shard.Ring, a shard.Assignment) api.PartitionView {
	epoch, held := n.leases.Holds(a.Partition)
	return api.PartitionViewOf(n.cfg.NodeID, a, ring.Owner(a.Partition), epoch, held)
}

// leaseView is the lease manager as routing sees it.
type leaseView struct{ n *Node }

// Holds is the lease itself: a tenure won by the promotion rule and not
// yet confirmed serves reads, and its writer refuses writes until then
// (routing retries them here for up to its wait).
func (v leaseView) Holds(p int) (uint64, bool) { return v.n.leases.Holds(p) }

// Writable is a held lease whose tenure is confirmed (api.Confirmer): only
// then is this node's copy the partition's newest, for linearizable reads.
func (v leaseView) Writable(p int) (uint64, bool) { return v.n.writable(p) }

func (v leaseView) LikelyMaster(p int) string {
	if h := v.n.leases.VotedHolder(p); h != "" {
		return h
	}
	if r := v.n.place.Ring(); r != nil {
		return r.Owner(p)
	}
	return ""
}

// Applied is how far this node holds a partition's history (as master, its
// last write; as a replica, what replication brought it).
func (n *Node) Applied(p int) store.Position { return n.writer.Applied(p) }

// Horizon is the highest position of a tombstone this node purged from a
// partition.
func (n *Node) Horizon(p int) store.Position { return n.writer.Horizon(p) }

// Leases is the node's lease manager (tests inspect it).
func (n *Node) Leases() *lease.Manager { return n.leases }

// Cluster is the node's membership.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

// ReloadPeers re-reads the peer list now (SIGHUP).
func (n *Node) ReloadPeers() { n.cluster.Reload() }

// Version is the build version, set by cmd/shoal.
var Version = "dev"

// Store gives access to the node's store (benchmarks measure it raw).
func (n *Node) Store() *store.Store { return n.store }

// Close stops taking requests, lets in-flight ones finish (up to
// SHUTDOWN_GRACE), stops the node's loops, commits every queued change,
// and closes the store: what StartWith opened, last first.
func (n *Node) Close(ctx context.Context) error {
	// From now on it takes no lease (placement.WantInput.Stopping): the
	// HTTP server's shutdown may wait seconds for requests in flight,
	// and the lease rounds run until it is over.
	n.stopping.Store(true)
	err := n.closers.close(ctx)
	n.log.Info("node stopped")
	return err
}

// Moves lists the partitions moving from this node to their preferred
// master (tests and /v1/cluster).
func (n *Node) Moves() []api.MoveStatus { return n.handoff.Moves() }

// PromotionHeard lists the positions of partition p this node has heard
// from the other copies while it finds the master gone (tests watch a
// promotion with it).
func (n *Node) PromotionHeard(p int) map[string]store.Position { return n.promote.heardOf(p) }

// Lags is the progress of every replica of the partitions this node
// masters (tests).
func (n *Node) Lags() []replicate.Lag { return n.shipper.Lags() }

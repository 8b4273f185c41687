// Package node wires one Shoal node together: its store, its partition
// writers, its API and its HTTP server, started and stopped as one.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/store"
)

// Node is a running Shoal node.
type Node struct {
	cfg      config.Config
	log      *slog.Logger
	store    *store.Store
	writer   *store.Writer
	api      *api.Server
	cluster  *cluster.Cluster
	server   *http.Server
	listener net.Listener
	served   chan error
}

// Start opens the store, checks it belongs to this configuration, and
// serves the API on cfg.HTTPAddr (":0" or "127.0.0.1:0" pick a free port).
// Everything Start started is stopped by Close.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger) (*Node, error) {
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
	metrics := api.NewMetrics()
	st, err := store.Open(ctx, store.Options{URI: cfg.MongoURI, Database: cfg.MongoDB, DataDir: cfg.DataDir,
		Logger: log, Observe: metrics.ObserveStore})
	if err != nil {
		return nil, err
	}
	if err := st.CheckPartitionCount(ctx, cfg.NodeID, cfg.PartitionCount); err != nil {
		st.Close(ctx)
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		st.Close(ctx)
		return nil, fmt.Errorf("listening on HTTP_ADDR %s: %w", cfg.HTTPAddr, err)
	}
	pub := cfg.PublicURL
	if pub == "" && cfg.PeersEndpoint == "" {
		pub = listenURL(ln)
	}
	cl, err := cluster.Start(ctx, cluster.Config{NodeID: cfg.NodeID, PublicURL: pub, DataDir: cfg.DataDir,
		PeersEndpoint: cfg.PeersEndpoint, PeersRefresh: cfg.PeersRefresh, GossipAddr: cfg.GossipAddr,
		Secret: []byte(cfg.ClusterSecret), GossipInterval: cfg.GossipInterval, SuspectTimeout: cfg.GossipSuspectTimeout,
		Version: Version, Logger: log})
	if err != nil {
		ln.Close()
		st.Close(ctx)
		return nil, err
	}
	w := store.NewWriter(st, cfg.PartitionCount, store.WriterOptions{CacheBytes: cfg.DocCacheBytes,
		ObserveBatch: metrics.ObserveCommit, Logger: log})
	a := api.New(api.Config{NodeID: cfg.NodeID, PartitionCount: cfg.PartitionCount, MaxBodyBytes: cfg.MaxBodyBytes,
		AuthSecret: []byte(cfg.AuthSecret), Insecure: cfg.Insecure, Logger: log, Metrics: metrics, Cluster: cl}, st, w)
	n := &Node{cfg: cfg, log: log, store: st, writer: w, api: a, cluster: cl, listener: ln, served: make(chan error, 1),
		server: &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}}
	go func() { n.served <- n.server.Serve(ln) }()
	a.SetReady(true)
	mode := "embedded store in " + cfg.DataDir
	if cfg.MongoURI != "" {
		mode = "MongoDB database " + cfg.MongoDB
	}
	log.Info("node started", "url", n.URL(), "store", mode, "partitions", cfg.PartitionCount)
	return n, nil
}

// URL is where the node's API answers.
func (n *Node) URL() string { return listenURL(n.listener) }

func listenURL(ln net.Listener) string {
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port))
}

// Cluster is the node's membership.
func (n *Node) Cluster() *cluster.Cluster { return n.cluster }

// ReloadPeers re-reads the peer list now (SIGHUP).
func (n *Node) ReloadPeers() { n.cluster.Reload() }

// Version is the build version, set by cmd/shoal.
var Version = "dev"

// Store gives access to the node's store (benchmarks measure it raw).
func (n *Node) Store() *store.Store { return n.store }

// Close stops taking requests, lets in-flight ones finish (up to
// SHUTDOWN_GRACE), commits every queued change, and closes the store.
func (n *Node) Close(ctx context.Context) error {
	n.api.SetReady(false)
	graceCtx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownGrace)
	defer cancel()
	var errs []error
	if err := n.server.Shutdown(graceCtx); err != nil {
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		n.server.Close()
	}
	if err := <-n.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if err := n.cluster.Close(); err != nil {
		errs = append(errs, fmt.Errorf("leaving the cluster: %w", err))
	}
	if err := n.writer.Close(graceCtx); err != nil {
		errs = append(errs, err)
	}
	if err := n.store.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("closing the store: %w", err))
	}
	n.log.Info("node stopped")
	return errors.Join(errs...)
}

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/freeport"
	"github.com/shoal-db/shoal/internal/node"
	"github.com/shoal-db/shoal/internal/testcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopExampleCluster()
	os.Exit(code)
}

// exampleSecret signs the example cluster's client tokens (AUTH_SECRET).
const exampleSecret = "example-secret-0123456789"

// The examples that need a cluster share one: three real nodes on
// loopback (the settings of internal/testcluster), started by the first
// example that asks and stopped by TestMain once everything has run.
var shared struct {
	once  sync.Once
	dir   string
	nodes []*node.Node
	urls  []string
	err   error
}

// exampleCluster is the base URLs of the example cluster's three nodes,
// once every partition has a master and a replica every node knows of.
// It panics (failing the example) if the cluster does not start.
func exampleCluster() []string {
	shared.once.Do(func() { shared.err = startExampleCluster() })
	if shared.err != nil {
		panic("starting the example cluster: " + shared.err.Error())
	}
	return shared.urls
}

func startExampleCluster() error {
	dir, err := os.MkdirTemp("", "shoal-client-example-")
	if err != nil {
		return err
	}
	shared.dir = dir
	ports, err := freeport.Find(6)
	if err != nil {
		return err
	}
	var peers []map[string]any
	for i := range 3 {
		peers = append(peers, map[string]any{"id": fmt.Sprintf("node%d", i+1), "url": fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			"gossip": fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), "voter": true})
	}
	data, _ := json.Marshal(map[string]any{"peers": peers})
	peersFile := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(peersFile, data, 0o644); err != nil {
		return err
	}
	for i := range 3 {
		cfg := config.Defaults()
		cfg.NodeID = fmt.Sprintf("node%d", i+1)
		cfg.HTTPAddr, cfg.GossipAddr = fmt.Sprintf("127.0.0.1:%d", ports[2*i]), fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		cfg.DataDir, cfg.AuthSecret = filepath.Join(dir, cfg.NodeID), exampleSecret
		cfg.PeersEndpoint, cfg.PeersRefresh, cfg.ClusterSecret = peersFile, time.Second, "example-cluster-secret-0123"
		cfg.GossipInterval, cfg.GossipSuspectTimeout, cfg.LeaseTTL = testcluster.GossipInterval, testcluster.SuspectTimeout, testcluster.LeaseTTL
		cfg.PartitionCount, cfg.ReplicaReplaceAfter, cfg.ReplicationFactor = testcluster.Partitions, testcluster.ReplaceAfter, 2
		n, err := node.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			return fmt.Errorf("starting %s: %w", cfg.NodeID, err)
		}
		shared.nodes = append(shared.nodes, n)
		shared.urls = append(shared.urls, n.URL())
	}
	// Ready, and every node names the same master and replica of every
	// partition.
	deadline := time.Now().Add(time.Minute)
	for why := "not asked yet"; why != ""; {
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after a minute: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
		why = settled()
	}
	return nil
}

// settled says what the example cluster still waits for ("": nothing).
func settled() string {
	for _, u := range shared.urls {
		resp, err := http.Get(u + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return u + " is not ready"
		}
	}
	for p := range testcluster.Partitions {
		want := shared.nodes[0].Placement(p)
		if want.Master == "" || len(want.Responsible) != 2 {
			return fmt.Sprintf("partition %d: master %q, responsible %v", p, want.Master, want.Responsible)
		}
		for _, n := range shared.nodes[1:] {
			if got := n.Placement(p); got.Master != want.Master || !slices.Equal(got.Responsible, want.Responsible) {
				return fmt.Sprintf("partition %d: the nodes disagree", p)
			}
		}
	}
	return ""
}

func stopExampleCluster() {
	var wg sync.WaitGroup
	for _, n := range shared.nodes {
		wg.Go(func() { n.Close(context.Background()) })
	}
	wg.Wait()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

type testPeer struct {
	id           string
	http, gossip int
	secret       string
	c            *cluster.Cluster
	dataDir      string
}

func writePeers(t *testing.T, path string, peers []*testPeer) {
	t.Helper()
	var doc struct {
		Peers []map[string]any `json:"peers"`
	}
	for _, p := range peers {
		doc.Peers = append(doc.Peers, map[string]any{"id": p.id, "url": fmt.Sprintf("http://127.0.0.1:%d", p.http),
			"gossip": fmt.Sprintf("127.0.0.1:%d", p.gossip), "voter": true})
	}
	data, _ := json.Marshal(doc)
	writeFile(t, path, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const (
	interval = 200 * time.Millisecond
	suspect  = time.Second
)

func newPeers(t *testing.T, n int) []*testPeer {
	ports := testnode.FreePorts(t, 2*n)
	var peers []*testPeer
	for i := 0; i < n; i++ {
		peers = append(peers, &testPeer{id: fmt.Sprintf("n%d", i+1), http: ports[2*i], gossip: ports[2*i+1],
			secret: "the-cluster-secret-0123", dataDir: t.TempDir()})
	}
	return peers
}

func (p *testPeer) start(t *testing.T, peersFile string) {
	t.Helper()
	c, err := cluster.Start(context.Background(), cluster.Config{NodeID: p.id, DataDir: p.dataDir, PeersEndpoint: peersFile,
		PeersRefresh: 500 * time.Millisecond, GossipAddr: fmt.Sprintf("127.0.0.1:%d", p.gossip), Secret: []byte(p.secret),
		GossipInterval: interval, SuspectTimeout: suspect, Version: "test", Logger: testnode.Logger(t)})
	if err != nil {
		t.Fatalf("starting %s: %v", p.id, err)
	}
	p.c = c
	t.Cleanup(func() { c.Close() })
}

// allSee waits until every running peer sees want as the states of ids.
func allSee(t *testing.T, peers []*testPeer, want map[string]cluster.State, timeout time.Duration) time.Duration {
	t.Helper()
	return testnode.Eventually(t, timeout, fmt.Sprintf("every node sees %v", want), func() (bool, string) {
		for _, p := range peers {
			got := p.c.States()
			for id, st := range want {
				if _, listed := p.c.Peers().Get(id); got[id] != st || !listed {
					return false, fmt.Sprintf("%s sees %v (peers %v)", p.id, got, p.c.Peers().IDs())
				}
			}
		}
		return true, ""
	})
}

func TestNodesConvergeGrowAndRefuseBrokenLists(t *testing.T) {
	peers := newPeers(t, 4)
	file := filepath.Join(t.TempDir(), "peers.json")
	writePeers(t, file, peers[:3])
	for _, p := range peers[:3] {
		p.start(t, file)
	}
	took := allSee(t, peers[:3], map[string]cluster.State{"n1": cluster.Up, "n2": cluster.Up, "n3": cluster.Up}, 20*time.Second)
	t.Logf("3 nodes all UP after %s", took.Round(time.Millisecond))

	// Metadata travels: free disk and version of the others.
	for _, m := range peers[0].c.View().Members {
		if m.FreeBytes == nil || *m.FreeBytes == 0 || m.Version != "test" || m.Incarnation == 0 {
			t.Fatalf("member %s lacks gossiped metadata: %+v", m.ID, m)
		}
	}

	// A node that gossips but is not in their list is reported as unknown.
	own := filepath.Join(t.TempDir(), "peers.json")
	writePeers(t, own, peers)
	peers[3].start(t, own)
	testnode.Eventually(t, 20*time.Second, "n4 reported as unknown", func() (bool, string) {
		for _, m := range peers[0].c.View().Members {
			if m.ID == "n4" {
				return !m.InPeerList && m.State == cluster.Up && m.URL != "", fmt.Sprintf("%+v", m)
			}
		}
		return false, "n4 not listed"
	})
	if _, listed := peers[0].c.Peers().Get("n4"); listed {
		t.Fatal("an unknown node counts as a peer")
	}
	// It is reachable and its state known (a node removed from the list
	// stays so while it drains).
	if st := peers[0].c.States()["n4"]; st != cluster.Up {
		t.Fatalf("a gossiping node outside the list is %q, not UP", st)
	}
	if _, ok := peers[0].c.PeerURL("n4"); !ok {
		t.Fatal("a gossiping node outside the list has no URL")
	}

	// An edit of the list adds it as a fourth member.
	writePeers(t, file, peers)
	for _, p := range peers[:3] {
		p.c.Reload()
	}
	took = allSee(t, peers, map[string]cluster.State{"n1": cluster.Up, "n2": cluster.Up, "n3": cluster.Up, "n4": cluster.Up}, 20*time.Second)
	t.Logf("fourth node UP everywhere %s after the edit", took.Round(time.Millisecond))

	// A broken list is refused, reported, and the last good one kept.
	writeFile(t, file, []byte(`{"peers":[{"id":"n1"`))
	peers[0].c.Reload()
	testnode.Eventually(t, 10*time.Second, "refusal reported", func() (bool, string) {
		v := peers[0].c.View()
		return v.PeerList.Refusal != nil && v.PeerList.Peers == 4, fmt.Sprintf("%+v", v.PeerList)
	})
	v := peers[0].c.View()
	if !strings.Contains(v.PeerList.Refusal.Reason, "not a JSON document") {
		t.Fatalf("refusal does not say why: %q", v.PeerList.Refusal.Reason)
	}
	if len(peers[0].c.Peers().Peers) != 4 {
		t.Fatal("the broken list replaced the good one")
	}
	// Duplicate ids are refused too.
	dup := append([]*testPeer{}, peers...)
	dup = append(dup, &testPeer{id: "n1", http: 1, gossip: 2})
	writePeers(t, file, dup)
	peers[1].c.Reload()
	testnode.Eventually(t, 10*time.Second, "duplicate refused", func() (bool, string) {
		r := peers[1].c.View().PeerList.Refusal
		return r != nil && strings.Contains(r.Reason, "appears twice"), fmt.Sprintf("%+v", r)
	})
	// Fixing the list clears the refusal.
	writePeers(t, file, peers)
	peers[0].c.Reload()
	testnode.Eventually(t, 10*time.Second, "refusal cleared", func() (bool, string) {
		return peers[0].c.View().PeerList.Refusal == nil, "still refused"
	})
}

func TestNodeWithAnotherSecretCannotJoin(t *testing.T) {
	peers := newPeers(t, 3)
	peers[2].secret = "some-other-secret-0123"
	file := filepath.Join(t.TempDir(), "peers.json")
	writePeers(t, file, peers)
	for _, p := range peers {
		p.start(t, file)
	}
	allSee(t, peers[:2], map[string]cluster.State{"n1": cluster.Up, "n2": cluster.Up}, 20*time.Second)
	// Give the outsider many join attempts (it retries every PEERS_REFRESH)
	// and heartbeat periods; it must stay out on both sides.
	deadline := time.Now().Add(10 * 500 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, p := range peers[:2] {
			if st := p.c.States()["n3"]; st != cluster.Down {
				t.Fatalf("%s sees the node with another secret as %s", p.id, st)
			}
			for _, m := range p.c.View().Members {
				if !m.InPeerList {
					t.Fatalf("%s lets an unknown node in: %+v", p.id, m)
				}
			}
		}
		if st := peers[2].c.States(); st["n1"] != cluster.Down || st["n2"] != cluster.Down {
			t.Fatalf("the node with another secret sees %v", st)
		}
		time.Sleep(100 * time.Millisecond) // sampling a condition that must stay false for a while
	}
}

func TestClusterOfOne(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Config{NodeID: "solo", PublicURL: "http://127.0.0.1:1", DataDir: t.TempDir(),
		GossipInterval: time.Second, SuspectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v := c.View()
	if len(v.Members) != 1 || v.Members[0].State != cluster.Up || !v.Members[0].Self || v.PeerList.Source != "" {
		t.Fatalf("cluster of one: %+v", v)
	}
}

// A FIFO put where the peer list file was is refused by the refresh, the
// refusal shown, and the next reload reads the fixed file (the loop is not
// stuck waiting for a writer). At start it is refused with the same reason.
func TestRefreshRefusesAFIFOAndGoesOn(t *testing.T) {
	peers := newPeers(t, 1)
	file := filepath.Join(t.TempDir(), "peers.json")
	writePeers(t, file, peers)
	peers[0].start(t, file)
	c := peers[0].c

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o644); err != nil {
		t.Fatal(err)
	}
	// Runs before the cluster's Close: a reader stuck in open(2) on the
	// FIFO is let go by one writer opening it (ENXIO when none waits).
	t.Cleanup(func() {
		if f, err := os.OpenFile(file, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	c.Reload()
	testnode.Eventually(t, 10*time.Second, "the FIFO refused", func() (bool, string) {
		r := c.View().PeerList.Refusal
		return r != nil && strings.Contains(r.Reason, "not a regular file"), fmt.Sprintf("%+v", r)
	})
	if len(c.Peers().Peers) != 1 {
		t.Fatal("the last good list was dropped")
	}
	if _, err := cluster.Start(context.Background(), cluster.Config{NodeID: "n1", PeersEndpoint: file, Secret: []byte("x")}); err == nil ||
		!strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("starting on a FIFO: %v", err)
	}

	writePeers(t, file, peers)
	c.Reload()
	testnode.Eventually(t, 10*time.Second, "the fixed file read", func() (bool, string) {
		r := c.View().PeerList.Refusal
		return r == nil, fmt.Sprintf("%+v", r)
	})
}

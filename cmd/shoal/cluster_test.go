package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/testnode"
)

const (
	procAuthSecret    = "process-auth-secret-0123"
	procClusterSecret = "process-cluster-secret-0123"
	procInterval      = 500 * time.Millisecond
	procSuspect       = 2500 * time.Millisecond
	procLeaseTTL      = 3 * time.Second // the default
)

// procNode is a `shoal serve` process of a test cluster.
type procNode struct {
	id           string
	http, gossip int
	dir          string
	cmd          *exec.Cmd
	logs         *syncBuffer
	env          []string // settings beyond the harness's own (KEY=value)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func (n *procNode) url() string { return fmt.Sprintf("http://127.0.0.1:%d", n.http) }

func (n *procNode) start(t *testing.T, peersFile string) {
	t.Helper()
	cmd := shoalCmd(t, "serve")
	cmd.Env = append(cmd.Env,
		"NODE_ID="+n.id, fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", n.http), fmt.Sprintf("GOSSIP_ADDR=127.0.0.1:%d", n.gossip),
		"DATA_DIR="+n.dir, "PEERS_ENDPOINT="+peersFile, "PEERS_REFRESH=1s", "AUTH_SECRET="+procAuthSecret,
		"CLUSTER_SECRET="+procClusterSecret, "GOSSIP_INTERVAL="+procInterval.String(), "GOSSIP_SUSPECT_TIMEOUT="+procSuspect.String())
	cmd.Env = append(cmd.Env, n.env...)
	n.logs = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = n.logs, n.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd = cmd
	t.Cleanup(func() { n.kill() })
}

func (n *procNode) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
	}
}

func startProcCluster(t *testing.T, count int) ([]*procNode, string) {
	return startProcClusterWith(t, count, nil)
}

// startProcClusterWith starts count nodes, each with the settings env
// (KEY=value) on top of the harness's.
func startProcClusterWith(t *testing.T, count int, env []string) ([]*procNode, string) {
	ports := testnode.FreePorts(t, 2*count)
	var nodes []*procNode
	var doc struct {
		Peers []map[string]any `json:"peers"`
	}
	for i := 0; i < count; i++ {
		n := &procNode{id: fmt.Sprintf("node%d", i+1), http: ports[2*i], gossip: ports[2*i+1], dir: t.TempDir(), env: env}
		nodes = append(nodes, n)
		doc.Peers = append(doc.Peers, map[string]any{"id": n.id, "url": n.url(), "gossip": fmt.Sprintf("127.0.0.1:%d", n.gossip), "voter": true})
	}
	file := filepath.Join(t.TempDir(), "peers.json")
	data, _ := json.Marshal(doc)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n.start(t, file)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range nodes {
			lines := strings.Split(strings.TrimSpace(n.logs.String()), "\n")
			t.Logf("the last log lines of %s:\n%s", n.id, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	return nodes, file
}

// clusterView asks node n for its view; ok is false if it did not answer.
func clusterView(n *procNode, token string) (cluster.View, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := client.New(n.url(), token).Cluster(ctx)
	if err != nil {
		return cluster.View{}, false
	}
	return st.View, true
}

func placementOf(n *procNode, token, user string) (api.PlacementView, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := client.New(n.url(), token).Placement(ctx, user)
	return v, err == nil
}

// putVia writes a document of user through node n; it returns the status and
// the node that served it.
func putVia(n *procNode, token, user, id string) (int, string) {
	req, _ := http.NewRequest("PUT", n.url()+"/v1/users/"+user+"/collections/c/documents/"+id, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Served-By")
}

func stateIn(v cluster.View, id string) cluster.State {
	for _, m := range v.Members {
		if m.ID == id {
			return m.State
		}
	}
	return ""
}

// waitStates waits until each of the observers sees id in state want.
func waitStates(t *testing.T, observers []*procNode, token, id string, want cluster.State, timeout time.Duration) time.Duration {
	t.Helper()
	return testnode.Eventually(t, timeout, fmt.Sprintf("%s is %s everywhere", id, want), func() (bool, string) {
		for _, o := range observers {
			v, ok := clusterView(o, token)
			if !ok {
				return false, o.id + " did not answer"
			}
			if st := stateIn(v, id); st != want {
				return false, fmt.Sprintf("%s sees %s as %s", o.id, id, st)
			}
		}
		return true, ""
	})
}

func TestProcessClusterFailureDetection(t *testing.T) {
	nodes, peersFile := startProcCluster(t, 3)
	token, err := api.MintToken([]byte(procAuthSecret), api.TokenSpec{Admin: true, Audience: config.Defaults().TokenAudience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		took := waitStates(t, nodes, token, n.id, cluster.Up, 60*time.Second)
		t.Logf("%s UP everywhere after %s", n.id, took.Round(time.Millisecond))
	}

	// A user whose partition node3 masters, with a replica, known to node1:
	// a master that is its partition's only copy is waited for until it
	// is lost (REPLICA_REPLACE_AFTER), not taken over in seconds.
	victim, observers := nodes[2], nodes[:2]
	user, oldEpoch := "", uint64(0)
	testnode.Eventually(t, 30*time.Second, "a user mastered by node3 with a replica", func() (bool, string) {
		for i := 0; i < 200; i++ {
			pl, ok := placementOf(nodes[0], token, fmt.Sprintf("user%d", i))
			if ok && pl.Master == victim.id && len(pl.Responsible) > 1 {
				user, oldEpoch = fmt.Sprintf("user%d", i), pl.Epoch
				return true, ""
			}
		}
		return false, "node1 knows no partition mastered by node3 with a replica yet"
	})
	// The same PUT again if an answer was late (a loaded machine): 201 or 200.
	testnode.Eventually(t, 30*time.Second, "a write before the kill, served by node3", func() (bool, string) {
		code, by := putVia(nodes[0], token, user, "before")
		return (code == 201 || code == 200) && by == victim.id, fmt.Sprintf("%d served by %q", code, by)
	})

	// SIGKILL node3: SUSPECT, then DOWN, on the others, within the times
	// the README documents for these settings; and its partitions get a new
	// master, with a higher epoch, within LEASE_TTL + 2s.
	killed := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.cmd.Wait()
	suspectBound := 3*procInterval + 2*time.Second
	downBound := procSuspect + 4*procInterval + 3*time.Second
	takeoverBound := procLeaseTTL + 2*time.Second
	sawSuspect, tookOver := time.Duration(-1), time.Duration(-1)
	testnode.Eventually(t, downBound, "node3 DOWN on both others and its partition taken over", func() (bool, string) {
		if tookOver < 0 {
			if code, by := putVia(nodes[0], token, user, fmt.Sprint(time.Now().UnixNano())); code == 201 && by != victim.id {
				tookOver = time.Since(killed)
			}
		}
		down := 0
		for _, o := range observers {
			v, ok := clusterView(o, token)
			if !ok {
				return false, o.id + " did not answer"
			}
			switch stateIn(v, victim.id) {
			case cluster.Suspect:
				if sawSuspect < 0 {
					sawSuspect = time.Since(killed)
				}
			case cluster.Down:
				down++
			}
		}
		return down == len(observers) && tookOver >= 0, fmt.Sprintf("%d of %d see it DOWN; taken over: %v", down, len(observers), tookOver >= 0)
	})
	downAfter := time.Since(killed)
	t.Logf("after SIGKILL: SUSPECT after %s (documented bound %s), partition taken over after %s (bound LEASE_TTL+2s = %s), DOWN after %s (documented bound %s)",
		sawSuspect.Round(time.Millisecond), suspectBound, tookOver.Round(time.Millisecond), takeoverBound, downAfter.Round(time.Millisecond), downBound)
	if sawSuspect < 0 || sawSuspect > suspectBound {
		t.Fatalf("node3 was not seen SUSPECT within %s (first seen at %s)", suspectBound, sawSuspect)
	}
	if tookOver > takeoverBound {
		t.Fatalf("the dead master's partition took %s to accept writes again, over LEASE_TTL + 2s", tookOver)
	}
	if pl, ok := placementOf(nodes[0], token, user); !ok || pl.Epoch <= oldEpoch || pl.Master == victim.id {
		t.Fatalf("after takeover the placement is %+v, want another master at an epoch above %d", pl, oldEpoch)
	}

	// Restarted with the same id, it is UP again within a few seconds.
	restarted := time.Now()
	victim.start(t, peersFile)
	took := waitStates(t, nodes, token, victim.id, cluster.Up, 30*time.Second)
	t.Logf("restarted node3 UP everywhere %s after its restart", took.Round(time.Millisecond))
	if since := time.Since(restarted); since > 20*time.Second {
		t.Fatalf("restarted node took %s to be UP again", since)
	}

	t.Run("internal calls need the cluster signature", func(t *testing.T) {
		testInternalCalls(t, nodes[0], nodes[1].id, token)
	})
}

// testInternalCalls checks who may call /internal/ on a running node: only
// peer, a node of its cluster, signing with the cluster secret.
func testInternalCalls(t *testing.T, n *procNode, peer, adminToken string) {
	ours := cluster.NewSigner([]byte(procClusterSecret), peer, nil, nil)
	theirs := cluster.NewSigner([]byte("another-cluster-secret-99"), peer, nil, nil)
	stranger := cluster.NewSigner([]byte(procClusterSecret), "tester", nil, nil)
	ping := n.url() + "/internal/v1/ping"
	send := func(req *http.Request) int {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	signed := func(s *cluster.Signer, url string) *http.Request {
		req, _ := http.NewRequest("GET", url, nil)
		s.Sign(req, nil, n.id)
		return req
	}
	req := signed(ours, ping)
	if code := send(req); code != 200 {
		t.Fatalf("a request signed with the cluster secret got %d", code)
	}
	replay, _ := http.NewRequest("GET", ping, nil)
	replay.Header = req.Header.Clone()
	if code := send(replay); code != 401 {
		t.Fatalf("a replayed signed request got %d, want 401", code)
	}
	elsewhere, _ := http.NewRequest("GET", ping, nil)
	ours.Sign(elsewhere, nil, "another-node")
	if code := send(elsewhere); code != 401 {
		t.Fatalf("a request signed for another node got %d, want 401", code)
	}
	if code := send(signed(theirs, ping)); code != 401 {
		t.Fatalf("a request signed with another secret got %d, want 401", code)
	}
	if code := send(signed(stranger, ping)); code != 401 {
		t.Fatalf("a request signed by a node outside the cluster got %d, want 401", code)
	}
	unsigned, _ := http.NewRequest("GET", ping, nil)
	if code := send(unsigned); code != 401 {
		t.Fatalf("an unsigned request got %d, want 401", code)
	}
	bearer, _ := http.NewRequest("GET", ping, nil)
	bearer.Header.Set("Authorization", "Bearer "+adminToken)
	if code := send(bearer); code != 401 {
		t.Fatalf("an admin bearer token on /internal got %d, want 401", code)
	}
	if code := send(signed(ours, n.url()+"/v1/cluster")); code != 401 {
		t.Fatalf("an internal signature on /v1 got %d, want 401", code)
	}
	if !bytes.Contains([]byte(n.logs.String()), []byte("internal request refused")) {
		t.Fatalf("refused internal requests were not logged:\n%s", n.logs.String())
	}
}

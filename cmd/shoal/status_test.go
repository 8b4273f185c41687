package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
)

// sampleClusterJSON is the /v1/cluster answer of the contract, with one more
// member never heard from, one removed from the peer list that drains, one
// removed that holds nothing, the partition summary, the answering node's
// moves, and a field added by a later version.
const sampleClusterJSON = `{
  "node": "node1",
  "version": "dev",
  "peer_list": {
    "source": "/abs/path/peers.json",
    "loaded_at": "2026-11-29T19:00:00Z",
    "peers": 3,
    "refusal": {"at": "2026-11-29T19:01:00Z", "reason": "peer id \"node2\" appears twice"}
  },
  "partitions": {"count": 271, "masters": {"node1": 90, "node2": 89, "node10": 88, "node4": 2}, "without_master": 2,
    "copies": {"node1": 180, "node2": 179, "node10": 176, "node4": 7}},
  "voters": {"current": ["node1", "node10", "node2"], "target": ["node1", "node2"], "changing": true},
  "moves": [
    {"partition": 12, "from": "node1", "to": "node2", "phase": "copying", "documents_copied": 120, "documents_total": 1000, "behind": 0},
    {"partition": 3, "from": "node1", "to": "node2", "phase": "catching-up", "documents_copied": 40, "documents_total": 0, "behind": 42, "eta_ms": 5}
  ],
  "replication": [{"replica": "node2", "partition": 3, "behind": 42}],
  "later_field": {"x": 1},
  "members": [
    {"id": "node10", "state": "DOWN", "self": false, "in_peer_list": true,
     "url": "http://127.0.0.1:8090", "public_url": "http://127.0.0.1:8090", "gossip": "127.0.0.1:7956",
     "sharding": true, "replica": false, "voter": false, "incarnation": 0},
    {"id": "node1", "state": "UP", "self": true, "in_peer_list": true,
     "url": "http://127.0.0.1:8081", "public_url": "http://127.0.0.1:8081", "gossip": "127.0.0.1:7947",
     "sharding": true, "replica": true, "voter": true,
     "free_bytes": 123456789, "version": "dev", "incarnation": 1,
     "last_heard": "2026-11-29T19:00:05Z", "last_heard_ms_ago": 120},
    {"id": "node2", "state": "SUSPECT", "self": false, "in_peer_list": true,
     "url": "http://127.0.0.1:8082", "public_url": "http://127.0.0.1:8082", "gossip": "127.0.0.1:7948",
     "sharding": true, "replica": true, "voter": true,
     "free_bytes": 41015634329, "version": "dev", "incarnation": 3,
     "last_heard": "2026-11-29T19:00:00Z", "last_heard_ms_ago": 5400},
    {"id": "node4", "state": "UP", "self": false, "in_peer_list": false,
     "url": "http://127.0.0.1:8084", "public_url": "http://127.0.0.1:8084", "gossip": "127.0.0.1:7950",
     "sharding": false, "replica": false, "voter": false,
     "free_bytes": 2048, "last_heard": "2026-11-29T19:00:04Z", "last_heard_ms_ago": 300},
    {"id": "stray", "state": "UP", "self": false, "in_peer_list": false,
     "url": "http://127.0.0.1:1", "public_url": "http://127.0.0.1:1", "gossip": "127.0.0.1:9998",
     "sharding": false, "replica": false, "voter": false,
     "free_bytes": 512, "last_heard": "2026-11-29T19:00:04Z", "last_heard_ms_ago": 1200}
  ]
}`

func statusSample(t *testing.T) client.ClusterStatus {
	t.Helper()
	var st client.ClusterStatus
	if err := json.Unmarshal([]byte(sampleClusterJSON), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRenderStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 19, 2, 0, 0, time.UTC)
	others := []memberMoves{
		{ID: "node4", URL: "http://127.0.0.1:8084", Moves: []api.MoveStatus{
			{Partition: 5, From: "node4", To: "node1", Phase: "handing-over", DocumentsCopied: 300, DocumentsTotal: 300, Behind: 3},
			{Partition: 250, From: "node4", To: "node10", Phase: "copying"},
		}},
		{ID: "stray", URL: "http://127.0.0.1:1", Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)},
	}
	got := renderStatus(statusSample(t), others, "http://127.0.0.1:8081", now)
	want := `Cluster as node1 sees it (version dev), asked at http://127.0.0.1:8081
Peer list: /abs/path/peers.json, 3 peers, loaded 2026-11-29T19:00:00Z (2m00s ago)
!!! PEER LIST REFUSED at 2026-11-29T19:01:00Z (1m00s ago): peer id "node2" appears twice
!!! node1 keeps the list it loaded before; fix /abs/path/peers.json and it is read again at the next refresh
5 members: 3 UP, 1 SUSPECT, 1 DOWN; 1 draining, 1 removed
271 partitions, 2 WITHOUT A MASTER (writes to them get 503 until one is elected)
Lease voters: node1, node10, node2
Voter change in progress, one member at a time: heading for node1, node2
node4 drains (out of the peer list): masters 2 partitions, holds 7 copies; do not stop it yet
stray is out of the peer list and holds nothing: safe to stop (its data stays on disk)

  ID                STATE    URL                    FREE       LAST HEARD  ROLES  MASTERS  COPIES
* node1             UP       http://127.0.0.1:8081  117.7 MiB  0.1s ago    S R V  90       180
  node2             SUSPECT  http://127.0.0.1:8082  38.2 GiB   5.4s ago    S R V  89       179
  node4 (draining)  UP       http://127.0.0.1:8084  2.0 KiB    0.3s ago    -      2        7
  node10            DOWN     http://127.0.0.1:8090  -          never       S - -  88       176
  stray (removed)   UP       http://127.0.0.1:1     512 B      1.2s ago    -      0        0

* this node; ROLES: S sharding, R replica, V voter; MASTERS: partitions it masters;
COPIES: partitions it holds a copy of as a replica;
draining: out of the peer list, hands over what it holds;
removed: out of the peer list, holds nothing

Moves in progress (4 partitions):
  PARTITION  FROM   TO      PHASE         COPIED    BEHIND
  3          node1  node2   catching-up   40        42
  5          node4  node1   handing-over  300/300   3
  12         node1  node2   copying       120/1000  0
  250        node4  node10  copying       0         0
COPIED: documents copied to the new master (of all to copy); BEHIND: changes it still lacks
! could not ask stray at http://127.0.0.1:1 for its moves: connection refused
`
	if got != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderStatusVariants(t *testing.T) {
	now := time.Date(2026, 11, 29, 19, 2, 0, 0, time.UTC)
	heard := now.Add(-90 * time.Second)
	loaded := now.Add(-3 * time.Hour)
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		st      client.ClusterStatus
		others  []memberMoves
		want    []string
		notWant []string
	}{
		{
			name:    "healthy list, no refusal",
			st:      client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a", PeerList: cluster.PeerListStatus{Source: "/p.json", LoadedAt: &loaded, Peers: 1}}}},
			want:    []string{"Cluster as a sees it, asked at u", "1 peer, loaded 2026-11-29T16:02:00Z (3h00m ago)", "0 members\n"},
			notWant: []string{"REFUSED", "unknown"},
		},
		{
			name: "never loaded",
			st:   client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a"}}},
			want: []string{"Peer list: -, 0 peers, never loaded"},
		},
		{
			name: "last_heard without ms_ago; public url differs",
			st: client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a", Members: []cluster.MemberStatus{{ID: "b", State: "UP", URL: "http://10.0.0.2:8080",
				PublicURL: "https://b.example.com", LastHeard: &heard, Voter: true}}}}, InPeerListUnknown: true},
			want: []string{"1m30s ago", "http://10.0.0.2:8080 (public https://b.example.com)", "- - V", "1 member: 1 UP\n"},
		},
		{
			name: "in_peer_list absent is not unknown",
			st:   client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a", Members: []cluster.MemberStatus{{ID: "b", State: "UP"}}}}, InPeerListUnknown: true},
			want: []string{"  b  ", "never"}, notWant: []string{"unknown", "draining", "removed", "MASTERS", "COPIES"},
		},
		{
			name:    "out of the list, no partition counts: unknown",
			st:      client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a", Members: []cluster.MemberStatus{{ID: "b", State: "UP", InPeerList: no}}}}},
			want:    []string{"  b (unknown)  ", "1 member: 1 UP; 1 unknown (gossiping but not in the peer list)\n", "unknown: gossips with the cluster"},
			notWant: []string{"draining", "removed", "safe to stop"},
		},
		{
			name: "draining by copies alone; removed self",
			st: client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{Partitions: &api.PartitionSummary{Count: 4, Masters: map[string]int{"a": 4}, Copies: map[string]int{"a": 0, "c": 3}},
				View: cluster.View{Node: "d", Members: []cluster.MemberStatus{
					{ID: "a", State: "UP", InPeerList: yes},
					{ID: "c", State: "UP", InPeerList: no},
					{ID: "d", State: "UP", InPeerList: no, Self: true},
				}}}},
			want: []string{
				"3 members: 3 UP; 1 draining, 1 removed\n",
				"c drains (out of the peer list): masters 0 partitions, holds 3 copies; do not stop it yet\n",
				"d is out of the peer list and holds nothing: safe to stop",
				"  c (draining)  ", "* d (removed)  ", "MASTERS  COPIES\n",
				"draining: out of the peer list, hands over what it holds", "removed: out of the peer list, holds nothing",
				"No partition is moving.\n",
			},
			notWant: []string{"unknown", "c is out of the peer list", "d drains"},
		},
		{
			name: "draining self by writes no later master checked",
			st: client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{Partitions: &api.PartitionSummary{Count: 4, Masters: map[string]int{"a": 4}, Unreconciled: map[string]int{"d": 1}},
				View: cluster.View{Node: "d", Members: []cluster.MemberStatus{{ID: "d", State: "UP", InPeerList: no, Self: true}}}}},
			want: []string{"d drains (out of the peer list): masters 0 partitions, holds 0 copies, holds writes of its own no later master has checked in 1 partition; do not stop it yet\n",
				"* d (draining)  "},
			notWant: []string{"safe to stop"},
		},
		{
			name: "one copy",
			st: client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{Partitions: &api.PartitionSummary{Count: 1, Masters: map[string]int{"a": 1}, Copies: map[string]int{"b": 1}},
				View: cluster.View{Node: "a", Members: []cluster.MemberStatus{{ID: "b", State: "UP", InPeerList: no}}}}},
			want: []string{"masters 0 partitions, holds 1 copy;"},
		},
		{
			name:    "a member not asked: no claim that nothing moves",
			st:      client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a"}}},
			others:  []memberMoves{{ID: "b", URL: "http://b:1", Err: &client.HTTPError{Method: "GET", Path: "/v1/cluster", StatusCode: 401, Problem: &api.Problem{Detail: "bad token"}}}},
			want:    []string{"No partition is moving, as far as the members that answered say.\n", "! could not ask b at http://b:1 for its moves: GET /v1/cluster answered status 401: bad token\n"},
			notWant: []string{"No partition is moving.\n", "Moves in progress"},
		},
		{
			name: "moves only from another member; total unknown",
			st:   client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a"}}},
			others: []memberMoves{{ID: "b", URL: "http://b:1", Moves: []api.MoveStatus{
				{Partition: 9, From: "b", To: "a", Phase: "catching-up", DocumentsCopied: 17, Behind: 250},
			}}},
			want:    []string{"Moves in progress (1 partition):\n", "  PARTITION  FROM  TO  PHASE        COPIED  BEHIND\n", "  9          b     a   catching-up  17      250\n"},
			notWant: []string{"No partition is moving", "could not ask", "17/"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderStatus(tc.st, tc.others, "u", now)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got, w) {
					t.Errorf("has %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{123456789, "117.7 MiB"}, {41015634329, "38.2 GiB"}, {1<<30 - 1, "1.0 GiB"},
		{5 << 40, "5.0 TiB"}, {1 << 62, "4.0 EiB"},
	} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestAgo(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0.0s ago"}, {0, "0.0s ago"}, {400 * time.Millisecond, "0.4s ago"},
		{59900 * time.Millisecond, "59.9s ago"}, {61 * time.Second, "1m01s ago"},
		{2*time.Hour + 5*time.Minute, "2h05m ago"}, {72 * time.Hour, "3d ago"},
	} {
		if got := ago(tc.d); got != tc.want {
			t.Errorf("ago(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// tokenHandler answers GET /v1/cluster with body to requests with the token.
func tokenHandler(token, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"type":"urn:shoal:problem:unauthorized","title":"Unauthorized","status":401,"detail":"bad token"}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	})
}

// statusTestServer serves the sample answer to requests with the token;
// the draining member node4 is served too, at the url the sample gives it,
// with one partition moving from it.
func statusTestServer(t *testing.T, token string) *httptest.Server {
	node4 := httptest.NewServer(tokenHandler(token, `{"node":"node4","members":[],
		"moves":[{"partition":77,"from":"node4","to":"node2","phase":"copying","documents_copied":5,"documents_total":9,"behind":0}]}`))
	t.Cleanup(node4.Close)
	srv := httptest.NewServer(tokenHandler(token, strings.ReplaceAll(sampleClusterJSON, "http://127.0.0.1:8084", node4.URL)))
	t.Cleanup(srv.Close)
	return srv
}

func TestStatusAgainstServer(t *testing.T) {
	t.Setenv("SHOAL_URL", "")
	t.Setenv("SHOAL_TOKEN", "")
	srv := statusTestServer(t, "tok")
	var out, errb bytes.Buffer
	if code := status([]string{"--url", srv.URL + "/", "--token", "tok", "--dir", t.TempDir()}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"Cluster as node1 sees it", "asked at " + srv.URL + "\n", "PEER LIST REFUSED",
		"* node1", "117.7 MiB", "0.1s ago", "S R V", "stray (removed)", "never", "Moves in progress (3 partitions)",
		"  77         node4  node2  copying      5/9       0\n",
		"! could not ask stray at http://127.0.0.1:1 for its moves: connection refused\n"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

func TestStatusDefaultsFromDevDir(t *testing.T) {
	t.Setenv("SHOAL_URL", "")
	t.Setenv("SHOAL_TOKEN", "")
	srv := statusTestServer(t, "from-file")
	dir := t.TempDir()
	peers := `{"peers":[{"id":"node1","url":"` + srv.URL + `","gossip":"127.0.0.1:7947"},{"id":"node2","url":"http://127.0.0.1:1","gossip":"127.0.0.1:7948"}]}`
	if err := os.WriteFile(filepath.Join(dir, "peers.json"), []byte(peers), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := status([]string{"--dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "asked at "+srv.URL) {
		t.Fatalf("did not ask the first peer:\n%s", out.String())
	}

	// The environment wins over the directory.
	t.Setenv("SHOAL_TOKEN", "wrong")
	errb.Reset()
	if code := status([]string{"--dir", dir}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "from $SHOAL_TOKEN (401: bad token)") {
		t.Fatalf("SHOAL_TOKEN not used: exit %d: %s", code, errb.String())
	}
	t.Setenv("SHOAL_TOKEN", "")
	t.Setenv("SHOAL_URL", "http://127.0.0.1:1")
	if got := statusURL("", dir); got.url != "http://127.0.0.1:1" || len(got.others) != 1 {
		t.Fatalf("SHOAL_URL not used: %+v", got)
	}
	if got := statusURL("http://x:1", t.TempDir()); got.url != "http://x:1" {
		t.Fatalf("--url not used: %+v", got)
	}
	t.Setenv("SHOAL_URL", "")
	if got := statusURL("", t.TempDir()); got.url != defaultNodeURL {
		t.Fatalf("default not used: %+v", got)
	}
}

func TestStatusErrors(t *testing.T) {
	t.Setenv("SHOAL_URL", "")
	t.Setenv("SHOAL_TOKEN", "")
	serve := func(code int, ctype, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(code)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	devDir := t.TempDir()
	peers := `{"peers":[{"id":"node1","url":"` + closed.URL + `","gossip":"127.0.0.1:7947"},{"id":"node2","url":"http://127.0.0.1:8082","gossip":"127.0.0.1:7948"}]}`
	if err := os.WriteFile(filepath.Join(devDir, "peers.json"), []byte(peers), 0o644); err != nil {
		t.Fatal(err)
	}
	problem := func(status int, detail string) string {
		return `{"type":"urn:shoal:problem:x","title":"T","status":` + strconv.Itoa(status) + `,"detail":"` + detail + `"}`
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"connection refused", []string{"--url", closed.URL, "--token", "t", "--dir", t.TempDir()}, "no node answers at " + closed.URL + " (connection refused): start a cluster with `shoal dev`"},
		{"refused, other peers known", []string{"--dir", devDir, "--token", "t"}, "that node is down; try another with --url http://127.0.0.1:8082"},
		{"no token", []string{"--url", serve(401, "application/problem+json", problem(401, "no header")), "--dir", t.TempDir()}, "wants a token (401) and none was given"},
		{"bad token", []string{"--url", serve(401, "application/problem+json", problem(401, "bad signature")), "--token", "t", "--dir", t.TempDir()}, "refused the token from --token (401: bad signature)"},
		{"not admin", []string{"--url", serve(403, "application/problem+json", problem(403, "x")), "--token", "t", "--dir", t.TempDir()}, "(403): it needs an admin token"},
		{"no cluster route", []string{"--url", serve(404, "application/problem+json", problem(404, "x")), "--token", "t", "--dir", t.TempDir()}, "has no /v1/cluster (404)"},
		{"server error", []string{"--url", serve(503, "application/problem+json", problem(503, "stopping")), "--token", "t", "--dir", t.TempDir()}, "answered GET /v1/cluster with status 503: stopping"},
		{"not JSON", []string{"--url", serve(200, "text/html", "<html>hello</html>"), "--token", "t", "--dir", t.TempDir()}, "is not Shoal's cluster status"},
		{"other JSON", []string{"--url", serve(200, "application/json", `{"hello":1}`), "--token", "t", "--dir", t.TempDir()}, "is not Shoal's cluster status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := status(tc.args, &out, &errb)
			msg := errb.String()
			if code != 1 || !strings.Contains(msg, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, msg, tc.want)
			}
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "shoal status: ") || out.Len() != 0 {
				t.Fatalf("not one clear line: stdout %q stderr %q", out.String(), msg)
			}
		})
	}
}

func TestFetchMovesAsksEveryOtherMemberUp(t *testing.T) {
	answering := httptest.NewServer(tokenHandler("tok", `{"node":"b","moves":[{"partition":4,"from":"b","to":"a","phase":"copying"}]}`))
	t.Cleanup(answering.Close)
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hanging.Close)
	otherToken := httptest.NewServer(tokenHandler("other", `{"node":"f"}`))
	t.Cleanup(otherToken.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	st := client.ClusterStatus{ClusterAnswer: api.ClusterAnswer{View: cluster.View{Node: "a", Members: []cluster.MemberStatus{
		{ID: "a", State: "UP", Self: true, URL: closed.URL},
		{ID: "f", State: "UP", URL: otherToken.URL},
		{ID: "b", State: "UP", URL: closed.URL, PublicURL: answering.URL + "/"}, // the public url wins
		{ID: "c", State: "UP", URL: hanging.URL},
		{ID: "d", State: "SUSPECT", URL: closed.URL},
		{ID: "e", State: "UP"},
		{ID: "g", State: "DOWN", URL: closed.URL},
		{ID: "h", State: "UP", URL: closed.URL},
	}}}}
	got := fetchMoves(context.Background(), http.DefaultClient, st, "tok", 300*time.Millisecond)
	var ids []string
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	if strings.Join(ids, ",") != "b,c,e,f,h" {
		t.Fatalf("asked %v; want every other member UP, in order: b,c,e,f,h", ids)
	}
	if got[0].Err != nil || len(got[0].Moves) != 1 || got[0].Moves[0].Partition != 4 || got[0].URL != answering.URL {
		t.Errorf("b: %+v", got[0])
	}
	for i, want := range map[int]string{1: "no answer within 300ms", 2: "no url known", 3: "GET /v1/cluster answered status 401: bad token", 4: "connection refused"} {
		if got[i].Err == nil {
			t.Errorf("%s: no error: %+v", got[i].ID, got[i])
			continue
		}
		if msg := shortFetchError(got[i].Err, 300*time.Millisecond); msg != want {
			t.Errorf("%s: %q, want %q", got[i].ID, msg, want)
		}
	}
}

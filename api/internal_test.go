package api_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
)

const internalSecret = "internal-test-secret-0123"

// signedNode starts a node whose peer list names it and a peer "peer-b"
// that never runs, and returns it with a signer that signs as peer-b.
func signedNode(t *testing.T, tweaks ...func(*config.Config)) (*testnode.Node, *cluster.Signer) {
	t.Helper()
	dir := t.TempDir()
	ports := testnode.FreePorts(t, 4)
	peers := map[string]any{"peers": []map[string]any{
		{"id": "test-node", "url": fmt.Sprintf("http://127.0.0.1:%d", ports[0]), "gossip": fmt.Sprintf("127.0.0.1:%d", ports[1]), "voter": true},
		// Holds nothing and votes in nothing: the node takes every lease alone.
		{"id": "peer-b", "url": fmt.Sprintf("http://127.0.0.1:%d", ports[2]), "gossip": fmt.Sprintf("127.0.0.1:%d", ports[3]),
			"sharding": false, "replica": false, "voter": false},
	}}
	data, _ := json.Marshal(peers)
	peersFile := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(peersFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testnode.Config(filepath.Join(dir, "data"))
	cfg.HTTPAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	cfg.GossipAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	cfg.PeersEndpoint = peersFile
	cfg.ClusterSecret = internalSecret
	cfg.PartitionCount = 16
	for _, f := range tweaks {
		f(&cfg)
	}
	return testnode.Start(t, cfg), cluster.NewSigner([]byte(internalSecret), "peer-b", nil, nil)
}

// postSigned posts body to path on n, signed by s.
func postSigned(t *testing.T, n *testnode.Node, s *cluster.Signer, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", n.URL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	s.Sign(req, body, "test-node")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// A signed replicate request for a partition that does not exist crashed
// the node (index out of range in a goroutine of the apply). It is refused
// before anything is touched, and the node goes on serving.
func TestSignedReplicateForUnknownPartitionIsRefused(t *testing.T) {
	n, peer := signedNode(t)
	status, body := postSigned(t, n, peer, "/internal/v1/replicate", []byte(`{"batches":[{"p":99999,"e":1}]}`))
	if status != http.StatusBadRequest {
		t.Fatalf("replicate for partition 99999: status %d, want 400: %s", status, body)
	}
	if status, body := postSigned(t, n, peer, "/internal/v1/replicate", []byte(`{"batches":[{"p":-1,"e":1}]}`)); status != http.StatusBadRequest {
		t.Fatalf("replicate for partition -1: status %d, want 400: %s", status, body)
	}
	expectStatus(t, n.Client("").Do("GET", "/healthz", nil), 200, "healthz after the refused requests")
	if status, body := postSigned(t, n, peer, "/internal/v1/replicate", []byte(`{"batches":[]}`)); status != http.StatusOK {
		t.Fatalf("an empty replicate request after the refused ones: status %d, want 200: %s", status, body)
	}
}

// Every field of every internal request is checked; what breaks the rules
// is a 400 that names the rule, and nothing is applied.
func TestInternalRequestsAreValidated(t *testing.T) {
	n, peer := signedNode(t)
	// A user of partition 0 and one of another partition (16 partitions).
	user0, other := "", ""
	for i := 0; user0 == "" || other == ""; i++ {
		u := fmt.Sprintf("u%d", i)
		if shard.PartitionOf(u, 16) == 0 {
			user0 = cmp.Or(user0, u)
		} else {
			other = cmp.Or(other, u)
		}
	}
	doc := func(user string) string {
		return fmt.Sprintf(`{"u":%q,"c":"c","d":"d","v":1,"pos":{"epoch":1,"seq":1},"t":"2026-01-01T00:00:00Z"}`, user)
	}
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"replicate: a document of another partition", "/internal/v1/replicate", `{"batches":[{"p":0,"e":1,"docs":[` + doc(other) + `]}]}`, 400},
		{"replicate: a bad user name", "/internal/v1/replicate", `{"batches":[{"p":0,"e":1,"docs":[` + doc("bad user") + `]}]}`, 400},
		{"replicate: a document of a later epoch", "/internal/v1/replicate", `{"batches":[{"p":0,"e":1,"docs":[` + strings.Replace(doc(user0), `"epoch":1`, `"epoch":2`, 1) + `]}]}`, 400},
		{"replicate: epoch 0", "/internal/v1/replicate", `{"batches":[{"p":0,"e":0}]}`, 400},
		{"replicate: an absent key that is no key", "/internal/v1/replicate", `{"batches":[{"p":0,"e":1,"restore":true,"absent":["x"]}]}`, 400},
		{"lease: a campaign for another node", "/internal/v1/lease", `{"requests":[{"partition":0,"candidate":"test-node","epoch":5}]}`, 400},
		{"lease: a release of another node's lease", "/internal/v1/lease", `{"releases":[{"partition":0,"holder":"someone","epoch":5}]}`, 400},
		{"lease: partition out of range", "/internal/v1/lease", `{"requests":[{"partition":16,"candidate":"peer-b","epoch":5}]}`, 400},
		{"lease: a query out of range", "/internal/v1/lease", `{"queries":[-1]}`, 400},
		{"lease: epoch 0", "/internal/v1/lease", `{"requests":[{"partition":1,"candidate":"peer-b","epoch":0}]}`, 400},
		{"takeover: partition out of range", "/internal/v1/takeover", `{"partition":16,"from":{"epoch":1,"seq":1}}`, 400},
		{"positions: partition out of range", "/internal/v1/positions", `{"partitions":[0,16]}`, 400},
		{"positions: a partition twice", "/internal/v1/positions", `{"partitions":[3,3]}`, 400},
		{"positions: trailing data", "/internal/v1/positions", `{"partitions":[0]} {}`, 400},
		{"check-copy: partition out of range", "/internal/v1/check-copy", `{"partition":16}`, 400},
		{"check-copy: trailing data", "/internal/v1/check-copy", `{"partition":0} {}`, 400},
		{"voters: not an object", "/internal/v1/voters", `[1]`, 400},
		{"voters: unknown fields", "/internal/v1/voters", `{"x":1}`, 400},
		// What a node really sends is accepted.
		{"replicate: a probe", "/internal/v1/replicate", `{"batches":[{"p":0,"e":1}]}`, 200},
		{"lease: a query", "/internal/v1/lease", `{"queries":[0,15]}`, 200},
		{"positions", "/internal/v1/positions", `{"partitions":[0,15]}`, 200},
		{"voters", "/internal/v1/voters", `{}`, 200},
	} {
		status, body := postSigned(t, n, peer, tc.path, []byte(tc.body))
		if status != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, status, tc.want, body)
			continue
		}
		if tc.want == 400 && !strings.Contains(string(body), "urn:shoal:problem:invalid-internal-request") {
			t.Errorf("%s: the refusal is not an invalid-internal-request problem: %s", tc.name, body)
		}
	}
}

// Nodes of this version replicate in the binary form, on
// /internal/v2/replicate: it is checked as the JSON form is (a refusal is
// a 400 invalid-internal-request problem), and answered in the binary
// form.
func TestTheBinaryReplicationEndpoint(t *testing.T) {
	n, peer := signedNode(t)
	other := ""
	for i := 0; other == ""; i++ {
		if u := fmt.Sprintf("u%d", i); shard.PartitionOf(u, 16) != 0 {
			other = u
		}
	}
	encode := func(r replicate.Request) []byte {
		t.Helper()
		b, err := replicate.AppendRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for name, body := range map[string][]byte{
		"partition 99999": encode(replicate.Request{Batches: []replicate.WireBatch{{Partition: 99999, Epoch: 1}}}),
		"a document of another partition": encode(replicate.Request{Batches: []replicate.WireBatch{{Partition: 0, Epoch: 1,
			Docs: []replicate.WireDoc{{User: other, Coll: "c", ID: "d", Version: 1, Pos: record.Position{Epoch: 1, Seq: 1}}}}}}),
		"JSON":      []byte(`{"batches":[{"p":0,"e":1}]}`),
		"cut short": encode(replicate.Request{Batches: []replicate.WireBatch{{Partition: 0, Epoch: 1}}})[:4],
	} {
		status, answer := postSigned(t, n, peer, "/internal/v2/replicate", body)
		if status != http.StatusBadRequest || !strings.Contains(string(answer), "urn:shoal:problem:invalid-internal-request") {
			t.Errorf("%s: status %d, want a 400 invalid-internal-request: %s", name, status, answer)
		}
	}
	status, answer := postSigned(t, n, peer, "/internal/v2/replicate", encode(replicate.Request{Batches: []replicate.WireBatch{{Partition: 0, Epoch: 1}}}))
	if status != http.StatusOK {
		t.Fatalf("a probe: status %d: %s", status, answer)
	}
	resp, err := replicate.ReadResponse(answer)
	if err != nil {
		t.Fatalf("the answer to a probe: %v", err)
	}
	if len(resp.Results) != 1 || resp.Results[0].Partition != 0 || resp.Results[0].Code == "" {
		t.Fatalf("the answer to a probe: %+v", resp)
	}
}

// A body that drips was held as long as the client kept the connection
// (45 s and 135 s for internal requests, 150 s on /v1): past
// BODY_READ_TIMEOUT the node answers or closes the connection, on /v1 and
// on /internal alike.
func TestDrippingBodyIsCut(t *testing.T) {
	n, peer := signedNode(t, func(c *config.Config) { c.BodyReadTimeout = 300 * time.Millisecond })
	token := testnode.Token(t, "alice")
	signed := func() string {
		req, _ := http.NewRequest("POST", n.URL()+"/internal/v1/replicate", nil)
		peer.Sign(req, []byte(`{"batches":[]}`), "test-node")
		return headerLines(req.Header)
	}
	for _, tc := range []struct {
		name string
		head func() string
	}{
		{"/v1", func() string {
			return "PUT " + docsPath("alice", "c") + "/d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token +
				"\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n"
		}},
		{"/internal", func() string {
			return "POST /internal/v1/replicate HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n" + signed() + "\r\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			conn, err := net.Dial("tcp", strings.TrimPrefix(n.URL(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			io.WriteString(conn, tc.head()+`{"batc`) // 6 of the 14 bytes, and no more until the test ends
			go func() { <-ctx.Done(); conn.Close() }()
			conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound for the failure, not a speed
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			switch {
			case err == nil:
				resp.Body.Close()
				t.Logf("answered %s", resp.Status)
				if resp.StatusCode < 400 {
					t.Fatalf("a body that stopped half way got %d", resp.StatusCode)
				}
			case errors.Is(err, os.ErrDeadlineExceeded):
				t.Fatal("the node still waits for the body after 30s")
			default:
				t.Logf("connection closed: %v", err) // cut
			}
		})
	}
}

// headerLines writes h as request header lines.
func headerLines(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	return b.String()
}

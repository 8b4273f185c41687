package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/replicate"
)

// openStream asks n, signed by s, to switch the request's connection to a
// replication stream; it returns the answer and, on 101, the stream and
// its key.
func openStream(t *testing.T, n *testnode.Node, s *cluster.Signer, headers map[string]string) (*http.Response, io.ReadWriteCloser, []byte) {
	t.Helper()
	return openStreamAt(t, n, s, "/internal/v2/replicate-stream", headers)
}

// openStreamAt is openStream at path.
func openStreamAt(t *testing.T, n *testnode.Node, s *cluster.Signer, path string, headers map[string]string) (*http.Response, io.ReadWriteCloser, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", n.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	s.Sign(req, nil, "test-node")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		return resp, nil, nil
	}
	conn := resp.Body.(io.ReadWriteCloser)
	t.Cleanup(func() { conn.Close() })
	return resp, conn, s.StreamKey(req)
}

var upgrade = map[string]string{"Connection": "Upgrade", "Upgrade": replicate.StreamProtocol}

// A master's signed request switches to a replication stream, which
// carries requests and their answers in the binary form, one after the
// other; a frame that does not carry the stream's MAC is refused, and the
// stream closed.
func TestTheReplicationStream(t *testing.T) {
	n, peer := signedNode(t)
	if resp, conn, _ := openStream(t, n, peer, nil); conn != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a signed request without Upgrade: status %d, want 400", resp.StatusCode)
	}
	unsigned, err := http.NewRequest("POST", n.URL()+"/internal/v2/replicate-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range upgrade {
		unsigned.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unsigned request for a stream: status %d, want 401", resp.StatusCode)
	}

	_, conn, key := openStream(t, n, peer, upgrade)
	if conn == nil {
		t.Fatal("a signed request for a stream was not switched")
	}
	r := bufio.NewReader(conn)
	seal := replicate.NewStreamSealer(key)
	probe, err := replicate.AppendRequest(nil, replicate.Request{Batches: []replicate.WireBatch{{Partition: 0, Epoch: 1}, {Partition: 3, Epoch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := conn.Write(seal.AppendFrame(nil, probe)); err != nil {
			t.Fatal(err)
		}
		kind, payload, err := replicate.ReadAnswerFrame(r)
		if err != nil || kind != replicate.StreamAnswer {
			t.Fatalf("answer %d: kind %d, %v", i, kind, err)
		}
		answer, err := replicate.ReadResponse(payload)
		if err != nil || len(answer.Results) != 2 || answer.Results[0].Partition != 0 || answer.Results[1].Partition != 3 {
			t.Fatalf("answer %d: %+v, %v", i, answer, err)
		}
	}

	forged := replicate.NewStreamSealer([]byte("not the stream's key")).AppendFrame(nil, probe)
	if _, err := conn.Write(forged); err != nil {
		t.Fatal(err)
	}
	kind, payload, err := replicate.ReadAnswerFrame(r)
	if err != nil || kind != replicate.StreamRefusal || !strings.Contains(string(payload), "MAC") {
		t.Fatalf("a forged frame: kind %d %q, %v; want a refusal that names the MAC", kind, payload, err)
	}
	if _, _, err := replicate.ReadAnswerFrame(r); !errors.Is(err, io.EOF) {
		t.Fatalf("after a refusal: %v, want the stream closed", err)
	}
	if got := metric(t, n, `shoal_replication_stream_requests_total{outcome="applied"}`); got != 2 {
		t.Fatalf("%v requests counted applied, want 2", got)
	}
	// The request that opened the stream counts once it ends, as switched
	// (101), as the README says.
	testnode.Eventually(t, 10*time.Second, "the stream's opening request counted as 101", func() (bool, string) {
		got := metric(t, n, `shoal_http_requests_total{code="101",method="POST",route="/internal/v2/replicate-stream"}`)
		return got == 1, fmt.Sprintf("%v counted", got)
	})
}

// A master of this version opens its streams at
// /internal/v4/replicate-stream, whose answer frames are sealed under the
// stream's answer key (replicate.AnswerSealer): its refusals too. An
// answer read as an unsealed frame, or checked under another key, fails.
func TestTheSealedReplicationStream(t *testing.T) {
	n, peer := signedNode(t)
	sealed := map[string]string{"Connection": "Upgrade", "Upgrade": replicate.StreamProtocolSealed}
	if resp, conn, _ := openStreamAt(t, n, peer, "/internal/v4/replicate-stream", upgrade); conn != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("v4 asked for the unsealed protocol: status %d, want 400", resp.StatusCode)
	}
	_, conn, key := openStreamAt(t, n, peer, "/internal/v4/replicate-stream", sealed)
	if conn == nil {
		t.Fatal("a signed request for a sealed stream was not switched")
	}
	r := bufio.NewReader(conn)
	seal, open := replicate.NewStreamSealer(key), replicate.NewAnswerOpener(key)
	probe, err := replicate.AppendRequest(nil, replicate.Request{Batches: []replicate.WireBatch{{Partition: 1, Epoch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := conn.Write(seal.AppendFrame(nil, probe)); err != nil {
			t.Fatal(err)
		}
		kind, payload, err := open.ReadFrame(r)
		if err != nil || kind != replicate.StreamAnswer {
			t.Fatalf("answer %d: kind %d, %v", i, kind, err)
		}
		if answer, err := replicate.ReadResponse(payload); err != nil || len(answer.Results) != 1 || answer.Results[0].Partition != 1 {
			t.Fatalf("answer %d: %+v, %v", i, answer, err)
		}
	}
	// The third answer, checked under another stream's key: refused.
	if _, err := conn.Write(seal.AppendFrame(nil, probe)); err != nil {
		t.Fatal(err)
	}
	other := replicate.NewAnswerOpener([]byte("another stream's key"))
	if _, _, err := other.ReadFrame(r); !errors.Is(err, replicate.ErrStreamFrame) {
		t.Fatalf("an answer checked under another key: %v, want %v", err, replicate.ErrStreamFrame)
	}
	conn.Close()

	// A refusal is sealed too.
	_, conn, key = openStreamAt(t, n, peer, "/internal/v4/replicate-stream", sealed)
	if conn == nil {
		t.Fatal("the second sealed stream was not switched")
	}
	r, open = bufio.NewReader(conn), replicate.NewAnswerOpener(key)
	if _, err := conn.Write(replicate.NewStreamSealer([]byte("not the stream's key")).AppendFrame(nil, probe)); err != nil {
		t.Fatal(err)
	}
	kind, payload, err := open.ReadFrame(r)
	if err != nil || kind != replicate.StreamRefusal || !strings.Contains(string(payload), "MAC") {
		t.Fatalf("a forged frame on a sealed stream: kind %d %q, %v; want a sealed refusal that names the MAC", kind, payload, err)
	}
}

// A node shutting down closes the streams it serves: the HTTP server's
// Shutdown no longer sees a connection taken over, and without this its
// goroutine outlived the node.
func TestANodeShuttingDownClosesItsStreams(t *testing.T) {
	n, peer := signedNode(t)
	_, conn, _ := openStream(t, n, peer, upgrade)
	if conn == nil {
		t.Fatal("a signed request for a stream was not switched")
	}
	n.Stop()
	read := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		read <- err
	}()
	select {
	case err := <-read:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("reading the stream after the node stopped: %v, want io.EOF", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream was still open 30 s after the node stopped")
	}
}

// metric reads one sample of n's /metrics (0 if absent).
func metric(t *testing.T, n *testnode.Node, sample string) float64 {
	t.Helper()
	resp := n.Client("").Do("GET", "/metrics", nil)
	for _, line := range bytes.Split(resp.Body, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(sample+" ")); ok {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// A stream's sender is admitted again for every request it carries: a
// node removed from the peer list since the stream opened is refused, as
// its requests over HTTP would be.
func TestAStreamOfARemovedNodeIsRefused(t *testing.T) {
	n, peer := signedNode(t)
	_, conn, key := openStream(t, n, peer, upgrade)
	if conn == nil {
		t.Fatal("a signed request for a stream was not switched")
	}
	r := bufio.NewReader(conn)
	seal := replicate.NewStreamSealer(key)
	probe, err := replicate.AppendRequest(nil, replicate.Request{Batches: []replicate.WireBatch{{Partition: 0, Epoch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	send := func() (byte, []byte) {
		t.Helper()
		if _, err := conn.Write(seal.AppendFrame(nil, probe)); err != nil {
			t.Fatal(err)
		}
		kind, payload, err := replicate.ReadAnswerFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		return kind, payload
	}
	if kind, payload := send(); kind != replicate.StreamAnswer {
		t.Fatalf("a request of a node of the cluster: kind %d %q", kind, payload)
	}
	data, err := os.ReadFile(n.Config.PeersEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	list.Peers = slices.DeleteFunc(list.Peers, func(p map[string]any) bool { return p["id"] == "peer-b" })
	if data, err = json.Marshal(list); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.Config.PeersEndpoint, data, 0o644); err != nil {
		t.Fatal(err)
	}
	n.ReloadPeers()
	testnode.Eventually(t, 30*time.Second, "peer-b no longer admitted", func() (bool, string) {
		return !n.Cluster().Signer().Admits("peer-b"), "still admitted"
	})
	if kind, payload := send(); kind != replicate.StreamRefusal || !strings.Contains(string(payload), "no longer a node") {
		t.Fatalf("a request of a removed node: kind %d %q, want a refusal", kind, payload)
	}
	if _, _, err := replicate.ReadAnswerFrame(r); !errors.Is(err, io.EOF) {
		t.Fatalf("after the refusal: %v, want the stream closed", err)
	}
}

package node

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/replicate"
)

// streamingPeer is loopbackPeer with streams: every stream's key is the
// same, and no link is ever cut.
type streamingPeer struct{ loopbackPeer }

var testStreamKey = []byte("the test's stream key")

func (streamingPeer) StreamKey(*http.Request) []byte { return testStreamKey }
func (streamingPeer) LinkCut(string, string) error   { return nil }
func (streamingPeer) AnswerCut(string) error         { return nil }

// streamServer serves replication streams as a replica does, answering
// each request it takes with every batch applied; with closeAfter set it
// closes a stream after one answer, as a replica that restarts between
// two requests does.
type streamServer struct {
	closeAfter bool

	mu      sync.Mutex
	opened  int
	answers int
}

func (s *streamServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/internal/v4/replicate-stream" {
		http.NotFound(w, r)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	s.mu.Lock()
	s.opened++
	s.mu.Unlock()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + replicate.StreamProtocolSealed + "\r\n\r\n")
	_ = rw.Flush()
	opener, answers := replicate.NewStreamOpener(testStreamKey, 1<<20), replicate.NewAnswerSealer(testStreamKey)
	for {
		data, err := opener.ReadFrame(rw.Reader)
		if err != nil {
			return
		}
		req, err := replicate.ReadRequest(data)
		if err != nil {
			return
		}
		var out replicate.Response
		for _, b := range req.Batches {
			out.Results = append(out.Results, replicate.Result{Partition: b.Partition, Applied: b.UpTo, Epoch: b.Epoch, Code: replicate.CodeOK})
		}
		s.mu.Lock()
		s.answers++ // before the answer goes: the test reads it once the answer came
		s.mu.Unlock()
		if _, err := conn.Write(answers.AppendFrame(nil, replicate.StreamAnswer, replicate.AppendResponse(nil, out))); err != nil {
			return
		}
		if s.closeAfter {
			return
		}
	}
}

func (s *streamServer) counts() (opened, answers int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened, s.answers
}

var streamTestRequest = replicate.Request{Batches: []replicate.WireBatch{{Partition: 2, Epoch: 3,
	Docs: []replicate.WireDoc{{User: "u", Coll: "c", ID: "d", Version: 1, Body: map[string]any{"n": int64(1)}}}}}}

func sendOK(t *testing.T, tr *replicaTransport) {
	t.Helper()
	resp, err := tr.Send(context.Background(), "r", streamTestRequest)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 1 || resp.Results[0].Code != replicate.CodeOK || resp.Results[0].Partition != 2 {
		t.Fatalf("answer %+v", resp)
	}
}

// Requests to a replica go over one stream, kept from one to the next; a
// stream idle for streamReuse is replaced.
func TestRequestsShareAStream(t *testing.T) {
	ss := &streamServer{}
	srv := httptest.NewServer(ss)
	defer srv.Close()
	now := time.Unix(1000, 0)
	tr := newReplicaTransport(streamingPeer{loopbackPeer{srv.URL}}, func() time.Time { return now })
	defer tr.Close()
	for range 3 {
		sendOK(t, tr)
	}
	if opened, answers := ss.counts(); opened != 1 || answers != 3 {
		t.Fatalf("3 requests opened %d streams and were answered %d times, want 1 and 3", opened, answers)
	}
	now = now.Add(streamReuse)
	sendOK(t, tr)
	if opened, _ := ss.counts(); opened != 2 {
		t.Fatalf("a request after the stream was idle %v opened %d streams in all, want 2", streamReuse, opened)
	}
}

// A kept stream the replica closed (it restarted between two requests) is
// replaced, and the request goes through on the new one: it failed, and
// every partition in it was caught up from the store, before.
func TestAStreamTheReplicaClosedIsReplaced(t *testing.T) {
	ss := &streamServer{closeAfter: true}
	srv := httptest.NewServer(ss)
	defer srv.Close()
	tr := newReplicaTransport(streamingPeer{loopbackPeer{srv.URL}}, time.Now)
	defer tr.Close()
	for range 3 {
		sendOK(t, tr)
	}
	if opened, answers := ss.counts(); opened != 3 || answers != 3 {
		t.Fatalf("3 requests to a replica closing each stream opened %d streams and were answered %d times, want 3 and 3", opened, answers)
	}
}

// A replica that does not know streams (an older version: 404
// route-not-found) is sent requests one by one, and asked for a stream
// again only after v1Retry.
func TestAReplicaWithoutStreamsIsSentRequestsOneByOne(t *testing.T) {
	rs := &replicaServer{binary: true, calls: map[string]int{}}
	srv := httptest.NewServer(rs)
	defer srv.Close()
	now := time.Unix(1000, 0)
	tr := newReplicaTransport(streamingPeer{loopbackPeer{srv.URL}}, func() time.Time { return now })
	defer tr.Close()
	sendOK(t, tr)
	sendOK(t, tr)
	if streams, v2 := rs.took("/internal/v4/replicate-stream"), rs.took("/internal/v3/replicate"); streams != 1 || v2 != 2 {
		t.Fatalf("two sends asked for %d streams and made %d binary calls, want 1 and 2", streams, v2)
	}
	now = now.Add(v1Retry)
	sendOK(t, tr)
	if streams := rs.took("/internal/v4/replicate-stream"); streams != 2 {
		t.Fatalf("a send a minute later asked for %d streams in all, want 2", streams)
	}
}

// A closed transport keeps no stream: the node closes it as it shuts down,
// and a request after that goes one by one.
func TestAClosedTransportOpensNoStream(t *testing.T) {
	ss := &streamServer{}
	srv := httptest.NewServer(ss)
	defer srv.Close()
	tr := newReplicaTransport(streamingPeer{loopbackPeer{srv.URL}}, time.Now)
	sendOK(t, tr)
	tr.Close()
	if _, err := tr.Send(context.Background(), "r", streamTestRequest); err == nil {
		t.Fatal("the server answers only streams, yet a request after Close went through")
	}
	if opened, _ := ss.counts(); opened != 1 {
		t.Fatalf("%d streams opened, want 1 (none after Close)", opened)
	}
}

// A replica that refuses a stream for now (503: it is shutting down, a
// clock out of the signature window) is sent that request on its own and
// asked for a stream again with the next: only a replica that cannot
// take one (404, 501) is left without for v1Retry.
func TestAStreamRefusedForNowIsAskedForAgain(t *testing.T) {
	rs := &replicaServer{binary: true, calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/v4/replicate-stream" {
			rs.mu.Lock()
			rs.calls[r.URL.Path]++
			rs.mu.Unlock()
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		rs.ServeHTTP(w, r)
	}))
	defer srv.Close()
	tr := newReplicaTransport(streamingPeer{loopbackPeer{srv.URL}}, time.Now)
	defer tr.Close()
	sendOK(t, tr)
	sendOK(t, tr)
	if streams, v2 := rs.took("/internal/v4/replicate-stream"), rs.took("/internal/v3/replicate"); streams != 2 || v2 != 2 {
		t.Fatalf("two sends asked for %d streams and made %d binary calls, want 2 and 2", streams, v2)
	}
}

// clientPeer is streamingPeer sending with a client of its own (one that
// speaks HTTP/2 to a TLS server, say).
type clientPeer struct {
	streamingPeer
	client *http.Client
}

func (p clientPeer) Send(_ string, req *http.Request, _ bool) (*http.Response, error) {
	return sendTo(p.url, p.client, req)
}

// A replica reached over HTTP/2 (https peer URLs, the transport
// negotiating h2) cannot be asked to switch protocols at all: the
// transport refuses the upgrade before anything is sent. Its requests go
// one by one, and the stream is asked for again only after v1Retry; they
// failed, every one, before (second review of the streams).
func TestAReplicaReachedOverHTTP2IsSentRequestsOneByOne(t *testing.T) {
	rs := &replicaServer{binary: true, calls: map[string]int{}}
	srv := httptest.NewUnstartedServer(rs)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	now := time.Unix(1000, 0)
	peer := clientPeer{streamingPeer{loopbackPeer{srv.URL}}, srv.Client()}
	tr := newReplicaTransport(peer, func() time.Time { return now })
	defer tr.Close()
	sendOK(t, tr)
	sendOK(t, tr)
	if v2 := rs.took("/internal/v3/replicate"); v2 != 2 {
		t.Fatalf("two sends made %d binary calls, want 2", v2)
	}
	if got := rs.protos(); len(got) != 1 || !got["HTTP/2.0"] {
		t.Fatalf("the replica was reached over %v, want HTTP/2.0 alone", got)
	}
	tr.mu.Lock()
	retry, remembered := tr.noStream["r"]
	tr.mu.Unlock()
	if !remembered || !retry.Equal(now.Add(v1Retry)) {
		t.Fatalf("the replica without streams is asked again at %v (remembered %v), want %v", retry, remembered, now.Add(v1Retry))
	}
}

// countingPeer is streamingPeer counting the test faults' checks, its Send
// checking them as cluster.Send does.
type countingPeer struct {
	streamingPeer
	mu     sync.Mutex
	checks int
}

func (p *countingPeer) LinkCut(string, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checks++
	return nil
}

func (p *countingPeer) Send(to string, req *http.Request, signed bool) (*http.Response, error) {
	if err := p.LinkCut(to, req.URL.Path); err != nil {
		return nil, err
	}
	return p.streamingPeer.Send(to, req, signed)
}

// The test faults are checked once per request, whether it goes over a
// stream or, the replica taking none, on its own: a request that fell
// back counted twice against a test's CutReplicationAfter before 6dff388.
func TestAReplicationRequestMeetsTheFaultsOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.Handler
	}{
		{"over a stream", &streamServer{}},
		{"one by one", &replicaServer{binary: true, calls: map[string]int{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			peer := &countingPeer{streamingPeer: streamingPeer{loopbackPeer{srv.URL}}}
			tr := newReplicaTransport(peer, time.Now)
			defer tr.Close()
			for range 2 {
				sendOK(t, tr)
			}
			peer.mu.Lock()
			defer peer.mu.Unlock()
			// Two requests, and the request asking for a stream (a call
			// of its own, answered 101 or 404), meet them once each.
			if peer.checks != 3 {
				t.Fatalf("two requests and the stream's opening met the faults %d times, want 3", peer.checks)
			}
		})
	}
}

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/replicate"
)

// loopbackPeer sends every request to one HTTP server on loopback, as
// cluster.Cluster.Send sends to a peer's URL (unsigned: the servers of
// these tests check no signature).
type loopbackPeer struct{ url string }

func (p loopbackPeer) Send(_ string, req *http.Request, _ bool) (*http.Response, error) {
	return sendTo(p.url, http.DefaultClient, req)
}

// sendTo sends req to the server at base with client.
func sendTo(base string, client *http.Client, req *http.Request) (*http.Response, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	req.URL.Scheme, req.URL.Host, req.Host = u.Scheme, u.Host, u.Host
	return client.Do(req)
}

// replicaServer answers replication requests as a replica of an older
// version does (JSON on /internal/v1/replicate alone: 404 on v2) or as
// one of this version (both), counting the calls of each form.
type replicaServer struct {
	binary bool

	mu    sync.Mutex
	calls map[string]int  // path -> calls
	proto map[string]bool // the protocols requests came over
}

func (s *replicaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[r.URL.Path]++
	if s.proto == nil {
		s.proto = map[string]bool{}
	}
	s.proto[r.Proto] = true
	s.mu.Unlock()
	answer := func(req replicate.Request) replicate.Response {
		var out replicate.Response
		for _, b := range req.Batches {
			out.Results = append(out.Results, replicate.Result{Partition: b.Partition, Applied: b.UpTo, Epoch: b.Epoch, Code: replicate.CodeOK})
		}
		return out
	}
	switch {
	case r.URL.Path == "/internal/v1/replicate":
		req, err := replicate.DecodeRequest(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(answer(req))
	case r.URL.Path == "/internal/v3/replicate" && s.binary:
		data, _ := io.ReadAll(r.Body)
		req, err := replicate.ReadRequest(data)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = w.Write(replicate.AppendResponse(nil, answer(req)))
	default:
		// As the node's router answers a route it does not have.
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"type":%q,"title":"No such route","status":404}`, api.TypeRouteNotFound)
	}
}

func (s *replicaServer) took(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// protos are the protocols requests came over.
func (s *replicaServer) protos() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.proto)
}

// A master sends the binary form; a replica that answers 404 to it (an
// older version, during an upgrade) gets JSON, and is offered the binary
// form again a minute later.
func TestReplicationFallsBackToJSONForAnOlderReplica(t *testing.T) {
	req := replicate.Request{Batches: []replicate.WireBatch{{Partition: 2, Epoch: 3,
		Docs: []replicate.WireDoc{{User: "u", Coll: "c", ID: "d", Version: 1, Body: map[string]any{"n": int64(1)}}}}}}
	for _, tc := range []struct {
		name                     string
		binary                   bool
		wantV2, wantV1           int // calls after two sends
		wantV2Later, wantV1Later int // after one more, past v1Retry
	}{
		{"a replica of this version", true, 2, 0, 3, 0},
		{"an older replica", false, 1, 2, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &replicaServer{binary: tc.binary, calls: map[string]int{}}
			srv := httptest.NewServer(rs)
			defer srv.Close()
			now := time.Unix(1000, 0)
			tr := newReplicaTransport(loopbackPeer{srv.URL}, func() time.Time { return now })
			send := func() {
				t.Helper()
				resp, err := tr.Send(context.Background(), "r", req)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Results) != 1 || resp.Results[0].Code != replicate.CodeOK || resp.Results[0].Partition != 2 {
					t.Fatalf("answer %+v", resp)
				}
			}
			send()
			send()
			if v2, v1 := rs.took("/internal/v3/replicate"), rs.took("/internal/v1/replicate"); v2 != tc.wantV2 || v1 != tc.wantV1 {
				t.Fatalf("two sends made %d binary and %d JSON calls, want %d and %d", v2, v1, tc.wantV2, tc.wantV1)
			}
			now = now.Add(v1Retry)
			send()
			if v2, v1 := rs.took("/internal/v3/replicate"), rs.took("/internal/v1/replicate"); v2 != tc.wantV2Later || v1 != tc.wantV1Later {
				t.Fatalf("a send a minute later made %d binary and %d JSON calls in all, want %d and %d", v2, v1, tc.wantV2Later, tc.wantV1Later)
			}
		})
	}
}

// A 404 that is not the router's route-not-found (say, a proxy's) is an
// error, not a sign of an older replica: the binary form is kept.
func TestAnother404IsNoReasonToSendJSON(t *testing.T) {
	v1 := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/v1/replicate" {
			v1++
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	tr := newReplicaTransport(loopbackPeer{srv.URL}, time.Now)
	if _, err := tr.Send(context.Background(), "r", replicate.Request{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a plain 404: %v, want an error that says 404", err)
	}
	if v1 != 0 || tr.jsonOnly("r") {
		t.Fatalf("a plain 404 made the transport send JSON (%d calls)", v1)
	}
}

// An answer that is not the binary form is an error that names the
// replica, not a response.
func TestAnUnreadableBinaryAnswerIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, bytes.NewReader([]byte(`{"results":[]}`)))
	}))
	defer srv.Close()
	tr := newReplicaTransport(loopbackPeer{srv.URL}, time.Now)
	if _, err := tr.Send(context.Background(), "r", replicate.Request{}); err == nil {
		t.Fatal("a JSON answer on /internal/v3/replicate was taken")
	}
}

package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// onPath stands between the nodes and n2's handler, where someone on the
// network between two nodes would be (no TLS), and does to each answer
// what tamper says.
type onPath struct {
	next http.Handler

	mu     sync.Mutex
	tamper func(status int, h http.Header, body []byte) (int, http.Header, []byte)
}

func (p *onPath) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorded{header: http.Header{}}
	p.next.ServeHTTP(rec, r)
	p.mu.Lock()
	tamper := p.tamper
	p.mu.Unlock()
	status, h, body := rec.status, rec.header, rec.body.Bytes()
	if tamper != nil {
		status, h, body = tamper(status, h.Clone(), bytes.Clone(body))
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

type recorded struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorded) Header() http.Header { return r.header }
func (r *recorded) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorded) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// An answer to a node-to-node call is sealed by the node the call went
// to, for that call: one altered on its way (its body, a header, its
// status), one whose seal is taken off, and one given again to a later
// call are refused by Send, which used to hand any of them to the caller
// as the peer's (a vote, an acknowledgement, a forwarded write's outcome).
func TestAnAnswerAlteredOnItsWayIsRefused(t *testing.T) {
	peers := newPeers(t, 2)
	file := filepath.Join(t.TempDir(), "peers.json")
	writePeers(t, file, peers)
	for _, p := range peers {
		p.start(t, file)
	}
	allSee(t, peers, map[string]cluster.State{"n1": cluster.Up, "n2": cluster.Up}, 20*time.Second)

	// n2's API, behind the man in the middle, at n2's address in the list.
	answer := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/internal/v1/untyped" {
			// No Content-Type: net/http would add one after the seal, so
			// the seal sets it first and covers it.
			fmt.Fprint(w, "plain text")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Consistency-Token", "7:1.5")
		// Sealed as the caller reads them: the key canonical, the value
		// trimmed and its line breaks made spaces.
		w.Header()["x-not-canonical"] = []string{" spaced\nvalue "}
		// Keys that differ in case only, merged in the order net/http
		// writes them, and a key it does not send at all.
		w.Header()["x-twice"], w.Header()["X-Twice"] = []string{"lower"}, []string{"upper"}
		w.Header()["Not A Field Name"] = []string{"dropped"}
		fmt.Fprintf(w, `{"granted":true,"to":%q}`, cluster.SignedBy(r.Context()))
	}
	mitm := &onPath{next: peers[1].c.Signer().Middleware(testnode.Logger(t), http.HandlerFunc(answer))}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", peers[1].http))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mitm}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	call := func() (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodPost, "http://peer/internal/v1/lease", strings.NewReader(`{"partition":1}`))
		resp, err := peers[0].c.Send("n2", req, true)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, body, err
	}
	resp, body, err := call()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != `{"granted":true,"to":"n1"}` {
		t.Fatalf("an answer left alone: %v %v %s", resp, err, body)
	}
	if got := resp.Header.Get("X-Not-Canonical"); got != "spaced value" {
		t.Fatalf("the header as the caller reads it: %q", got)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://peer/internal/v1/untyped", nil)
	if resp, err := peers[0].c.Send("n2", req, true); err != nil || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("an answer without a Content-Type, left alone: %v %v", resp, err)
	}
	// Each answer's map order differs: a few more calls left alone.
	for range 10 {
		if _, _, err := call(); err != nil {
			t.Fatalf("an answer left alone: %v", err)
		}
	}

	var kept struct {
		h    http.Header
		body []byte
	}
	for _, tc := range []struct {
		name   string
		tamper func(int, http.Header, []byte) (int, http.Header, []byte)
	}{
		{"body altered", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			return s, h, bytes.Replace(b, []byte("true"), []byte("fals"), 1)
		}},
		{"header altered", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			h.Set("X-Consistency-Token", "9:1.5")
			return s, h, b
		}},
		{"header added", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			h.Set("X-Shoal-Master", "n1")
			return s, h, b
		}},
		{"status altered", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			return http.StatusCreated, h, b
		}},
		{"a 101 to a call that did not ask to switch", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			return http.StatusSwitchingProtocols, http.Header{"X-Shoal-Master": {"n1"}}, nil
		}},
		{"seal taken off", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			h.Del(cluster.HeaderAnswerSignature)
			return s, h, b
		}},
		{"an earlier answer given again", func(s int, h http.Header, b []byte) (int, http.Header, []byte) {
			if kept.h == nil {
				kept.h, kept.body = h, b
				return s, h, b
			}
			return s, kept.h, kept.body
		}},
	} {
		mitm.mu.Lock()
		mitm.tamper = tc.tamper
		mitm.mu.Unlock()
		if tc.name == "an earlier answer given again" {
			if _, _, err := call(); err != nil { // the answer kept
				t.Fatalf("%s: the first call: %v", tc.name, err)
			}
		}
		resp, body, err := call()
		if tc.name == "a 101 to a call that did not ask to switch" && err != nil && !errors.Is(err, cluster.ErrUnsealedAnswer) {
			// net/http itself may refuse a 101 to a request that did
			// not ask to switch: refused either way.
			t.Logf("%s: %v", tc.name, err)
			continue
		}
		if !errors.Is(err, cluster.ErrUnsealedAnswer) {
			t.Errorf("%s: Send gave %v %s, err %v; want %v", tc.name, resp, body, err, cluster.ErrUnsealedAnswer)
		}
	}
}

package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingBody is a request body that counts the bytes read from it and
// has far more to give than anything should read.
type countingBody struct{ read atomic.Int64 }

func (b *countingBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	b.read.Add(int64(len(p)))
	return len(p), nil
}
func (b *countingBody) Close() error { return nil }

const testSecret = "secret-one-0123456789"

// knownIDs is a signer's known func for a fixed set of node ids.
func knownIDs(ids ...string) func(string) bool {
	return func(id string) bool { return slices.Contains(ids, id) }
}

// signedFor builds a POST to path signed by from for to with body, then
// swaps its body for a counting one that declares length bytes.
func signedFor(from *Signer, to, path string, body []byte) *http.Request {
	req := httptest.NewRequest("POST", path, bytes.NewReader(body))
	from.Sign(req, body, to)
	return req
}

// Six unsigned 60 MB bodies were buffered before their 401. Everything
// the headers can refuse is refused before a byte of the body is read.
func TestMiddlewareRefusesBeforeReadingTheBody(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	hugeID := strings.Repeat("n", 10<<10)
	// The receiver's known func says yes to its own id and to the 10 KB
	// one: the signer refuses them all the same.
	receiver := NewSigner([]byte(testSecret), "b", clock, knownIDs("a", "b", hugeID))
	peer := NewSigner([]byte(testSecret), "a", clock, nil)
	stranger := NewSigner([]byte(testSecret), "z", clock, nil)
	self := NewSigner([]byte(testSecret), "b", clock, nil)
	huge := NewSigner([]byte(testSecret), hugeID, clock, nil)
	otherSecret := NewSigner([]byte("secret-two-0123456789"), "a", clock, nil)
	reached := 0
	h := receiver.Middleware(slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusNoContent)
	}))
	const declared = 60 << 20
	body := []byte(`{"batches":[]}`)
	replayed := signedFor(peer, "b", "/internal/v1/replicate", body)
	if w := httptest.NewRecorder(); func() int { h.ServeHTTP(w, replayed); return w.Code }() != http.StatusNoContent {
		t.Fatal("a valid signed request was refused")
	}
	cases := map[string]func() *http.Request{
		"unsigned": func() *http.Request { return httptest.NewRequest("POST", "/internal/v1/replicate", nil) },
		"signed by a node not in the cluster": func() *http.Request {
			return signedFor(stranger, "b", "/internal/v1/replicate", body)
		},
		"signed as the receiver itself": func() *http.Request { return signedFor(self, "b", "/internal/v1/replicate", body) },
		"a 10 KB node id":               func() *http.Request { return signedFor(huge, "b", "/internal/v1/replicate", body) },
		"stale": func() *http.Request {
			req := signedFor(peer, "b", "/internal/v1/replicate", body)
			now = now.Add(time.Minute)
			return req
		},
		"addressed to another node": func() *http.Request { return signedFor(peer, "c", "/internal/v1/replicate", body) },
		"another secret":            func() *http.Request { return signedFor(otherSecret, "b", "/internal/v1/replicate", body) },
		"replayed": func() *http.Request {
			req := httptest.NewRequest("POST", "/internal/v1/replicate", nil)
			req.Header = replayed.Header.Clone()
			return req
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			req := mk()
			cb := &countingBody{}
			req.Body, req.ContentLength = cb, declared
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401: %s", w.Code, w.Body)
			}
			if n := cb.read.Load(); n != 0 {
				t.Errorf("%d bytes of the body were read before the refusal, want 0", n)
			}
		})
	}
	if reached != 1 {
		t.Fatalf("the handler was reached %d times, want once (the valid request)", reached)
	}
}

// Over real HTTP: headers that declare a 60 MB body and never send it are
// answered 401 at once (before, the node waited for and buffered the body).
func TestUnsignedRequestIsAnsweredWithoutItsBody(t *testing.T) {
	receiver := NewSigner([]byte(testSecret), "b", nil, knownIDs("a"))
	srv := httptest.NewServer(receiver.Middleware(slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("an unsigned request reached the handler")
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /internal/v1/replicate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s: a\r\n\r\n", 60<<20, HeaderNode)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails the test instead of blocking it
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
}

// A signed request must declare its length, within MaxInternalBody, and
// only that many bytes are read.
func TestMiddlewareNeedsADeclaredLength(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	receiver := NewSigner([]byte(testSecret), "b", clock, knownIDs("a", "b"))
	peer := NewSigner([]byte(testSecret), "a", clock, nil)
	var got []byte
	h := receiver.Middleware(slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	body := []byte(`{"partitions":[1]}`)
	for _, tc := range []struct {
		name     string
		declared int64
		want     int
	}{
		{"chunked (no length)", -1, http.StatusLengthRequired},
		{"over the internal maximum", MaxInternalBody + 1, http.StatusRequestEntityTooLarge},
	} {
		req := signedFor(peer, "b", "/internal/v1/positions", body)
		cb := &countingBody{}
		req.Body, req.ContentLength = cb, tc.declared
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != tc.want || cb.read.Load() != 0 {
			t.Errorf("%s: status %d after reading %d bytes, want %d without reading", tc.name, w.Code, cb.read.Load(), tc.want)
		}
	}
	// The body is read up to the declared length and no further.
	req := signedFor(peer, "b", "/internal/v1/positions", body)
	req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), &countingBody{}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusNoContent || !bytes.Equal(got, body) {
		t.Fatalf("status %d, handler read %q; want 204 and exactly the declared body", w.Code, got)
	}
	// A body shorter than declared is refused.
	req = signedFor(peer, "b", "/internal/v1/positions", body)
	req.Body = io.NopCloser(bytes.NewReader(body[:5]))
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("a body shorter than its Content-Length got %d, want 400", w.Code)
	}
}

// X-Shoal-Node and the path were logged verbatim at WARN: 20 requests with
// a 900 KB header added 18 MB of log.
func TestRefusalLogIsBounded(t *testing.T) {
	var logs bytes.Buffer
	receiver := NewSigner([]byte(testSecret), "b", nil, knownIDs("a"))
	h := receiver.Middleware(slog.New(slog.NewJSONHandler(&logs, nil)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	big := strings.Repeat("n", 900<<10)
	for i := 0; i < 20; i++ {
		req := httptest.NewRequest("POST", "/internal/v1/"+big, nil)
		req.Header.Set(HeaderNode, big)
		req.Header.Set(HeaderTo, big)
		req.Header.Set(HeaderTime, big)
		req.Header.Set(HeaderNonce, big)
		req.Header.Set(HeaderSignature, big)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if logs.Len() > 16<<10 {
		t.Fatalf("20 refusals with 900 KB headers logged %d bytes, want at most 16 KB", logs.Len())
	}
	if !strings.Contains(logs.String(), "internal request refused") {
		t.Fatalf("the refusals were not logged at all:\n%s", logs.String())
	}
}

// A flood of refusals logs a few lines per minute, then says how many it
// held back.
func TestRefusalLogIsRateLimited(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var logs bytes.Buffer
	receiver := NewSigner([]byte(testSecret), "b", func() time.Time { return now }, knownIDs("a"))
	h := receiver.Middleware(slog.New(slog.NewJSONHandler(&logs, nil)), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := 0; i < 1000; i++ {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/internal/v1/ping", nil))
	}
	first := strings.Count(logs.String(), "\n")
	if first > refusalLogMax {
		t.Fatalf("1000 refusals in one instant logged %d lines, want at most %d", first, refusalLogMax)
	}
	now = now.Add(refusalLogWindow)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/internal/v1/ping", nil))
	last := logs.String()[strings.LastIndex(strings.TrimSuffix(logs.String(), "\n"), "\n")+1:]
	if want := fmt.Sprintf(`"suppressed":%d`, 1000-first); !strings.Contains(last, want) {
		t.Fatalf("the next window's first line does not say %s: %s", want, last)
	}
}

// Only nodes of the cluster may call: peers of the list, or a node known
// from gossip (a draining one); never this node's own id, never an id the
// peer list would refuse.
func TestVerifyAcceptsOnlyKnownNodes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	// The known func says yes to the receiver's own id too: the signer
	// refuses it all the same.
	receiver := NewSigner([]byte(testSecret), "b", clock, knownIDs("a", "draining", "b", strings.Repeat("a", 65), "bad id!"))
	for _, tc := range []struct {
		from string
		ok   bool
	}{
		{"a", true},        // a peer of the list
		{"draining", true}, // known from gossip
		{"z", false},       // unknown
		{"b", false},       // the receiver's own id
		{strings.Repeat("a", 65), false},
		{"bad id!", false},
	} {
		req := signedFor(NewSigner([]byte(testSecret), tc.from, clock, nil), "b", "/internal/v1/ping", nil)
		_, err := receiver.Verify(req, nil)
		if (err == nil) != tc.ok {
			t.Errorf("signed by %.20q: err %v, want accepted %v", tc.from, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrUnknownNode) && !errors.Is(err, ErrUnsigned) {
			t.Errorf("signed by %.20q: err %v, want ErrUnknownNode or ErrUnsigned", tc.from, err)
		}
	}
}

// The cluster's signer knows the peers of the list and the live gossip
// members (a node removed from the list that drains), not itself, not a
// member gossip saw leave.
func TestClusterKnowsPeersAndDrainingMembers(t *testing.T) {
	c := &Cluster{cfg: Config{NodeID: "b"}, peers: PeerList{Peers: []Peer{{ID: "a"}, {ID: "b"}}},
		members: map[string]*memberInfo{"draining": {alive: true}, "gone": {alive: false}}}
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	receiver := NewSigner([]byte(testSecret), "b", clock, c.knows)
	for from, want := range map[string]bool{"a": true, "draining": true, "b": false, "gone": false, "z": false} {
		req := signedFor(NewSigner([]byte(testSecret), from, clock, nil), "b", "/internal/v1/ping", nil)
		if _, err := receiver.Verify(req, nil); (err == nil) != want {
			t.Errorf("signed by %s: err %v, want accepted %v", from, err, want)
		}
	}
}

// A signed request captured on the network can be sent again with another
// body of the same declared length: its head verifies, so its body is read
// before the body's signature fails. Once is all it may cost: a nonce is
// spent as soon as its head verifies, so every further copy is refused as
// a replay before a byte of its body is read.
func TestACapturedHeadCostsOneBodyRead(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	receiver := NewSigner([]byte(testSecret), "b", clock, knownIDs("a"))
	peer := NewSigner([]byte(testSecret), "a", clock, nil)
	h := receiver.Middleware(slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request with a forged body reached the handler")
	}))
	body := bytes.Repeat([]byte("y"), 1<<20)
	captured := signedFor(peer, "b", "/internal/v1/replicate", body)
	var read []int64
	for i := 0; i < 3; i++ {
		req := httptest.NewRequest("POST", "/internal/v1/replicate", nil)
		req.Header = captured.Header.Clone()
		cb := &countingBody{}
		req.Body, req.ContentLength = cb, int64(len(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("copy %d: status %d, want 401", i+1, w.Code)
		}
		read = append(read, cb.read.Load())
	}
	if read[1] != 0 || read[2] != 0 {
		t.Fatalf("bytes of the body read for three copies of one captured head: %v; want the second and third refused unread", read)
	}
}

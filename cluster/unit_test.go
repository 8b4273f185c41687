package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

func TestStateOf(t *testing.T) {
	now := time.Unix(1000, 0)
	after := 5 * time.Second
	cases := []struct {
		name string
		o    observation
		want State
	}{
		{"never joined", observation{}, Down},
		{"dead in gossip", observation{alive: false, lastHeard: now}, Down},
		{"heard just now", observation{alive: true, lastHeard: now}, Up},
		{"heard at the limit", observation{alive: true, lastHeard: now.Add(-after)}, Up},
		{"silent too long", observation{alive: true, lastHeard: now.Add(-after - time.Millisecond)}, Suspect},
	}
	for _, c := range cases {
		if got := stateOf(c.o, now, after); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestMemberlistSettingsFollowShoalSettings(t *testing.T) {
	mc, err := memberlistConfig(Config{NodeID: "n1", GossipAddr: "127.0.0.1:7946", Secret: []byte("0123456789abcdef"),
		GossipInterval: 2 * time.Second, SuspectTimeout: 10 * time.Second}, "127.0.0.1:7946")
	if err != nil {
		t.Fatal(err)
	}
	if mc.ProbeInterval != 2*time.Second || mc.ProbeTimeout != 500*time.Millisecond || mc.SuspicionMult != 5 ||
		mc.SuspicionMaxTimeoutMult != 1 || len(mc.SecretKey) != 32 || mc.AdvertiseAddr != "127.0.0.1" || mc.BindPort != 7946 {
		t.Fatalf("memberlist config %+v", mc)
	}
	if _, err := memberlistConfig(Config{GossipAddr: "nonsense", GossipInterval: time.Second, SuspectTimeout: 2 * time.Second}, ""); err == nil {
		t.Fatal("accepted a GOSSIP_ADDR without a port")
	}
}

func TestMetadataFitsMemberlistLimit(t *testing.T) {
	long := strings.Repeat("x", 600)
	m := NodeMeta{ID: strings.Repeat("n", 64), PublicURL: "http://" + long, InternalURL: "http://n:8080", FreeBytes: 1 << 60, Flags: "SRV", Version: long, Incarnation: time.Now().UnixMilli()}
	b := encodeMeta(m, 512)
	if len(b) == 0 || len(b) > 512 {
		t.Fatalf("metadata of %d bytes", len(b))
	}
	if !strings.Contains(string(b), `"iurl":"http://n:8080"`) {
		t.Fatalf("trimmed the internal URL, which peers need: %s", b)
	}
}

func TestDiskChanged(t *testing.T) {
	if diskChanged(100<<30, 100<<30+1<<20) {
		t.Error("1 MiB of 100 GiB is not worth gossiping")
	}
	if !diskChanged(100<<30, 98<<30) {
		t.Error("2 GiB of 100 GiB is")
	}
	if !diskChanged(1<<20, 2<<20) {
		t.Error("a doubling is")
	}
}

func TestSignerAcceptsOnceAndRefusesTheRest(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	a := NewSigner([]byte("secret-one-0123456789"), "a", clock, nil)
	b := NewSigner([]byte("secret-one-0123456789"), "b", clock, knownIDs("a", "x"))
	other := NewSigner([]byte("secret-two-0123456789"), "x", clock, nil)

	req := httptest.NewRequest("POST", "/internal/v1/ping?x=1", nil)
	a.Sign(req, []byte("body"), "b")
	if node, err := b.Verify(req, []byte("body")); err != nil || node != "a" {
		t.Fatalf("valid signature refused: %v", err)
	}
	if _, err := b.Verify(req, []byte("body")); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	req2 := httptest.NewRequest("POST", "/internal/v1/ping?x=1", nil)
	a.Sign(req2, []byte("body"), "b")
	if _, err := b.Verify(req2, []byte("other body")); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("altered body: %v", err)
	}
	req3 := httptest.NewRequest("POST", "/internal/v1/ping?x=2", nil)
	req3.Header = req2.Header.Clone()
	if _, err := b.Verify(req3, []byte("body")); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("altered query: %v", err)
	}
	req4 := httptest.NewRequest("GET", "/internal/v1/ping", nil)
	other.Sign(req4, nil, "b")
	if _, err := b.Verify(req4, nil); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another secret: %v", err)
	}
	if _, err := b.Verify(httptest.NewRequest("GET", "/internal/v1/ping", nil), nil); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("unsigned: %v", err)
	}
	req5 := httptest.NewRequest("GET", "/internal/v1/ping", nil)
	a.Sign(req5, nil, "b")
	now = now.Add(31 * time.Second)
	if _, err := b.Verify(req5, nil); !errors.Is(err, ErrStale) {
		t.Fatalf("stale: %v", err)
	}
}

// A request signed for node a and captured on the way can be delivered to
// node b within the window: b has its own nonce cache, so only the signed
// destination stops it. b refuses it as misdirected; a still takes it.
func TestSignedRequestIsRefusedByAnotherNode(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	secret := []byte("secret-one-0123456789")
	sender := NewSigner(secret, "s", clock, nil)
	served := func(s *Signer) http.Handler {
		return s.Middleware(slog.New(slog.DiscardHandler), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}))
	}
	a, b := served(NewSigner(secret, "a", clock, knownIDs("s"))), served(NewSigner(secret, "b", clock, knownIDs("s")))

	body := []byte(`{"batch":1}`)
	req := httptest.NewRequest("POST", "/internal/v1/replicate", bytes.NewReader(body))
	sender.Sign(req, body, "a")
	captured := req.Header.Clone()

	if _, err := NewSigner(secret, "b", clock, knownIDs("s")).Verify(req, body); !errors.Is(err, ErrMisdirected) {
		t.Fatalf("node b verified a request signed for node a: %v, want ErrMisdirected", err)
	}

	replay := httptest.NewRequest("POST", "/internal/v1/replicate", bytes.NewReader(body))
	replay.Header = captured
	w := httptest.NewRecorder()
	b.ServeHTTP(w, replay)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("node b answered %d to a request signed for node a, want 401", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("refusal has Content-Type %q, want application/problem+json", ct)
	}
	for _, want := range []string{`"status":401`, `signed for node \"a\"`, `node \"b\"`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("refusal does not say %s: %s", want, w.Body.String())
		}
	}

	readdressed := httptest.NewRequest("POST", "/internal/v1/replicate", bytes.NewReader(body))
	readdressed.Header = captured.Clone()
	readdressed.Header.Set(HeaderTo, "b")
	if _, err := NewSigner(secret, "b", clock, knownIDs("s")).Verify(readdressed, body); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a request readdressed to node b after signing: %v, want ErrBadSignature", err)
	}

	w = httptest.NewRecorder()
	a.ServeHTTP(w, req)
	if w.Code != http.StatusNoContent {
		t.Fatalf("node a answered %d to a request signed for it: %s", w.Code, w.Body.String())
	}
}

// During a rolling upgrade an upgraded node takes unsealed answers only
// from a peer whose gossiped metadata says it is of a version that does
// not seal them; a peer gossip has not shown yet must seal.
func TestAnswersMustBeSealedUnlessGossipSaysThePeerIsOlder(t *testing.T) {
	c := &Cluster{members: map[string]*memberInfo{
		"older":    {meta: NodeMeta{ID: "older"}},
		"upgraded": {meta: NodeMeta{ID: "upgraded", SealsAnswers: true}},
	}}
	for peer, want := range map[string]bool{"older": false, "upgraded": true, "unseen": true} {
		if got := c.sealsAnswers(peer); got != want {
			t.Errorf("sealsAnswers(%s) = %v, want %v", peer, got, want)
		}
	}
	// A message of an older process, or of the same one, that says it
	// does not seal (an old message replayed: gossip has no replay
	// protection) does not make its answers go unchecked; a later
	// process that says so (a node taken back to an older version) does.
	c.members["upgraded"].meta.Incarnation = 100
	c.members["upgraded"].sealedSince = 0
	for _, step := range []struct {
		meta NodeMeta
		want bool
	}{
		{NodeMeta{ID: "upgraded", Incarnation: 100, SealsAnswers: true}, true},
		{NodeMeta{ID: "upgraded", Incarnation: 90}, true},
		{NodeMeta{ID: "upgraded", Incarnation: 100}, true},
		{NodeMeta{ID: "upgraded", Incarnation: 200}, false},
	} {
		c.takeMeta(c.members["upgraded"], "upgraded", encodeMeta(step.meta, metaLimit))
		if got := c.sealsAnswers("upgraded"); got != step.want {
			t.Errorf("after metadata %+v: sealsAnswers = %v, want %v", step.meta, got, step.want)
		}
	}
	// Metadata cut down to fit memberlist's limit keeps the promise.
	long := NodeMeta{ID: "n", InternalURL: "http://" + strings.Repeat("h", 400) + ":1", SealsAnswers: true}
	m, err := decodeMeta(encodeMeta(long, 120))
	if err != nil || !m.SealsAnswers {
		t.Fatalf("metadata cut to fit: %+v %v; want it still to say it seals its answers", m, err)
	}
}

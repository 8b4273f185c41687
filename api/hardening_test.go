package api_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-db/shoal/internal/testnode"
)

// randomMethod is a valid HTTP method token of n random letters.
func randomMethod(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + rng.IntN(26))
	}
	return string(b)
}

// Anyone can send any method; /metrics must not grow a series per method
// (the issue saw 300 requests with 20 KB methods grow it to 108 MB).
func TestMetricsLabelsTakeOnlyKnownMethods(t *testing.T) {
	n := testnode.StartNew(t)
	anon := n.Client("")
	rng := rand.New(rand.NewPCG(12, 8))
	hostile := func() {
		for i := 0; i < 20; i++ {
			m := randomMethod(rng, 2048)
			for _, path := range []string{"/healthz", docsPath("x", "c"), "/no/such/route", "/internal/v1/ping"} {
				anon.Do(m, path, nil)
			}
		}
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "get"} {
			anon.Do(m, "/healthz", nil)
		}
	}
	scrape := func() string { return string(anon.Do("GET", "/metrics", nil).Body) }
	scrape()
	hostile()
	first := scrape()
	hostile()
	second := scrape()

	known := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true, "other": true}
	for _, m := range regexp.MustCompile(`method="([^"]*)"`).FindAllStringSubmatch(second, -1) {
		if !known[m[1]] {
			t.Fatalf("/metrics has a method label %.40q... from a client; only %v may appear", m[1], known)
		}
	}
	// Only series labelled by method count: others appear on their own as
	// the node goes on (a store operation's first histogram, say).
	series := func(text string) int {
		return len(regexp.MustCompile(`(?m)^shoal_\S*\{[^}]*method="`).FindAllString(text, -1))
	}
	if a, b := series(first), series(second); a == 0 || a != b {
		t.Fatalf("/metrics grew from %d to %d shoal_ series labelled by method (%d to %d bytes) after more requests with new methods", a, b, len(first), len(second))
	}
}

// If-Match compares entity tags strongly (RFC 9110 13.1.1): a weak tag never
// matches, so W/"1" is a failed precondition even when the document is at
// version 1, and nothing is written.
func TestIfMatchRefusesWeakETags(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "ivan"))
	path := docsPath("ivan", "notes") + "/w"
	expectStatus(t, c.Do("PUT", path, `{"a":1}`), 201, "create")
	for _, tc := range []struct{ method, body, etag string }{
		{"PUT", `{"a":2}`, `W/"1"`},
		{"PATCH", `{"a":3}`, `W/"1"`},
		{"DELETE", "", `W/"1"`},
		{"PUT", `{"a":4}`, `W/"*"`},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		r := c.Do(tc.method, path, body, "If-Match", tc.etag)
		expectProblem(t, r, 412, "urn:shoal:problem:precondition-failed", tc.method+" If-Match "+tc.etag)
		if d := r.JSON(t)["detail"].(string); !strings.Contains(d, "weak") {
			t.Errorf("%s If-Match %s: detail %q does not say the tag is weak", tc.method, tc.etag, d)
		}
	}
	// "W/" is case-sensitive: w/"1" is no entity tag at all.
	expectProblem(t, c.Do("PUT", path, `{"a":4}`, "If-Match", `w/"1"`), 400, "urn:shoal:problem:invalid-header", `If-Match w/"1"`)
	r := c.Do("GET", path, nil)
	expectStatus(t, r, 200, "read after refused writes")
	if r.Header.Get("ETag") != `"1"` || r.JSON(t)["a"] != float64(1) {
		t.Fatalf("a write with a weak If-Match changed the document: %s %s", r.Header.Get("ETag"), r.Body)
	}
	// The strong tag as sent, and the bare version, still match.
	expectStatus(t, c.Do("PUT", path, `{"a":5}`, "If-Match", `"1"`), 200, `If-Match "1"`)
	expectStatus(t, c.Do("PUT", path, `{"a":6}`, "If-Match", `2`), 200, `If-Match 2`)
}

// Tokens carry the cluster's audience, are issued in the past (give or take
// a minute of clock skew) and live at most TOKEN_MAX_TTL.
func TestTokenChecksIssuedAtLifetimeAndAudience(t *testing.T) {
	n := testnode.StartNew(t)
	path := docsPath("carol", "c") + "/x"
	sign := func(claims jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testnode.Secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	const aud = "shoal" // TOKEN_AUDIENCE's default
	refused := []struct {
		name   string
		claims jwt.MapClaims
		detail string // the detail says this
	}{
		{"iat in the future", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": at(10 * time.Minute), "exp": at(time.Hour)}, "future"},
		{"iat not a number", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": "yesterday", "exp": at(time.Hour)}, "iat"},
		{"no aud", jwt.MapClaims{"sub": "carol", "iat": at(0), "exp": at(time.Hour)}, "TOKEN_AUDIENCE"},
		{"other aud", jwt.MapClaims{"sub": "carol", "aud": "billing", "iat": at(0), "exp": at(time.Hour)}, "TOKEN_AUDIENCE"},
		{"other aud list", jwt.MapClaims{"sub": "carol", "aud": []string{"billing", "crm"}, "iat": at(0), "exp": at(time.Hour)}, "TOKEN_AUDIENCE"},
		{"lifetime over the maximum", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": at(0), "exp": at(48 * time.Hour)}, "TOKEN_MAX_TTL"},
		{"issued long ago for long", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": at(-30 * 24 * time.Hour), "exp": at(time.Hour)}, "TOKEN_MAX_TTL"},
		{"no iat, exp far away", jwt.MapClaims{"sub": "carol", "aud": aud, "exp": at(48 * time.Hour)}, "TOKEN_MAX_TTL"},
		{"no exp", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": at(0)}, "exp"},
	}
	for _, tc := range refused {
		r := n.Client(sign(tc.claims)).Do("GET", path, nil)
		expectProblem(t, r, 401, "urn:shoal:problem:unauthorized", tc.name)
		if d := r.JSON(t)["detail"].(string); !strings.Contains(d, tc.detail) {
			t.Errorf("%s: detail %q does not mention %s", tc.name, d, tc.detail)
		}
	}
	accepted := []struct {
		name   string
		claims jwt.MapClaims
	}{
		{"iat within the clock skew", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": at(30 * time.Second), "exp": at(time.Hour)}},
		{"aud list with ours", jwt.MapClaims{"sub": "carol", "aud": []string{"billing", aud}, "iat": at(0), "exp": at(time.Hour)}},
		{"no iat, exp within the maximum", jwt.MapClaims{"sub": "carol", "aud": aud, "exp": at(time.Hour)}},
		{"exactly the maximum", jwt.MapClaims{"sub": "carol", "aud": aud, "iat": at(0), "exp": at(24 * time.Hour)}},
	}
	for _, tc := range accepted {
		expectProblem(t, n.Client(sign(tc.claims)).Do("GET", path, nil), 404, "urn:shoal:problem:not-found", tc.name)
	}
}

// A node whose partitions' masters cannot be reached answers 503 (or 504
// when the master may have got the write) naming the nodes it tried and
// what to do, never their internal URLs or the network error: those go to
// its log. Peers: this node, "ghost" (nothing listens at its URL) and
// "mute" (accepts connections and closes them unanswered); all three are
// voters, so this node alone never holds a lease.
func TestUnavailableAnswersNameNodesNotURLs(t *testing.T) {
	ports := testnode.FreePorts(t, 6)
	mute, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[4]))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { mute.Close(); wg.Wait() })
	ghostURL, muteURL := fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[4])
	peers := fmt.Sprintf(`{"peers":[
		{"id":"test-node","url":"http://127.0.0.1:%d","gossip":"127.0.0.1:%d","voter":true},
		{"id":"ghost","url":"http://%s","gossip":"127.0.0.1:%d","voter":true},
		{"id":"mute","url":"http://%s","gossip":"127.0.0.1:%d","voter":true}]}`,
		ports[0], ports[1], ghostURL, ports[3], muteURL, ports[5])
	dir := t.TempDir()
	peersFile := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(peersFile, []byte(peers), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testnode.Config(filepath.Join(dir, "data"))
	cfg.HTTPAddr, cfg.GossipAddr = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	cfg.PeersEndpoint, cfg.ClusterSecret = peersFile, "test-cluster-secret-0123"
	cfg.PartitionCount = 16
	n := testnode.Start(t, cfg)
	admin := n.Client(testnode.AdminToken(t))

	// A user whose partition each peer should master.
	userOf := map[string]string{}
	for i := 0; len(userOf) < 2 && i < 1000; i++ {
		u := fmt.Sprintf("u%d", i)
		r := admin.Do("GET", "/v1/users/"+u+"/placement", nil)
		expectStatus(t, r, 200, "placement")
		if m, _ := r.JSON(t)["preferred_master"].(string); m != "test-node" && userOf[m] == "" {
			userOf[m] = u
		}
	}
	if userOf["ghost"] == "" || userOf["mute"] == "" {
		t.Fatalf("no users for both peers among the first 1000: %v", userOf)
	}
	check := func(r *testnode.Response, status int, typ, what, peer string) {
		t.Helper()
		expectProblem(t, r, status, typ, what)
		detail := r.JSON(t)["detail"].(string)
		for _, leak := range []string{ghostURL, muteURL, "127.0.0.1", "dial", "refused", "EOF", "http://"} {
			if strings.Contains(string(r.Body), leak) {
				t.Errorf("%s: the answer contains %q: %s", what, leak, r.Body)
			}
		}
		if !strings.Contains(detail, peer) || !strings.Contains(detail, "/v1/cluster") {
			t.Errorf("%s: detail %q does not name %s and /v1/cluster", what, detail, peer)
		}
	}
	ghost := docsPath(userOf["ghost"], "c") + "/d"
	check(admin.Do("PUT", ghost, `{"a":1}`), 503, "urn:shoal:problem:unavailable", "write to a partition of ghost", "ghost")
	check(admin.Do("GET", ghost, nil), 503, "urn:shoal:problem:unavailable", "read from a partition of ghost", "ghost")
	muted := docsPath(userOf["mute"], "c") + "/d"
	check(admin.Do("PUT", muted, `{"a":1}`), 504, "urn:shoal:problem:timeout", "write to a partition of mute", "mute")
	check(admin.Do("GET", muted, nil), 503, "urn:shoal:problem:unavailable", "read from a partition of mute", "mute")
}

// /readyz answers anyone: when the store fails it says so without the
// driver's error, which names the store's address.
func TestReadyzHidesTheStoreError(t *testing.T) {
	n := testnode.StartNew(t)
	if err := n.Store().Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := n.Client("").Do("GET", "/readyz", nil)
	expectProblem(t, r, 503, "urn:shoal:problem:unavailable", "readyz with the store closed")
	if d := r.JSON(t)["detail"].(string); d != "the node's store does not answer; its log says why" {
		t.Fatalf("readyz detail %q: want only that the store does not answer, not why", d)
	}
}

// A 404 or 405 answer names the route asked for, but only so much of it:
// anyone can send a 64 KB path or method and must not get it echoed back.
func TestRouteErrorsDoNotEchoLongInput(t *testing.T) {
	n := testnode.StartNew(t)
	anon := n.Client("")
	long := strings.Repeat("x", 16<<10)
	for _, c := range []struct{ method, path string }{
		{"GET", "/" + long},
		{strings.ToUpper(long), "/healthz"},
	} {
		resp := anon.Do(c.method, c.path, nil)
		if resp.Status != 404 && resp.Status != 405 {
			t.Fatalf("%.20s %.20s: status %d, want 404 or 405", c.method, c.path, resp.Status)
		}
		if len(resp.Body) > 1024 {
			t.Fatalf("%.20s %.20s: a %d-byte answer echoes the request: %.200s", c.method, c.path, len(resp.Body), resp.Body)
		}
	}
}

// A write's X-Write-Timeout holds a handler, its connection and its
// goroutine for as long as it says: it is bounded like every other wait.
func TestWriteTimeoutIsBounded(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.AdminToken(t))
	for _, v := range []string{"1000000h", "61s"} {
		r := c.Do("PUT", docsPath("u", "c")+"/x", `{}`, "X-Write-Concern", "majority", "X-Write-Timeout", v)
		if r.Status != 400 || !strings.Contains(string(r.Body), "60s") {
			t.Fatalf("X-Write-Timeout %s: %d %s, want 400 naming the 60s maximum", v, r.Status, r.Body)
		}
	}
	if r := c.Do("PUT", docsPath("u", "c")+"/x", `{}`, "X-Write-Concern", "majority", "X-Write-Timeout", "60s"); r.Status >= 300 {
		t.Fatalf("X-Write-Timeout 60s: %d %s", r.Status, r.Body)
	}
}

package api_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
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
	series := func(text string) int { return strings.Count(text, "\nshoal_") }
	if a, b := series(first), series(second); a != b {
		t.Fatalf("/metrics grew from %d to %d shoal_ series (%d to %d bytes) after more requests with new methods", a, b, len(first), len(second))
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

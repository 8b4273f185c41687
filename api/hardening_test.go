package api_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

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

package ui_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/internal/ui"
)

// TestDashboardFilesNeedNoToken asks a real node for the dashboard's files
// without a token, and for the routes the page reads with and without
// one.
func TestDashboardFilesNeedNoToken(t *testing.T) {
	n := testnode.StartNew(t)
	anon := n.Client("")
	noRedirect := *anon.HTTP
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	resp, err := noRedirect.Get(n.URL() + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d, Location %q; want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}

	wantType := map[string]string{".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
	files := ui.Files()
	for _, want := range []string{"index.html", "app.js", "app.css"} {
		if !slices.Contains(files, want) {
			t.Errorf("the dashboard has no %s (it has %v)", want, files)
		}
	}
	index := anon.Do("GET", "/ui/", nil)
	if index.Status != 200 || index.Header.Get("Content-Type") != wantType[".html"] {
		t.Fatalf("GET /ui/: %d %q, want 200 %q", index.Status, index.Header.Get("Content-Type"), wantType[".html"])
	}
	if csp := index.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("GET /ui/: Content-Security-Policy %q does not keep the page to its own origin", csp)
	}
	for _, name := range files {
		r := anon.Do("GET", "/ui/"+name, nil)
		ext := name[strings.LastIndex(name, "."):]
		if r.Status != 200 || r.Header.Get("Content-Type") != wantType[ext] {
			t.Errorf("GET /ui/%s: %d %q, want 200 %q", name, r.Status, r.Header.Get("Content-Type"), wantType[ext])
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET /ui/%s: no X-Content-Type-Options: nosniff", name)
		}
		// Everything is embedded: nothing is loaded from another origin.
		if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).Find(r.Body); m != nil {
			t.Errorf("/ui/%s loads something from elsewhere: %s", name, m)
		}
		if etag := r.Header.Get("ETag"); etag == "" {
			t.Errorf("GET /ui/%s: no ETag", name)
		} else if again := anon.Do("GET", "/ui/"+name, nil, "If-None-Match", etag); again.Status != http.StatusNotModified {
			t.Errorf("GET /ui/%s with If-None-Match %s: %d, want 304", name, etag, again.Status)
		}
	}
	// Every file the page names is served.
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllSubmatch(index.Body, -1) {
		if r := anon.Do("GET", "/ui/"+string(m[1]), nil); r.Status != 200 {
			t.Errorf("index.html names %s, which answers %d", m[1], r.Status)
		}
	}
	if r := anon.Do("HEAD", "/ui/app.js", nil); r.Status != 200 {
		t.Errorf("HEAD /ui/app.js: %d, want 200", r.Status)
	}
	if r := anon.Do("GET", "/ui/nothing.js", nil); r.Status != 404 || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET /ui/nothing.js: %d %q, want a 404 problem", r.Status, r.Header.Get("Content-Type"))
	}

	// The data the page shows needs an admin token.
	user := n.Client(testnode.Token(t, "alice"))
	admin := n.Client(testnode.AdminToken(t))
	for _, path := range []string{"/v1/cluster?all=1&partitions=1", "/v1/admin/rollback?limit=100", "/v1/users/bob/collections"} {
		if r := anon.Do("GET", path, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", path, r.Status)
		}
		if r := user.Do("GET", path, nil); r.Status != http.StatusForbidden {
			t.Errorf("GET %s with alice's token: %d, want 403", path, r.Status)
		}
		if r := admin.Do("GET", path, nil); r.Status != http.StatusOK {
			t.Errorf("GET %s with an admin token: %d %s, want 200", path, r.Status, r.Body)
		}
	}
}

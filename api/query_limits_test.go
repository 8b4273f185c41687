package api_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/internal/testnode"
)

// The example: a 5-clause $or of a regex that compiles to a big
// program, over one 100 KB document, took 11.7 s of CPU. It is refused
// by the query budget before any of the regexes runs.
func TestQueryOverBudgetIsRefused(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "rita"))
	base := docsPath("rita", "big")
	expectStatus(t, c.Do("PUT", base+"/one", `{"s":"`+strings.Repeat("a", 100<<10)+`"}`), 201, "seed")

	clause := `{"s":{"$regex":"(?:a*){1000}b0"}}`
	filter := `{"$or":[` + strings.Repeat(clause+",", 4) + clause + `]}`
	r := c.Do("GET", base+"?filter="+url.QueryEscape(filter), nil)
	expectProblem(t, r, 400, "urn:shoal:problem:query-too-expensive", "5 catastrophic regexes")
	if d := r.JSON(t)["detail"].(string); !strings.Contains(d, "QUERY_BUDGET") || !strings.Contains(d, "filter") {
		t.Fatalf("the detail should name the setting and say what to change: %q", d)
	}
	// An ordinary regex over the same document is within the budget.
	r = c.Do("GET", base+"?filter="+url.QueryEscape(`{"s":{"$regex":"^a{3}"}}`), nil)
	expectStatus(t, r, 200, "an ordinary regex")
	if !strings.Contains(string(r.Body), `"_id":"one"`) {
		t.Fatalf("the ordinary regex did not match: %.200s", r.Body)
	}
}

// queryPage reads one page of a query.
func queryPage(t *testing.T, c *testnode.Client, path string) (docs []map[string]any, next string, size int) {
	t.Helper()
	r := c.Do("GET", path, nil)
	expectStatus(t, r, 200, "page")
	var page struct {
		Documents []map[string]any `json:"documents"`
		Next      string           `json:"next"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatalf("page is not JSON: %v: %.200s", err, r.Body)
	}
	return page.Documents, page.Next, len(r.Body)
}

// A collection larger than a page's byte bound comes in several pages,
// each within the bound (or of a single document), and following the
// cursors returns every document exactly once.
func TestQueryPageBoundedByBytes(t *testing.T) {
	// A small MAX_PAGE_BYTES, so that a few small documents pass it.
	const maxPage = 64 << 10
	cfg := testnode.Config(t.TempDir())
	cfg.MaxPageBytes = maxPage
	n := testnode.Start(t, cfg)
	c := n.Client(testnode.Token(t, "paula"))
	base := docsPath("paula", "blobs")
	const total = 20
	for i := 0; i < total; i++ {
		body := fmt.Sprintf(`{"n":%d,"s":"%s"}`, total-i, strings.Repeat("x", 5<<10+i*100))
		expectStatus(t, c.Do("PUT", fmt.Sprintf("%s/d%02d", base, i), body), 201, "seed")
	}
	for _, sort := range []string{"", "n", "-s"} {
		seen := map[string]int{}
		after, pages := "", 0
		for {
			q := url.Values{"limit": {"1000"}, "sort": {sort}}
			if after != "" {
				q.Set("after", after)
			}
			docs, next, size := queryPage(t, c, base+"?"+q.Encode())
			pages++
			if size > maxPage && len(docs) > 1 {
				t.Fatalf("sort %q: page %d is %d bytes with %d documents, over the %d-byte bound", sort, pages, size, len(docs), maxPage)
			}
			if len(docs) == 0 {
				t.Fatalf("sort %q: page %d is empty", sort, pages)
			}
			for _, d := range docs {
				seen[d["_id"].(string)]++
			}
			if next == "" {
				break
			}
			after = next
		}
		if pages < 2 {
			t.Fatalf("sort %q: %d documents of 5 KB came in %d page", sort, total, pages)
		}
		if len(seen) != total {
			t.Fatalf("sort %q: saw %d distinct documents, want %d", sort, len(seen), total)
		}
		for id, k := range seen {
			if k != 1 {
				t.Fatalf("sort %q: %s seen %d times", sort, id, k)
			}
		}
	}
}

// A query string that does not parse is a 400, on every /v1 route; Go's
// r.URL.Query() would silently drop the malformed part and answer as if
// it were absent.
func TestMalformedQueryStringIsRefused(t *testing.T) {
	n := testnode.StartNew(t)
	user := n.Client(testnode.Token(t, "quinn"))
	admin := n.Client(testnode.AdminToken(t))
	base := docsPath("quinn", "q")
	expectStatus(t, user.Do("PUT", base+"/a", `{"a":1}`), 201, "seed")
	expectStatus(t, user.Do("PUT", base+"/b", `{"a":2}`), 201, "seed")

	for _, tc := range []struct {
		c    *testnode.Client
		path string
	}{
		{user, base + "?filter=" + url.QueryEscape(`{"a":1}`) + "%zz"},
		{user, base + "?limit=5;x=y"},
		{user, base + "?filter=%7B%22a%22:1%7D&sort=a%"},
		{user, "/v1/users/quinn/collections?x=%zz"},
		{user, base + "/a?%zz"},
		{admin, "/v1/admin/rollback?limit=5;x=y"},
		{admin, "/v1/cluster?all=1%zz"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			r := tc.c.Do("GET", tc.path, nil)
			expectProblem(t, r, 400, "urn:shoal:problem:invalid-query", tc.path)
			if d := r.JSON(t)["detail"].(string); !strings.Contains(d, "query string") {
				t.Fatalf("%s: the detail should say the query string is malformed: %q", tc.path, d)
			}
		})
	}
	// Well-formed query strings still work.
	docs, _, _ := queryPage(t, user, base+"?filter="+url.QueryEscape(`{"a":1}`)+"&limit=5")
	if len(docs) != 1 {
		t.Fatalf("the filter matched %d documents, want 1", len(docs))
	}
}

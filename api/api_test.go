package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-db/shoal/internal/testnode"
)

func docsPath(user, coll string) string {
	return "/v1/users/" + user + "/collections/" + coll + "/documents"
}

func expectStatus(t *testing.T, r *testnode.Response, want int, what string) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.Status, want, r.Body)
	}
}

// expectProblem checks an error answer is RFC 9457 problem JSON of one type.
func expectProblem(t *testing.T, r *testnode.Response, status int, typ, what string) {
	t.Helper()
	expectStatus(t, r, status, what)
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	p := r.JSON(t)
	if p["type"] != typ {
		t.Fatalf("%s: problem type %v, want %s (%s)", what, p["type"], typ, r.Body)
	}
	if p["status"] != float64(status) || p["title"] == "" || p["detail"] == "" {
		t.Fatalf("%s: incomplete problem %s", what, r.Body)
	}
}

func TestDocumentLifecycle(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "alice"))
	base := docsPath("alice", "notes")

	// POST with a generated id.
	r := c.Do("POST", base, `{"title":"first","n":1}`)
	expectStatus(t, r, 201, "POST")
	d := r.JSON(t)
	id, _ := d["_id"].(string)
	if id == "" || d["_version"] != float64(1) || d["title"] != "first" {
		t.Fatalf("created document %s", r.Body)
	}
	if loc := r.Header.Get("Location"); loc != base+"/"+id {
		t.Fatalf("Location %q, want %q", loc, base+"/"+id)
	}
	if r.Header.Get("ETag") != `"1"` || r.Header.Get("X-Served-By") != "test-node" || r.Header.Get("X-Consistency-Token") == "" {
		t.Fatalf("headers %v", r.Header)
	}
	// Generated ids grow with creation time.
	r2 := c.Do("POST", base, `{"title":"second"}`)
	expectStatus(t, r2, 201, "POST second")
	if id2 := r2.JSON(t)["_id"].(string); id2 <= id {
		t.Fatalf("generated ids not ordered by creation: %q then %q", id, id2)
	}

	// GET.
	r = c.Do("GET", base+"/"+id, nil)
	expectStatus(t, r, 200, "GET")
	if r.Header.Get("ETag") != `"1"` || r.JSON(t)["title"] != "first" {
		t.Fatalf("read %s %v", r.Body, r.Header)
	}
	expectProblem(t, c.Do("GET", base+"/nope", nil), 404, "urn:shoal:problem:not-found", "GET missing")

	// POST with an explicit id, then again: 409.
	expectStatus(t, c.Do("POST", base, `{"_id":"fixed","a":1}`), 201, "POST with _id")
	expectProblem(t, c.Do("POST", base, `{"_id":"fixed","a":2}`), 409, "urn:shoal:problem:already-exists", "POST existing")

	// PUT creates then replaces.
	r = c.Do("PUT", base+"/p1", `{"a":1,"keep":true}`)
	expectStatus(t, r, 201, "PUT create")
	if r.Header.Get("Location") == "" {
		t.Fatal("PUT create without Location")
	}
	r = c.Do("PUT", base+"/p1", `{"a":2}`)
	expectStatus(t, r, 200, "PUT replace")
	if d := r.JSON(t); d["_version"] != float64(2) || d["keep"] != nil || d["a"] != float64(2) {
		t.Fatalf("replaced document %s", r.Body)
	}
	expectProblem(t, c.Do("PUT", base+"/p1", `{"a":3}`, "If-Match", `"1"`), 412, "urn:shoal:problem:precondition-failed", "PUT stale If-Match")
	expectStatus(t, c.Do("PUT", base+"/p1", `{"a":3}`, "If-Match", `"2"`), 200, "PUT matching If-Match")
	expectProblem(t, c.Do("PUT", base+"/p-new", `{"a":3}`, "If-Match", `"1"`), 412, "urn:shoal:problem:precondition-failed", "PUT If-Match on missing")
	expectProblem(t, c.Do("PUT", base+"/p1", `{"_id":"other"}`), 400, "urn:shoal:problem:invalid-document", "PUT with another _id")

	// PATCH merges (RFC 7396).
	expectStatus(t, c.Do("PUT", base+"/m", `{"a":{"b":1,"c":2},"d":[1,2],"e":"x"}`), 201, "PUT for patch")
	r = c.Do("PATCH", base+"/m", `{"a":{"b":null,"z":9},"d":[3],"e":null}`, "If-Match", "1")
	expectStatus(t, r, 200, "PATCH")
	var merged map[string]any
	json.Unmarshal(r.Body, &merged)
	want := `{"_id":"m","_version":2,"a":{"c":2,"z":9},"d":[3]}`
	if got, _ := json.Marshal(merged); string(got) != want {
		t.Fatalf("PATCH result %s, want %s", got, want)
	}
	expectProblem(t, c.Do("PATCH", base+"/m", `{"a":1}`, "If-Match", "1"), 412, "urn:shoal:problem:precondition-failed", "PATCH stale")
	expectProblem(t, c.Do("PATCH", base+"/missing", `{"a":1}`), 404, "urn:shoal:problem:not-found", "PATCH missing")

	// DELETE.
	expectProblem(t, c.Do("DELETE", base+"/m", nil, "If-Match", "1"), 412, "urn:shoal:problem:precondition-failed", "DELETE stale")
	r = c.Do("DELETE", base+"/m", nil, "If-Match", "2")
	expectStatus(t, r, 204, "DELETE")
	expectProblem(t, c.Do("DELETE", base+"/m", nil), 404, "urn:shoal:problem:not-found", "DELETE again")
	expectProblem(t, c.Do("GET", base+"/m", nil), 404, "urn:shoal:problem:not-found", "GET deleted")
	// A deleted id can be created again; its version continues, so an old
	// If-Match can never match the new document.
	r = c.Do("POST", base, `{"_id":"m","again":true}`)
	expectStatus(t, r, 201, "POST over tombstone")
	if v := r.JSON(t)["_version"]; v != float64(4) {
		t.Fatalf("re-created document version %v, want 4 (after 2 versions and a delete)", v)
	}
}

func TestValidationAndLimits(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.AdminToken(t))
	base := docsPath("bob", "items")
	bad := []struct {
		name, method, path, body, typ string
	}{
		{"user name", "GET", docsPath("-bob", "items") + "/x", "", "urn:shoal:problem:invalid-name"},
		{"user too long", "GET", docsPath(strings.Repeat("u", 129), "items") + "/x", "", "urn:shoal:problem:invalid-name"},
		{"collection name", "GET", docsPath("bob", "9items") + "/x", "", "urn:shoal:problem:invalid-name"},
		{"document id", "GET", base + "/a%20b", "", "urn:shoal:problem:invalid-name"},
		{"not an object", "POST", base, `[1,2]`, "urn:shoal:problem:invalid-document"},
		{"a string", "POST", base, `"x"`, "urn:shoal:problem:invalid-document"},
		{"malformed", "POST", base, `{"a":`, "urn:shoal:problem:invalid-document"},
		{"trailing data", "POST", base, `{"a":1} {}`, "urn:shoal:problem:invalid-document"},
		{"dollar key", "POST", base, `{"$set":{"a":1}}`, "urn:shoal:problem:invalid-document"},
		{"dotted key", "POST", base, `{"a.b":1}`, "urn:shoal:problem:invalid-document"},
		{"nested dollar key", "POST", base, `{"a":{"$where":"1"}}`, "urn:shoal:problem:invalid-document"},
		{"NUL in key", "POST", base, `{"a\u0000b":1}`, "urn:shoal:problem:invalid-document"},
		{"reserved key", "POST", base, `{"_owner":"eve"}`, "urn:shoal:problem:invalid-document"},
		{"bad _id", "POST", base, `{"_id":"a b"}`, "urn:shoal:problem:invalid-document"},
		{"too deep", "POST", base, strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33), "urn:shoal:problem:invalid-document"},
		{"bad If-Match", "PUT", base + "/x", `{}`, "urn:shoal:problem:invalid-header"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			var body any
			if b.body != "" {
				body = b.body
			}
			headers := []string{}
			if b.name == "bad If-Match" {
				headers = []string{"If-Match", "yesterday"}
			}
			expectProblem(t, c.Do(b.method, b.path, body, headers...), 400, b.typ, b.name)
		})
	}
	// 32 levels are fine.
	deep := strings.Repeat(`{"a":`, 31) + "1" + strings.Repeat("}", 31)
	expectStatus(t, c.Do("POST", base, deep), 201, "32 levels")

	// Over MAX_BODY_BYTES: 413, whether or not the length was announced.
	big := `{"s":"` + strings.Repeat("x", int(n.Config.MaxBodyBytes)) + `"}`
	expectProblem(t, c.Do("POST", base, big), 413, "urn:shoal:problem:body-too-large", "oversized body")
	expectProblem(t, c.Do("PUT", base+"/big", big), 413, "urn:shoal:problem:body-too-large", "oversized PUT")

	// Nothing invalid was stored.
	r := c.Do("GET", "/v1/users/bob/collections", nil)
	expectStatus(t, r, 200, "collections")
	if !strings.Contains(string(r.Body), `"count":1`) {
		t.Fatalf("after refused writes the user holds %s, want only the 32-level document", r.Body)
	}
	expectStatus(t, c.Do("PUT", base+"/wc", `{}`, "X-Write-Concern", "majority"), 201, "majority on a cluster of one")
	expectProblem(t, c.Do("PUT", base+"/wc", `{}`, "X-Write-Timeout", "soon"), 400, "urn:shoal:problem:invalid-header", "bad write timeout")
	expectProblem(t, c.Do("PUT", base+"/wc", `{}`, "X-Write-Concern", "most"), 400, "urn:shoal:problem:invalid-header", "unknown write concern")
	expectStatus(t, c.Do("PUT", base+"/wc", `{}`, "X-Write-Concern", "1"), 200, "write concern 1")
	expectProblem(t, c.Do("GET", "/v2/nothing", nil), 404, "urn:shoal:problem:route-not-found", "unknown route")
	expectProblem(t, c.Do("POST", base+"/x", `{}`), 405, "urn:shoal:problem:method-not-allowed", "POST on a document")
}

func TestAuth(t *testing.T) {
	n := testnode.StartNew(t)
	path := docsPath("carol", "c") + "/x"
	anon := n.Client("")
	expectProblem(t, anon.Do("GET", path, nil), 401, "urn:shoal:problem:unauthorized", "no token")
	if h := anon.Do("GET", path, nil).Header.Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer") {
		t.Fatalf("WWW-Authenticate %q", h)
	}
	sign := func(secret string, claims jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	hour := time.Now().Add(time.Hour).Unix()
	cases := []struct{ name, token string }{
		{"other secret", sign("another-secret-0123456789", jwt.MapClaims{"sub": "carol", "exp": hour})},
		{"expired", sign(testnode.Secret, jwt.MapClaims{"sub": "carol", "exp": time.Now().Add(-time.Minute).Unix()})},
		{"no exp", sign(testnode.Secret, jwt.MapClaims{"sub": "carol"})},
		{"no subject", sign(testnode.Secret, jwt.MapClaims{"exp": hour})},
		{"garbage", "not.a.token"},
		{"alg none", "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJjYXJvbCIsInJvbGUiOiJhZG1pbiJ9."},
	}
	for _, tc := range cases {
		expectProblem(t, n.Client(tc.token).Do("GET", path, nil), 401, "urn:shoal:problem:unauthorized", tc.name)
	}
	carol := n.Client(testnode.Token(t, "carol"))
	expectStatus(t, carol.Do("PUT", path, `{"a":1}`), 201, "own data")
	expectProblem(t, carol.Do("GET", docsPath("dave", "c")+"/x", nil), 403, "urn:shoal:problem:forbidden", "other user's document")
	expectProblem(t, carol.Do("DELETE", "/v1/users/dave", nil), 403, "urn:shoal:problem:forbidden", "erase another user")
	admin := n.Client(testnode.AdminToken(t))
	expectStatus(t, admin.Do("GET", path, nil), 200, "admin reads any user")
	n.WaitReady()
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		expectStatus(t, anon.Do("GET", p, nil), 200, p+" without token")
	}
}

func TestCollectionsEraseAndMetrics(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "erin"))
	for i := 0; i < 3; i++ {
		expectStatus(t, c.Do("POST", docsPath("erin", "a"), `{"i":1}`), 201, "POST a")
	}
	expectStatus(t, c.Do("POST", docsPath("erin", "b"), `{"i":1}`), 201, "POST b")
	expectStatus(t, c.Do("PUT", docsPath("erin", "b")+"/gone", `{}`), 201, "PUT b")
	expectStatus(t, c.Do("DELETE", docsPath("erin", "b")+"/gone", nil), 204, "DELETE b")
	// Another user in any partition is untouched by erin's erase.
	other := n.Client(testnode.Token(t, "frank"))
	expectStatus(t, other.Do("PUT", docsPath("frank", "a")+"/keep", `{}`), 201, "frank's document")

	r := c.Do("GET", "/v1/users/erin/collections", nil)
	expectStatus(t, r, 200, "collections")
	if got := strings.TrimSpace(string(r.Body)); got != `{"collections":[{"name":"a","count":3},{"name":"b","count":1}]}` {
		t.Fatalf("collections %s", got)
	}
	r = c.Do("DELETE", "/v1/users/erin", nil)
	expectStatus(t, r, 200, "erase")
	if r.JSON(t)["deleted"] != float64(4) {
		t.Fatalf("erase answered %s, want 4 deleted", r.Body)
	}
	r = c.Do("GET", "/v1/users/erin/collections", nil)
	if got := strings.TrimSpace(string(r.Body)); got != `{"collections":[]}` {
		t.Fatalf("after erase: %s", got)
	}
	expectStatus(t, other.Do("GET", docsPath("frank", "a")+"/keep", nil), 200, "frank's document after erin's erase")

	m := string(n.Client("").Do("GET", "/metrics", nil).Body)
	for _, want := range []string{
		`shoal_http_requests_total{code="201",method="POST",route="/v1/users/{user}/collections/{coll}/documents"} 4`,
		`shoal_commit_batch_changes_count`,
		`shoal_store_operation_duration_seconds_count{op="commit"}`,
		`shoal_http_request_duration_seconds_bucket`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Every new document above was looked up and not found; an answer
	// of "no such document" is not a failed operation.
	if strings.Contains(m, `shoal_store_operation_errors_total{op="get"}`) {
		t.Errorf("a lookup that found nothing counted as a failed store operation:\n%s", grepLines(m, "shoal_store_operation_errors_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestQueryPagesEveryDocumentExactlyOnce(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "gina"))
	base := docsPath("gina", "things")
	values := []string{`null`, `1`, `2.5`, `-3`, `"b"`, `"a"`, `true`, `false`, `{"x":1}`, `[1,2]`}
	const total = 120
	for i := 0; i < total; i++ {
		body := fmt.Sprintf(`{"_id":"d%03d","i":%d,"grp":%d`, i, i, i%4)
		if i%11 != 0 { // some documents lack the sort field
			body += `,"v":` + values[i%len(values)]
		}
		body += `,"tags":["t` + fmt.Sprint(i%3) + `"],"items":[{"sku":"s` + fmt.Sprint(i%5) + `","qty":` + fmt.Sprint(i%7) + `}]}`
		expectStatus(t, c.Do("POST", base, body), 201, "seed")
	}
	// The paging algorithm is tested exhaustively in api/query; here every
	// kind of sort goes once through the real node, store and cursor.
	for _, pc := range []struct {
		sort  string
		limit int
	}{{"v", 7}, {"-v", 13}, {"grp,-v", 50}, {"-grp,v,i", 100}, {"tags", 1000}, {"", 40}} {
		sort, limit := pc.sort, pc.limit
		{
			seen := map[string]int{}
			after, pages := "", 0
			for {
				q := url.Values{"sort": {sort}, "limit": {fmt.Sprint(limit)}}
				if after != "" {
					q.Set("after", after)
				}
				r := c.Do("GET", base+"?"+q.Encode(), nil)
				expectStatus(t, r, 200, "page")
				var page struct {
					Documents []map[string]any `json:"documents"`
					Next      string           `json:"next"`
				}
				json.Unmarshal(r.Body, &page)
				if len(page.Documents) > limit {
					t.Fatalf("page of %d documents with limit %d", len(page.Documents), limit)
				}
				for _, d := range page.Documents {
					seen[d["_id"].(string)]++
				}
				pages++
				if page.Next == "" {
					break
				}
				after = page.Next
			}
			if len(seen) != total {
				t.Fatalf("sort %q limit %d: saw %d distinct documents, want %d", sort, limit, len(seen), total)
			}
			for id, k := range seen {
				if k != 1 {
					t.Fatalf("sort %q limit %d: %s seen %d times", sort, limit, id, k)
				}
			}
		}
	}

	count := func(filter string) int {
		t.Helper()
		r := c.Do("GET", base+"?limit=1000&filter="+url.QueryEscape(filter), nil)
		expectStatus(t, r, 200, "filter "+filter)
		var page struct {
			Documents []map[string]any `json:"documents"`
		}
		json.Unmarshal(r.Body, &page)
		return len(page.Documents)
	}
	// Expected counts, computed from how the documents were seeded.
	where := func(pred func(i int) bool) int {
		n := 0
		for i := 0; i < total; i++ {
			if pred(i) {
				n++
			}
		}
		return n
	}
	filters := map[string]int{
		`{"grp":1}`:                                             where(func(i int) bool { return i%4 == 1 }),
		`{"i":{"$gte":100}}`:                                    where(func(i int) bool { return i >= 100 }),
		`{"i":{"$in":[1,2,3]},"grp":{"$ne":1}}`:                 2,
		`{"$or":[{"i":0},{"i":119}]}`:                           2,
		`{"items":{"$elemMatch":{"sku":"s1","qty":{"$gt":2}}}}`: where(func(i int) bool { return i%5 == 1 && i%7 > 2 }),
		`{"tags":"t2"}`:                                         where(func(i int) bool { return i%3 == 2 }),
		`{"_id":{"$regex":"^d00"}}`:                             10,
		`{"v":{"$exists":false}}`:                               where(func(i int) bool { return i%11 == 0 }),
		`{"$nor":[{"grp":0},{"grp":1},{"grp":2}]}`:              where(func(i int) bool { return i%4 == 3 }),
	}
	for f, want := range filters {
		if got := count(f); got != want {
			t.Errorf("filter %s matched %d, want %d", f, got, want)
		}
	}
	for _, f := range []string{`{"$where":"1"}`, `{"$expr":{"$eq":[1,1]}}`, `{"a":{"$function":{}}}`, `{"a":{"$bogus":1}}`, `{"a":`, `[1]`} {
		expectProblem(t, c.Do("GET", base+"?filter="+url.QueryEscape(f), nil), 400, "urn:shoal:problem:invalid-filter", "filter "+f)
	}
	r := c.Do("GET", base+"?limit=5&sort=v", nil)
	next := r.JSON(t)["next"].(string)
	tampered := next[:len(next)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(next, "AA")]
	expectProblem(t, c.Do("GET", base+"?limit=5&sort=v&after="+url.QueryEscape(tampered), nil), 400, "urn:shoal:problem:invalid-query", "tampered cursor")
	expectProblem(t, c.Do("GET", base+"?limit=5&sort=-v&after="+url.QueryEscape(next), nil), 400, "urn:shoal:problem:invalid-query", "cursor with another sort")
	expectProblem(t, c.Do("GET", docsPath("gina", "other")+"?limit=5&sort=v&after="+url.QueryEscape(next), nil), 400, "urn:shoal:problem:invalid-query", "cursor of another collection")
	// A parameter given twice is refused, not read as its first value.
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "sort=a,b,c,d", "sort=$a", "bogus=1", "limit=5&limit=1000", "filter=%7B%7D&filter=%7B%22v%22%3A1%7D"} {
		expectProblem(t, c.Do("GET", base+"?"+q, nil), 400, "urn:shoal:problem:invalid-query", q)
	}
}

func TestReadyzAndHealthz(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client("")
	r := c.Do("GET", "/healthz", nil)
	expectStatus(t, r, http.StatusOK, "healthz")
	// Ready once its lease voter's startup wait is over and it masters
	// every partition (a node of its own); 503 saying why before.
	if r = c.Do("GET", "/readyz", nil); r.Status != http.StatusOK {
		expectProblem(t, r, http.StatusServiceUnavailable, "urn:shoal:problem:unavailable", "readyz while starting")
	}
	n.WaitReady()
	r = c.Do("GET", "/readyz", nil)
	expectStatus(t, r, http.StatusOK, "readyz")
}

// Go's profiler is served only when PPROF is on, and then only to admin
// tokens: a profile shows what the node runs.
func TestProfilerIsAdminOnlyAndOffByDefault(t *testing.T) {
	off := testnode.StartNew(t)
	expectStatus(t, off.Client(testnode.AdminToken(t)).Do("GET", "/debug/pprof/", nil), http.StatusNotFound, "profiler with PPROF unset")

	cfg := testnode.Config(t.TempDir())
	cfg.Pprof = true
	on := testnode.Start(t, cfg)
	expectStatus(t, on.Client("").Do("GET", "/debug/pprof/", nil), http.StatusUnauthorized, "profiler without a token")
	expectStatus(t, on.Client(testnode.Token(t, "alice")).Do("GET", "/debug/pprof/", nil), http.StatusForbidden, "profiler with a user's token")
	admin := on.Client(testnode.AdminToken(t))
	expectStatus(t, admin.Do("GET", "/debug/pprof/", nil), http.StatusOK, "profiler index")
	r := admin.Do("GET", "/debug/pprof/goroutine?debug=1", nil)
	expectStatus(t, r, http.StatusOK, "goroutine profile")
	if !strings.Contains(string(r.Body), "goroutine profile:") {
		t.Fatalf("the goroutine profile reads %.200q", r.Body)
	}
}

// A page never hands out a cursor too long to be sent back: past
// maxCursorBytes (sort values of about 48 KiB), the page ends before the
// document whose cursor it would be, and a page that cannot hold even one
// document so is refused, saying why (a helper's review: documents sorted
// on 800 KB strings, limit 1, gave a cursor of 1 MB, and the next page was
// refused by the HTTP server, 431, so the next document could never be
// read).
func TestAPageNeverHandsOutACursorTooLongToSendBack(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "hugo"))
	base := docsPath("hugo", "big")
	expectStatus(t, c.Do("PUT", base+"/small", `{"s":"a"}`), 201, "PUT small")
	for _, id := range []string{"x", "y", "z"} {
		expectStatus(t, c.Do("PUT", base+"/"+id, fmt.Sprintf(`{"s":%q}`, id+strings.Repeat("v", 800<<10))), 201, "PUT "+id)
	}
	// Each page's cursor is sent back until none follows, or a page is
	// refused: never a cursor the node then cannot read.
	after, read := "", 0
	for {
		q := "?sort=s&limit=1"
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		r := c.Do("GET", base+q, nil)
		if r.Status == 400 {
			expectProblem(t, r, 400, "urn:shoal:problem:invalid-query", "a page whose cursor would be too long")
			if !strings.Contains(string(r.Body), "sort by") {
				t.Fatalf("the refusal does not say what to do: %s", r.Body)
			}
			break
		}
		if r.Status != 200 {
			t.Fatalf("the page after %d documents (a cursor of %d bytes): status %d: %.200s", read, len(after), r.Status, r.Body)
		}
		page := r.JSON(t)
		read += len(page["documents"].([]any))
		next, _ := page["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	if read != 1 {
		t.Fatalf("%d documents read before the refusal, want 1 (small: the cursor after x is the first too long)", read)
	}
}

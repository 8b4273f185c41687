package api_test

// The OpenAPI document (api/openapi.json, served at GET /v1/openapi.json)
// is checked here against the code in two ways: every route of the router
// must be in it and everything in it must be a route (so neither can drift
// from the other), and a real node is driven over HTTP through every
// operation, its error answers included, each request and each answer
// validated against the document.
//
// The validator is github.com/getkin/kin-openapi. Its v0.153.0 reads
// OpenAPI 3.1 documents and, for them, validates schemas as JSON Schema
// 2020-12 (through santhosh-tekuri/jsonschema, already in this module's
// graph): type arrays, const, not and propertyNames, which the document
// uses. It validates requests (path, query and header parameters, security,
// bodies) and answers (status, headers, bodies), and its legacy router
// needs no other dependency, so pb33f/libopenapi-validator was not needed.
// One gap: its parameter decoder does not take "not", so a parameter's
// rule must be one pattern (the document id's is).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/go-chi/chi/v5"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
)

// loadOpenAPI parses and validates an OpenAPI document.
func loadOpenAPI(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		t.Fatalf("the OpenAPI document does not load: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("the OpenAPI document is version %s, want 3.1", doc.OpenAPI)
	}
	return doc
}

// standardMethods are the methods of RFC 9110 and PATCH: a route chi
// serves for all of them was registered with Handle, for any method.
var standardMethods = []string{"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"}

// TestOpenAPIDocumentsEveryRoute walks the router and fails on a public
// route the document does not list, and on an operation of the document
// the router does not have.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	data, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := loadOpenAPI(t, data)

	// The router of a node is built by api.New alone; the store is not
	// needed to walk it.
	served := map[string][]string{} // path -> methods
	err = chi.Walk(api.New(api.Config{}, nil, nil).Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if strings.HasPrefix(route, "/internal/") {
			return nil // node-to-node, not part of the public API
		}
		if route == "/ui" || strings.HasPrefix(route, "/ui/") {
			return nil // the dashboard's files (internal/ui), not part of the API
		}
		// A route of a sub-router ("/v1/users/{user}" with "/") is
		// served with and without the trailing slash; the document names
		// it without.
		if len(route) > 1 {
			route = strings.TrimSuffix(route, "/")
		}
		served[route] = append(served[route], method)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(served) == 0 {
		t.Fatal("chi.Walk found no routes")
	}
	for path, methods := range served {
		item := doc.Paths.Value(path)
		if item == nil {
			t.Errorf("the router serves %s %s, which the OpenAPI document (api/openapi.json) does not list", strings.Join(methods, ","), path)
			continue
		}
		if !slices.ContainsFunc(standardMethods, func(m string) bool { return !slices.Contains(methods, m) }) {
			// Registered with Handle: any method is served. The document
			// gives the one clients use.
			if item.Get == nil {
				t.Errorf("the router serves %s for any method; the OpenAPI document must list at least its GET", path)
			}
			continue
		}
		for _, m := range methods {
			if item.GetOperation(m) == nil {
				t.Errorf("the router serves %s %s, which the OpenAPI document (api/openapi.json) does not list", m, path)
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			if !slices.Contains(served[path], m) {
				t.Errorf("the OpenAPI document lists %s %s, which the router does not serve", m, path)
			}
		}
	}
}

// openAPICase is one request to the node and the answer it must get.
type openAPICase struct {
	name   string
	as     string // whose token: "alice", "bob", "admin", "forged" or "" (none)
	method string
	// path, headers and body may name values kept from earlier answers as
	// VAR_name (in the path, query-escaped).
	path    string
	headers []string // name, value pairs
	body    string
	status  int
	// problem is the problem type's last part, for an error answer.
	problem string
	// breaks marks a request that breaks the document on purpose: the
	// validator must refuse it, as the node does.
	breaks bool
	// keep takes values from the answer for later cases.
	keep func(t *testing.T, h http.Header, body []byte, vars map[string]string)
}

// q is a query string of name, value pairs, escaped.
func q(pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		v.Add(pairs[i], pairs[i+1])
	}
	return "?" + v.Encode()
}

// cannotDrive is why a status the document gives is not driven here, on
// a node of its own.
var cannotDrive = map[int]string{
	421: "only a node without a copy of the partition answers it, and a node of its own holds every copy",
	500: "only a failing store answers it",
	503: "it needs a node starting or stopping, a store that does not answer, a master or copies that do not answer, or a lease lost during a write; driven where one node can (a consistency token ahead of its copy)",
	504: "it needs replicas that do not confirm a write in time, and a node of its own needs none",
}

// expectMinimal checks a write answered as Prefer: return=minimal asks:
// the headers of the document written, and no body.
func expectMinimal(t *testing.T, h http.Header, body []byte, _ map[string]string) {
	t.Helper()
	if len(body) != 0 || h.Get("Preference-Applied") != "return=minimal" || h.Get("ETag") == "" || h.Get("X-Consistency-Token") == "" {
		t.Errorf("a minimal answer: body %q, Preference-Applied %q, ETag %q, X-Consistency-Token %q",
			body, h.Get("Preference-Applied"), h.Get("ETag"), h.Get("X-Consistency-Token"))
	}
}

// TestOpenAPI drives every operation of the OpenAPI document on a real
// node over HTTP, and validates each request and each answer against the
// document the node serves.
func TestOpenAPI(t *testing.T) {
	cfg := testnode.Config(t.TempDir())
	cfg.LeaseTTL = 300 * time.Millisecond // ready sooner
	cfg.MaxBodyBytes = 16 << 10
	cfg.MaxDocumentFields = 50
	cfg.QueryBudget = 1_000_000
	n := testnode.Start(t, cfg)
	n.WaitReady()
	base := n.URL()
	hc := &http.Client{Timeout: 10 * time.Second}

	// The document the node serves is the file, and valid.
	resp, err := hc.Get(base + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served, file) {
		t.Fatal("GET /v1/openapi.json does not answer api/openapi.json")
	}
	doc := loadOpenAPI(t, served)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}

	other, err := api.MintToken([]byte("another secret, not the node's"), api.TokenSpec{User: "alice", Audience: cfg.TokenAudience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{
		"alice":  testnode.Token(t, "alice"),
		"bob":    testnode.Token(t, "bob"),
		"admin":  testnode.AdminToken(t),
		"forged": other,
	}

	docs := "/v1/users/alice/collections/notes/documents"
	n1 := docs + "/n1"
	big := `{"pad":"` + strings.Repeat("x", 20<<10) + `"}`
	var fields []string
	for i := range 60 {
		fields = append(fields, fmt.Sprintf(`"f%d":%d`, i, i))
	}
	tooManyFields := "{" + strings.Join(fields, ",") + "}"
	// A regular expression that compiles to a large program, over a long
	// text, needs more than QUERY_BUDGET.
	expensive := `{"text":{"$regex":"(?:a*){1000}b0"}}`

	cases := []openAPICase{
		// No token needed.
		{name: "liveness", method: "GET", path: "/healthz", status: 200},
		{name: "readiness", method: "GET", path: "/readyz", status: 200},
		{name: "metrics", method: "GET", path: "/metrics", status: 200},
		{name: "this document", method: "GET", path: "/v1/openapi.json", status: 200},

		// Documents.
		{name: "create with a generated id", as: "alice", method: "POST", path: docs, body: `{"title":"first","stars":1}`, status: 201},
		{name: "create with an id", as: "alice", method: "POST", path: docs, body: `{"_id":"n1","title":"second","stars":3,"done":true,"tags":["a","b"],"nested":{"x":1.5,"y":null}}`, status: 201,
			keep: func(t *testing.T, h http.Header, _ []byte, vars map[string]string) {
				tok := h.Get("X-Consistency-Token")
				var p, e, s uint64
				if _, err := fmt.Sscanf(tok, "%d:%d.%d", &p, &e, &s); err != nil {
					t.Fatalf("X-Consistency-Token %q: %v", tok, err)
				}
				vars["token"] = tok
				vars["ahead"] = fmt.Sprintf("%d:%d.%d", p, e+1, 0)
				vars["otherPartition"] = fmt.Sprintf("%d:%d.%d", p+1, e, s)
			}},
		{name: "create with write concern majority", as: "alice", method: "POST", path: docs, headers: []string{"X-Write-Concern", "majority", "X-Write-Timeout", "2s"}, body: `{"title":"third","stars":2}`, status: 201},
		{name: "create a long text", as: "alice", method: "POST", path: docs, body: `{"_id":"long","text":"` + strings.Repeat("a", 3000) + `"}`, status: 201},
		{name: "create an existing id", as: "alice", method: "POST", path: docs, body: `{"_id":"n1"}`, status: 409, problem: "already-exists"},
		{name: "create from an array", as: "alice", method: "POST", path: docs, body: `[1,2]`, status: 400, problem: "invalid-document", breaks: true},
		{name: "create with a $ key", as: "alice", method: "POST", path: docs, body: `{"$set":1}`, status: 400, problem: "invalid-document", breaks: true},
		{name: "create with a $ key inside an object", as: "alice", method: "POST", path: docs, body: `{"a":[{"b.c":1}]}`, status: 400, problem: "invalid-document", breaks: true},
		{name: "create with a reserved key", as: "alice", method: "POST", path: docs, body: `{"_meta":1}`, status: 400, problem: "invalid-document", breaks: true},
		{name: "create with a bad _id", as: "alice", method: "POST", path: docs, body: `{"_id":"a b"}`, status: 400, problem: "invalid-document", breaks: true},
		{name: "create in a bad collection", as: "alice", method: "POST", path: "/v1/users/alice/collections/9notes/documents", body: `{}`, status: 400, problem: "invalid-name", breaks: true},
		{name: "create with an unknown write concern", as: "alice", method: "POST", path: docs, headers: []string{"X-Write-Concern", "2"}, body: `{}`, status: 400, problem: "invalid-header", breaks: true},
		{name: "create with a write timeout over 60s", as: "alice", method: "POST", path: docs, headers: []string{"X-Write-Timeout", "90s"}, body: `{}`, status: 400, problem: "invalid-header"},
		{name: "create with a body over MAX_BODY_BYTES", as: "alice", method: "POST", path: docs, body: big, status: 413, problem: "body-too-large"},
		{name: "create with too many fields", as: "alice", method: "POST", path: docs, body: tooManyFields, status: 413, problem: "document-too-large"},
		{name: "create without a token", method: "POST", path: docs, body: `{}`, status: 401, problem: "unauthorized", breaks: true},
		{name: "create with a token of another secret", as: "forged", method: "POST", path: docs, body: `{}`, status: 401, problem: "unauthorized"},
		{name: "create in another user's collection", as: "bob", method: "POST", path: docs, body: `{}`, status: 403, problem: "forbidden"},

		{name: "read", as: "alice", method: "GET", path: n1, status: 200},
		{name: "read as admin", as: "admin", method: "GET", path: n1, status: 200},
		{name: "read majority", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Concern", "majority"}, status: 200},
		{name: "read linearizable", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Concern", "linearizable", "X-Read-Preference", "master"}, status: 200},
		{name: "read nearest", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Preference", "nearest"}, status: 200},
		{name: "read local", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Preference", "local"}, status: 200},
		{name: "read your write", as: "alice", method: "GET", path: n1, headers: []string{"X-Consistency-Token", "VAR_token"}, status: 200},
		{name: "read with a token ahead of every copy", as: "alice", method: "GET", path: n1, headers: []string{"X-Consistency-Token", "VAR_ahead"}, status: 503, problem: "unavailable"},
		{name: "read local with a token ahead of the copy", as: "alice", method: "GET", path: n1, headers: []string{"X-Consistency-Token", "VAR_ahead", "X-Read-Preference", "local"}, status: 503, problem: "unavailable"},
		{name: "read with another partition's token", as: "alice", method: "GET", path: n1, headers: []string{"X-Consistency-Token", "VAR_otherPartition"}, status: 400, problem: "invalid-header"},
		{name: "read with a malformed token", as: "alice", method: "GET", path: n1, headers: []string{"X-Consistency-Token", "soon"}, status: 400, problem: "invalid-header", breaks: true},
		{name: "read with an unknown concern", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Concern", "strong"}, status: 400, problem: "invalid-header", breaks: true},
		{name: "read with an unknown preference", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Preference", "any"}, status: 400, problem: "invalid-header", breaks: true},
		{name: "read linearizable from the nearest copy", as: "alice", method: "GET", path: n1, headers: []string{"X-Read-Concern", "linearizable", "X-Read-Preference", "nearest"}, status: 400, problem: "invalid-header"},
		{name: "read a missing document", as: "alice", method: "GET", path: docs + "/nope", status: 404, problem: "not-found"},
		{name: "read a bad id", as: "alice", method: "GET", path: docs + "/bad!id", status: 400, problem: "invalid-name", breaks: true},
		{name: "read without a token", method: "GET", path: n1, status: 401, problem: "unauthorized", breaks: true},
		{name: "read with a Basic authorization", method: "GET", path: n1, headers: []string{"Authorization", "Basic YWxpY2U6c2VjcmV0"}, status: 401, problem: "unauthorized", breaks: true},
		{name: "read another user's document", as: "bob", method: "GET", path: n1, status: 403, problem: "forbidden"},

		{name: "put a new document", as: "alice", method: "PUT", path: docs + "/p1", body: `{"a":1}`, status: 201},
		{name: "put with a matching If-Match", as: "alice", method: "PUT", path: docs + "/p1", headers: []string{"If-Match", `"1"`}, body: `{"a":2,"_version":1}`, status: 200},
		{name: "put with If-Match *", as: "alice", method: "PUT", path: docs + "/p1", headers: []string{"If-Match", "*"}, body: `{"a":3}`, status: 200},
		{name: "put with a stale If-Match", as: "alice", method: "PUT", path: docs + "/p1", headers: []string{"If-Match", `"1"`}, body: `{"a":4}`, status: 412, problem: "precondition-failed"},
		{name: "put with a weak If-Match", as: "alice", method: "PUT", path: docs + "/p1", headers: []string{"If-Match", `W/"3"`}, body: `{"a":4}`, status: 412, problem: "precondition-failed"},
		{name: "put with If-Match on a missing document", as: "alice", method: "PUT", path: docs + "/p2", headers: []string{"If-Match", "1"}, body: `{"a":4}`, status: 412, problem: "precondition-failed"},
		{name: "put with a malformed If-Match", as: "alice", method: "PUT", path: docs + "/p1", headers: []string{"If-Match", "three"}, body: `{"a":4}`, status: 400, problem: "invalid-header", breaks: true},
		{name: "put with another _id", as: "alice", method: "PUT", path: docs + "/p1", body: `{"_id":"p9"}`, status: 400, problem: "invalid-document"},
		{name: "put with a body over MAX_BODY_BYTES", as: "alice", method: "PUT", path: docs + "/p1", body: big, status: 413, problem: "body-too-large"},
		{name: "put with too many fields", as: "alice", method: "PUT", path: docs + "/p1", body: tooManyFields, status: 413, problem: "document-too-large"},
		{name: "put without a token", method: "PUT", path: docs + "/p1", body: `{}`, status: 401, problem: "unauthorized", breaks: true},
		{name: "put another user's document", as: "bob", method: "PUT", path: docs + "/p1", body: `{}`, status: 403, problem: "forbidden"},

		{name: "put a new document, answered minimally", as: "alice", method: "PUT", path: docs + "/m1", headers: []string{"Prefer", "return=minimal"}, body: `{"a":1}`, status: 201, keep: expectMinimal},
		{name: "put, answered minimally", as: "alice", method: "PUT", path: docs + "/m1", headers: []string{"Prefer", `handling=lenient, return="minimal"`}, body: `{"a":2}`, status: 200, keep: expectMinimal},
		{name: "create, answered minimally", as: "alice", method: "POST", path: docs, headers: []string{"Prefer", "return=minimal"}, body: `{"a":1}`, status: 201, keep: expectMinimal},
		{name: "patch, answered minimally", as: "alice", method: "PATCH", path: docs + "/m1", headers: []string{"Prefer", "return=minimal"}, body: `{"b":1}`, status: 200, keep: expectMinimal},
		{name: "put, asking for the representation", as: "alice", method: "PUT", path: docs + "/m1", headers: []string{"Prefer", "return=representation"}, body: `{"a":3}`, status: 200,
			keep: func(t *testing.T, h http.Header, body []byte, _ map[string]string) {
				if h.Get("Preference-Applied") != "" || !bytes.Contains(body, []byte(`"a":3`)) {
					t.Errorf("Prefer: return=representation answered %q with Preference-Applied %q", body, h.Get("Preference-Applied"))
				}
			}},
		{name: "patch", as: "alice", method: "PATCH", path: docs + "/p1", headers: []string{"If-Match", `"3"`}, body: `{"b":{"c":1},"a":null}`, status: 200},
		{name: "patch with a stale If-Match", as: "alice", method: "PATCH", path: docs + "/p1", headers: []string{"If-Match", `"1"`}, body: `{"b":2}`, status: 412, problem: "precondition-failed"},
		{name: "patch a missing document", as: "alice", method: "PATCH", path: docs + "/nope", body: `{"b":2}`, status: 404, problem: "not-found"},
		{name: "patch that removes _id", as: "alice", method: "PATCH", path: docs + "/p1", body: `{"_id":null}`, status: 400, problem: "invalid-document", breaks: true},
		{name: "patch with too many fields", as: "alice", method: "PATCH", path: docs + "/p1", body: tooManyFields, status: 413, problem: "document-too-large"},
		{name: "patch without a token", method: "PATCH", path: docs + "/p1", body: `{}`, status: 401, problem: "unauthorized", breaks: true},
		{name: "patch another user's document", as: "bob", method: "PATCH", path: docs + "/p1", body: `{}`, status: 403, problem: "forbidden"},

		{name: "query a page", as: "alice", method: "GET", path: docs + q("limit", "1"), status: 200,
			keep: func(t *testing.T, _ http.Header, body []byte, vars map[string]string) {
				var page struct{ Next string }
				if err := json.Unmarshal(body, &page); err != nil || page.Next == "" {
					t.Fatalf("a page of 1 of several documents has no next: %s", body)
				}
				vars["next"] = page.Next
			}},
		{name: "query the next page", as: "alice", method: "GET", path: docs + q("limit", "1") + "&after=VAR_next", status: 200},
		{name: "query with a filter and a sort", as: "alice", method: "GET", path: docs + q("filter", `{"stars":{"$gte":1}}`, "sort", "-stars,title", "limit", "10"), headers: []string{"X-Read-Concern", "majority"}, status: 200},
		{name: "query with a forbidden operator", as: "alice", method: "GET", path: docs + q("filter", `{"$where":"true"}`), status: 400, problem: "invalid-filter"},
		{name: "query with a malformed filter", as: "alice", method: "GET", path: docs + q("filter", `{"a":`), status: 400, problem: "invalid-filter"},
		{name: "query over the budget", as: "alice", method: "GET", path: docs + q("filter", expensive), status: 400, problem: "query-too-expensive"},
		{name: "query with limit 0", as: "alice", method: "GET", path: docs + q("limit", "0"), status: 400, problem: "invalid-query", breaks: true},
		{name: "query with limit 1001", as: "alice", method: "GET", path: docs + q("limit", "1001"), status: 400, problem: "invalid-query", breaks: true},
		{name: "query with four sort fields", as: "alice", method: "GET", path: docs + q("sort", "a,b,c,d"), status: 400, problem: "invalid-query", breaks: true},
		{name: "query with a bad sort field", as: "alice", method: "GET", path: docs + q("sort", "$a"), status: 400, problem: "invalid-query"},
		{name: "query with a tampered cursor", as: "alice", method: "GET", path: docs + q("after", "bm90IGEgY3Vyc29y"), status: 400, problem: "invalid-query"},
		{name: "query with an unknown parameter", as: "alice", method: "GET", path: docs + q("bogus", "1"), status: 400, problem: "invalid-query"},
		// A query string that does not parse breaks the document, but the
		// validator drops what does not parse (as url.URL.Query does), so
		// it takes these; the node refuses them.
		{name: "query with a query string that does not parse", as: "alice", method: "GET", path: docs + "?limit=1;sort=a", status: 400, problem: "invalid-query"},
		{name: "query with an unknown concern", as: "alice", method: "GET", path: docs, headers: []string{"X-Read-Concern", "eventual"}, status: 400, problem: "invalid-header", breaks: true},
		{name: "query without a token", method: "GET", path: docs, status: 401, problem: "unauthorized", breaks: true},
		{name: "query another user's collection", as: "bob", method: "GET", path: docs, status: 403, problem: "forbidden"},

		{name: "collections", as: "alice", method: "GET", path: "/v1/users/alice/collections", status: 200},
		{name: "collections of a user without any", as: "admin", method: "GET", path: "/v1/users/nobody/collections", status: 200},
		{name: "collections of a bad user name", as: "admin", method: "GET", path: "/v1/users/-x/collections", status: 400, problem: "invalid-name", breaks: true},
		{name: "collections without a token", method: "GET", path: "/v1/users/alice/collections", status: 401, problem: "unauthorized", breaks: true},
		{name: "collections of another user", as: "bob", method: "GET", path: "/v1/users/alice/collections", status: 403, problem: "forbidden"},

		{name: "placement", as: "alice", method: "GET", path: "/v1/users/alice/placement", status: 200},
		{name: "placement with a query string that does not parse", as: "alice", method: "GET", path: "/v1/users/alice/placement?a=%zz", status: 400, problem: "invalid-query"},
		{name: "placement of a bad user name", as: "admin", method: "GET", path: "/v1/users/a%20b/placement", status: 400, problem: "invalid-name", breaks: true},
		{name: "placement without a token", method: "GET", path: "/v1/users/alice/placement", status: 401, problem: "unauthorized", breaks: true},
		{name: "placement of another user", as: "bob", method: "GET", path: "/v1/users/alice/placement", status: 403, problem: "forbidden"},
		{name: "placement table", as: "admin", method: "GET", path: "/v1/placement", status: 200},
		{name: "placement table with a query string that does not parse", as: "admin", method: "GET", path: "/v1/placement?a=%zz", status: 400, problem: "invalid-query"},
		{name: "placement table for a user", as: "alice", method: "GET", path: "/v1/placement", status: 403, problem: "forbidden"},
		{name: "placement table without a token", method: "GET", path: "/v1/placement", status: 401, problem: "unauthorized", breaks: true},

		{name: "delete with a stale If-Match", as: "alice", method: "DELETE", path: n1, headers: []string{"If-Match", `"7"`}, status: 412, problem: "precondition-failed"},
		{name: "delete with a malformed If-Match", as: "alice", method: "DELETE", path: n1, headers: []string{"If-Match", `"1`}, status: 400, problem: "invalid-header", breaks: true},
		{name: "delete with a body over MAX_BODY_BYTES", as: "alice", method: "DELETE", path: n1, body: big, status: 413, problem: "body-too-large", breaks: true},
		{name: "delete without a token", method: "DELETE", path: n1, status: 401, problem: "unauthorized", breaks: true},
		{name: "delete another user's document", as: "bob", method: "DELETE", path: n1, status: 403, problem: "forbidden"},
		{name: "delete", as: "alice", method: "DELETE", path: n1, headers: []string{"If-Match", `"1"`, "X-Write-Concern", "all"}, status: 204},
		{name: "delete again", as: "alice", method: "DELETE", path: n1, status: 404, problem: "not-found"},

		// Admin routes.
		{name: "cluster", as: "admin", method: "GET", path: "/v1/cluster", status: 200},
		{name: "cluster with every replica", as: "admin", method: "GET", path: "/v1/cluster" + q("all", "1"), status: 200},
		{name: "cluster with the partition table", as: "admin", method: "GET", path: "/v1/cluster" + q("partitions", "1"), status: 200,
			keep: func(t *testing.T, _ http.Header, body []byte, _ map[string]string) {
				// Validated above; here, that the table was there to validate.
				var a api.ClusterAnswer
				if err := json.Unmarshal(body, &a); err != nil || len(a.PartitionTable) != cfg.PartitionCount {
					t.Fatalf("GET /v1/cluster?partitions=1 gave %d partition rows (%v), want %d", len(a.PartitionTable), err, cfg.PartitionCount)
				}
				for p, row := range a.PartitionTable {
					if row.Partition != p || row.Master != cfg.NodeID || row.Position == nil {
						t.Errorf("partition row %d: %+v; want partition %d mastered by %s, with a position", p, row, p, cfg.NodeID)
					}
				}
			}},
		{name: "cluster with every member's moves", as: "admin", method: "GET", path: "/v1/cluster" + q("moves", "all"), status: 200},
		{name: "cluster with the partition table and every replica", as: "admin", method: "GET", path: "/v1/cluster" + q("all", "1", "partitions", "1"), status: 200},
		{name: "cluster with a query string that does not parse", as: "admin", method: "GET", path: "/v1/cluster?all=1;x", status: 400, problem: "invalid-query"},
		{name: "cluster without a token", method: "GET", path: "/v1/cluster", status: 401, problem: "unauthorized", breaks: true},
		{name: "cluster with a user's token", as: "alice", method: "GET", path: "/v1/cluster", status: 403, problem: "forbidden"},
		{name: "rollbacks", as: "admin", method: "GET", path: "/v1/admin/rollback", status: 200},
		{name: "rollbacks with a limit", as: "admin", method: "GET", path: "/v1/admin/rollback" + q("limit", "10"), status: 200},
		{name: "rollbacks with limit 0", as: "admin", method: "GET", path: "/v1/admin/rollback" + q("limit", "0"), status: 400, problem: "invalid-query", breaks: true},
		{name: "rollbacks with a token of another secret", as: "forged", method: "GET", path: "/v1/admin/rollback", status: 401, problem: "unauthorized"},
		{name: "rollbacks with a user's token", as: "alice", method: "GET", path: "/v1/admin/rollback", status: 403, problem: "forbidden"},

		// Erasing a user.
		{name: "erase with an unknown write concern", as: "alice", method: "DELETE", path: "/v1/users/alice", headers: []string{"X-Write-Concern", "most"}, status: 400, problem: "invalid-header", breaks: true},
		{name: "erase with a body over MAX_BODY_BYTES", as: "alice", method: "DELETE", path: "/v1/users/alice", body: big, status: 413, problem: "body-too-large", breaks: true},
		{name: "erase without a token", method: "DELETE", path: "/v1/users/alice", status: 401, problem: "unauthorized", breaks: true},
		{name: "erase another user", as: "bob", method: "DELETE", path: "/v1/users/alice", status: 403, problem: "forbidden"},
		{name: "erase a bad user name", as: "admin", method: "DELETE", path: "/v1/users/bad!user", status: 400, problem: "invalid-name", breaks: true},
		{name: "erase", as: "alice", method: "DELETE", path: "/v1/users/alice", headers: []string{"X-Write-Concern", "majority"}, status: 200},
		{name: "erase with a trailing slash", as: "alice", method: "DELETE", path: "/v1/users/alice/", status: 200},

		// Paths and methods the document does not list.
		{name: "no such route", as: "admin", method: "GET", path: "/v1/nope", status: 404, problem: "route-not-found"},
		{name: "no such route outside /v1", method: "GET", path: "/nope", status: 404, problem: "route-not-found"},
		{name: "no such method", as: "admin", method: "GET", path: "/v1/users/alice", status: 405, problem: "method-not-allowed"},
		{name: "no such method on a document", as: "alice", method: "POST", path: n1, body: `{}`, status: 405, problem: "method-not-allowed"},
	}

	opts := &openapi3filter.Options{
		AuthenticationFunc:                bearerOnly,
		IncludeResponseStatus:             true, // a status the document does not give fails
		RejectWhenRequestBodyNotSpecified: true,
		MultiError:                        true,
	}
	vars := map[string]string{}
	driven := map[string]map[int]bool{} // "METHOD path" -> statuses
	kinds := map[string]bool{}          // problem type and status driven
	ctx := context.Background()
	for _, c := range cases {
		path, body := c.path, c.body
		headers := slices.Clone(c.headers)
		for k, v := range vars {
			path = strings.ReplaceAll(path, "VAR_"+k, url.QueryEscape(v))
			body = strings.ReplaceAll(body, "VAR_"+k, v)
			for i := range headers {
				headers[i] = strings.ReplaceAll(headers[i], "VAR_"+k, v)
			}
		}
		newRequest := func() *http.Request {
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, err := http.NewRequestWithContext(ctx, c.method, base+path, rd)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if c.as != "" {
				req.Header.Set("Authorization", "Bearer "+tokens[c.as])
			}
			for i := 0; i+1 < len(headers); i += 2 {
				req.Header.Set(headers[i], headers[i+1])
			}
			return req
		}

		// The request, against the document.
		route, params, routeErr := router.FindRoute(newRequest())
		var input *openapi3filter.RequestValidationInput
		if routeErr == nil {
			input = &openapi3filter.RequestValidationInput{Request: newRequest(), PathParams: params, Route: route, Options: opts}
			err := openapi3filter.ValidateRequest(ctx, input)
			switch {
			case c.breaks && err == nil:
				t.Errorf("%s: %s %s breaks the document on purpose, and the validator took it", c.name, c.method, c.path)
			case !c.breaks && err != nil:
				t.Errorf("%s: %s %s does not follow the document: %v", c.name, c.method, c.path, err)
			}
		} else if c.problem != "route-not-found" && c.problem != "method-not-allowed" {
			t.Errorf("%s: %s %s is not in the document: %v", c.name, c.method, c.path, routeErr)
			continue
		}

		// The answer.
		resp, err := hc.Do(newRequest())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if resp.StatusCode != c.status {
			t.Errorf("%s: %s %s answered %d, want %d: %s", c.name, c.method, c.path, resp.StatusCode, c.status, clip(data))
			continue
		}
		if resp.Header.Get("X-Served-By") == "" {
			t.Errorf("%s: the answer has no X-Served-By", c.name)
		}
		if c.problem != "" {
			var p struct {
				Type   string
				Status int
			}
			if err := json.Unmarshal(data, &p); err != nil || p.Type != "urn:shoal:problem:"+c.problem {
				t.Errorf("%s: answered %s, want a problem of type %s", c.name, clip(data), c.problem)
			}
			kinds[p.Type+" "+strconv.Itoa(p.Status)] = true
		}
		if routeErr != nil {
			// A path or method the document does not list: the answer
			// is the problem its schema describes.
			checkUnlistedAnswer(t, c, doc, router, newRequest(), resp, data)
			continue
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header, Options: opts}
		if resp.Header.Get("Preference-Applied") == "return=minimal" {
			// OpenAPI cannot say that a response's content may be left
			// out: the document says it in words, the headers are still
			// checked, and the case checks that the body is empty.
			minimal := *opts
			minimal.ExcludeResponseBody = true
			out.Options = &minimal
		}
		out.SetBodyBytes(data)
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s: the answer %d %s does not follow the document: %v", c.name, resp.StatusCode, clip(data), err)
		}
		key := route.Method + " " + route.Path
		if driven[key] == nil {
			driven[key] = map[int]bool{}
		}
		driven[key][resp.StatusCode] = true
		if c.keep != nil {
			c.keep(t, resp.Header, data, vars)
		}
	}

	// Every status of every operation is driven, or cannot be on one node.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			key := method + " " + path
			for code := range op.Responses.Map() {
				status, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s answers %q, which is not a status", key, code)
					continue
				}
				if !driven[key][status] && cannotDrive[status] == "" {
					t.Errorf("%s: status %d is in the document but no case drives it", key, status)
				}
			}
		}
	}
	// And every problem type, with its status.
	for name, s := range doc.Components.Schemas {
		if !strings.HasPrefix(name, "Problem") || name == "Problem" {
			continue
		}
		typ, status := s.Value.Properties["type"], s.Value.Properties["status"]
		if typ == nil || status == nil || typ.Value == nil || status.Value == nil {
			t.Errorf("the problem %s gives no type and status", name)
			continue
		}
		st, _ := status.Value.Const.(float64)
		if key := fmt.Sprint(typ.Value.Const, " ", int(st)); !kinds[key] && cannotDrive[int(st)] == "" {
			t.Errorf("the problem %s (%s) is in the document but no case gets it", name, key)
		}
	}
	for _, status := range slices.Sorted(maps.Keys(cannotDrive)) {
		t.Logf("status %d is not driven here: %s", status, cannotDrive[status])
	}
}

// checkUnlistedAnswer checks the answer to req, whose path or method the
// document does not list: the path is listed with another method for a
// method-not-allowed answer and not at all for route-not-found, and the
// answer is the problem the document's schema for it describes.
func checkUnlistedAnswer(t *testing.T, c openAPICase, doc *openapi3.T, router routers.Router, req *http.Request, resp *http.Response, data []byte) {
	t.Helper()
	listed := slices.ContainsFunc(standardMethods, func(m string) bool {
		req.Method = m
		_, _, err := router.FindRoute(req)
		return err == nil
	})
	schema := "ProblemRouteNotFound"
	if c.problem == "method-not-allowed" {
		schema = "ProblemMethodNotAllowed"
	}
	if listed != (c.problem == "method-not-allowed") {
		t.Errorf("%s: answered %s, but the document lists the path with another method: %v", c.name, c.problem, listed)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", c.name, ct)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Errorf("%s: the answer is not JSON: %v", c.name, err)
		return
	}
	if err := doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("%s: the answer %s does not follow the document's %s: %v", c.name, clip(data), schema, err)
	}
}

// bearerOnly is the document's security scheme as a validator sees it: an
// Authorization: Bearer header with a token (whether the node takes the
// token is the node's business).
func bearerOnly(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, token, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("no Authorization: Bearer <token> header")
	}
	return nil
}

// clip shortens an answer for an error message.
func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/internal/testnode"
)

// flatDoc is a JSON object of n keys k0..k(n-1).
func flatDoc(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString("}")
	return b.String()
}

// storedSize is a document's length as compact JSON without _id and
// _version, as MAX_DOCUMENT_BYTES counts it.
func storedSize(t *testing.T, r *testnode.Response) int {
	t.Helper()
	d := r.JSON(t)
	delete(d, "_id")
	delete(d, "_version")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	return b.Len() - 1
}

func expectTooLarge(t *testing.T, r *testnode.Response, setting, what string) {
	t.Helper()
	if r.Status != 413 {
		t.Fatalf("%s: status %d, want 413; body %.300s", what, r.Status, r.Body)
	}
	expectProblem(t, r, 413, "urn:shoal:problem:document-too-large", what)
	if d := r.JSON(t)["detail"].(string); !strings.Contains(d, setting) {
		t.Fatalf("%s: detail %q does not name %s", what, d, setting)
	}
}

// The issue: 20 patches of 1 MB made a 20 MB document. With the defaults
// (MAX_BODY_BYTES and MAX_DOCUMENT_BYTES 1 MiB), patches that each fit the
// body limit grow the document up to MAX_DOCUMENT_BYTES and no further; a
// refused patch leaves the document as it was.
func TestPatchesCannotGrowADocumentPastMaxDocumentBytes(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "pat"))
	path := docsPath("pat", "big") + "/d"
	expectStatus(t, c.Do("PUT", path, `{"n":0}`), 201, "create")
	limit := int(n.Config.MaxDocumentBytes)
	chunk := strings.Repeat("x", 200<<10)
	refused := 0
	for i := 1; i <= 20; i++ {
		before := c.Do("GET", path, nil)
		r := c.Do("PATCH", path, fmt.Sprintf(`{"p%d":%q}`, i, chunk))
		switch r.Status {
		case 200:
			if size := storedSize(t, r); size > limit {
				t.Fatalf("patch %d made a document of %d bytes, over MAX_DOCUMENT_BYTES (%d)", i, size, limit)
			}
		default:
			expectTooLarge(t, r, "MAX_DOCUMENT_BYTES", fmt.Sprintf("patch %d", i))
			refused++
			after := c.Do("GET", path, nil)
			if after.Header.Get("ETag") != before.Header.Get("ETag") || !bytes.Equal(after.Body, before.Body) {
				t.Fatalf("a refused patch changed the document from version %s to %s", before.Header.Get("ETag"), after.Header.Get("ETag"))
			}
		}
	}
	final := c.Do("GET", path, nil)
	if size := storedSize(t, final); refused == 0 || size > limit {
		t.Fatalf("after 20 patches of 200 KB: %d refused, the document is %d bytes (MAX_DOCUMENT_BYTES %d)", refused, size, limit)
	}
	// A patch that shrinks it, or a small one, still applies.
	expectStatus(t, c.Do("PATCH", path, `{"p1":null,"n":1}`), 200, "shrinking patch")
}

// A body with more keys than MAX_DOCUMENT_FIELDS (default 10,000), at any
// depth, is refused with a type that says why and the setting to change.
func TestBodiesWithTooManyFieldsAreRefused(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "kim"))
	base := docsPath("kim", "wide")
	max := n.Config.MaxDocumentFields
	expectTooLarge(t, c.Do("POST", base, flatDoc(max+1)), "MAX_DOCUMENT_FIELDS", "POST one key too many")
	expectTooLarge(t, c.Do("PUT", base+"/w", flatDoc(5*max)), "MAX_DOCUMENT_FIELDS", "PUT five times too many")
	var nestedDoc strings.Builder
	nestedDoc.WriteString("{")
	for o := 0; o*100 <= max; o++ {
		if o > 0 {
			nestedDoc.WriteString(",")
		}
		fmt.Fprintf(&nestedDoc, `"o%d":%s`, o, flatDoc(99)) // 100 keys each, with o%d
	}
	nestedDoc.WriteString("}")
	expectTooLarge(t, c.Do("PUT", base+"/n", nestedDoc.String()), "MAX_DOCUMENT_FIELDS", "PUT too many nested keys")
	expectTooLarge(t, c.Do("PATCH", base+"/n", flatDoc(max+1)), "MAX_DOCUMENT_FIELDS", "PATCH with too many keys")
	r := c.Do("GET", "/v1/users/kim/collections", nil)
	if got := strings.TrimSpace(string(r.Body)); got != `{"collections":[]}` {
		t.Fatalf("refused bodies were stored: %s", got)
	}
}

// With limits below the body limit: a PUT whose document is over
// MAX_DOCUMENT_BYTES or MAX_DOCUMENT_FIELDS is refused, and a patch that
// would take a document over either is refused, the document unchanged.
func TestSmallDocumentLimits(t *testing.T) {
	cfg := testnode.Config(t.TempDir())
	cfg.MaxDocumentBytes, cfg.MaxDocumentFields = 4096, 100
	n := testnode.Start(t, cfg)
	c := n.Client(testnode.Token(t, "lou"))
	base := docsPath("lou", "c")
	expectTooLarge(t, c.Do("PUT", base+"/s", fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", 4096))), "MAX_DOCUMENT_BYTES", "PUT over the document limit, under the body limit")
	expectStatus(t, c.Do("PUT", base+"/s", fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", 4088))), 201, "PUT of exactly MAX_DOCUMENT_BYTES")
	expectTooLarge(t, c.Do("PATCH", base+"/s", `{"t":1}`), "MAX_DOCUMENT_BYTES", "PATCH one byte over")

	expectStatus(t, c.Do("PUT", base+"/k", flatDoc(100)), 201, "PUT of exactly MAX_DOCUMENT_FIELDS keys")
	expectTooLarge(t, c.Do("PATCH", base+"/k", `{"more":{"a":1}}`), "MAX_DOCUMENT_FIELDS", "PATCH adding keys")
	r := c.Do("GET", base+"/k", nil)
	if d := r.JSON(t); r.Header.Get("ETag") != `"1"` || len(d) != 102 || d["more"] != nil {
		t.Fatalf("a refused patch changed the document: %s %d fields", r.Header.Get("ETag"), len(d))
	}
	expectStatus(t, c.Do("PATCH", base+"/k", `{"k0":null,"k1":{"a":1}}`), 200, "PATCH keeping the key count")
}

// A node whose limits were lowered still serves documents stored under the
// old ones: they read, list, query and delete; a patch that leaves one over
// the new limit is refused; a PUT within it replaces it.
func TestDocumentsOverALoweredLimitStayUsable(t *testing.T) {
	dir := t.TempDir()
	cfg := testnode.Config(dir)
	n := testnode.Start(t, cfg)
	c := n.Client(testnode.Token(t, "old"))
	base := docsPath("old", "c")
	big := flatDoc(500)
	expectStatus(t, c.Do("PUT", base+"/big", big), 201, "store under the old limits")
	n.Stop()

	cfg.MaxDocumentFields, cfg.MaxDocumentBytes = 100, 2048
	n = testnode.Start(t, cfg)
	c = n.Client(testnode.Token(t, "old"))
	r := c.Do("GET", base+"/big", nil)
	expectStatus(t, r, 200, "read an old document over the new limits")
	if len(r.JSON(t)) != 502 {
		t.Fatalf("the old document reads back with %d fields, want 502", len(r.JSON(t)))
	}
	r = c.Do("GET", base, nil)
	expectStatus(t, r, 200, "query")
	if !strings.Contains(string(r.Body), `"k499":499`) {
		t.Fatalf("query lacks the old document: %.200s", r.Body)
	}
	expectTooLarge(t, c.Do("PATCH", base+"/big", `{"k0":null}`), "MAX_DOCUMENT_FIELDS", "PATCH leaving it over the new limit")
	expectStatus(t, c.Do("PUT", base+"/big", flatDoc(50)), 200, "PUT within the new limits")
	expectStatus(t, c.Do("DELETE", base+"/big", nil), 204, "DELETE")
}

// numbers is a JSON array of n small numbers.
func numbers(n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d", i%10)
	}
	b.WriteString("]")
	return b.String()
}

// Array elements are fields as object keys are: a 1 MB document of one
// array of 500,000 small numbers passed a bound on keys alone, and then
// every scan of its partition decoded it (1.3 s per query of any user).
// Elements count at every depth, in arrays of objects and arrays of arrays,
// and a body whose text counts "_id" and "_version" besides is accepted
// when its document is within the limit.
func TestArrayElementsCountAsFields(t *testing.T) {
	n := testnode.StartNew(t)
	c := n.Client(testnode.Token(t, "arr"))
	base := docsPath("arr", "c")
	max := n.Config.MaxDocumentFields
	const setting = "MAX_DOCUMENT_FIELDS"

	r := c.Do("PUT", base+"/a", `{"a":`+numbers(max+1)+`}`)
	expectTooLarge(t, r, setting, "PUT one array of MAX+1 numbers")
	if d := r.JSON(t)["detail"].(string); !strings.Contains(d, "object keys and array elements") {
		t.Fatalf("detail %q does not say what counts", d)
	}
	expectTooLarge(t, c.Do("POST", base, `{"a":`+numbers(50*max)+`}`), setting, "POST one array of 50 x MAX numbers")
	// max/4 objects of 3 fields each (an element and its two keys) and the
	// key "a": 3*max/4+1 fields, then twice that.
	objects := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"a":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"x":1,"y":[]}`)
		}
		b.WriteString("]}")
		return b.String()
	}
	expectStatus(t, c.Do("PUT", base+"/o", objects(max/4)), 201, "PUT an array of objects within the limit")
	expectTooLarge(t, c.Do("PUT", base+"/o", objects(max/2)), setting, "PUT an array of objects over the limit")
	// Arrays of arrays: "m" and 100 rows of (one element and max/100 numbers).
	var rows strings.Builder
	rows.WriteString(`{"m":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			rows.WriteString(",")
		}
		rows.WriteString(numbers(max / 100))
	}
	rows.WriteString("]}")
	expectTooLarge(t, c.Do("PUT", base+"/m", rows.String()), setting, "PUT nested arrays over the limit")

	// Exactly at the limit: keys "a" and "b" and max-2 elements, with _id
	// and _version in the text besides.
	exact := fmt.Sprintf(`{"_id":"e","_version":1,"a":%s,"b":1}`, numbers(max-2))
	expectStatus(t, c.Do("POST", base, exact), 201, "POST of exactly MAX fields, with _id and _version")
	expectTooLarge(t, c.Do("PATCH", base+"/e", `{"c":[1]}`), setting, "PATCH adding an element")
	expectStatus(t, c.Do("PATCH", base+"/e", `{"b":null,"c":[]}`), 200, "PATCH keeping the field count")
	expectStatus(t, c.Do("GET", base+"/o", nil), 200, "the array of objects is stored")
}

// A document is answered as its size is measured (doc.Size: <, > and &
// not escaped), alone and in a query page: escaped as \u003c, a
// document of MAX_DOCUMENT_BYTES of them took six times as much, and a
// page forwarded between nodes could pass what an internal answer may
// take (cluster.MaxInternalAnswer).
func TestDocumentsAreAnsweredAsLargeAsTheyAreMeasured(t *testing.T) {
	cfg := testnode.Config(t.TempDir())
	cfg.MaxDocumentBytes = 4096
	n := testnode.Start(t, cfg)
	c := n.Client(testnode.Token(t, "lou"))
	base := docsPath("lou", "c")
	body := fmt.Sprintf(`{"s":%q}`, strings.Repeat("<&>", 4086/3))
	expectStatus(t, c.Do("PUT", base+"/s", body), 201, "PUT of a document of <, & and >")
	for _, path := range []string{base + "/s", base + "?limit=10"} {
		r := c.Do("GET", path, nil)
		if r.Status != 200 || !strings.Contains(string(r.Body), strings.Repeat("<&>", 4086/3)) || len(r.Body) > 4096+200 {
			t.Errorf("GET %s: %d, %d bytes; want the document's <, & and > as they are (%d bytes measured)", path, r.Status, len(r.Body), len(body))
		}
	}
}

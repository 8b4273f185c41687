package query

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var testKey = []byte("test key for cursors, 32 bytes..")

// mixedValue returns a value of a random type class, with many duplicates,
// and whether the field should be present at all.
func mixedValue(r *rand.Rand) (any, bool) {
	switch r.IntN(10) {
	case 0:
		return nil, false
	case 1:
		return nil, true
	case 2:
		return int64(r.IntN(20) - 5), true
	case 3:
		return []any{1.5, 2.0, -0.5, math.Copysign(0, -1), 1e300, float64(r.IntN(10))}[r.IntN(6)], true
	case 4:
		return []string{"", "a", "ab", "b", "B", "é", "a\x00"}[r.IntN(7)], true
	case 5:
		m := map[string]any{}
		if r.IntN(3) > 0 {
			m["k"] = int64(r.IntN(3))
		}
		if r.IntN(3) == 0 {
			m["j"] = "x"
		}
		return m, true
	case 6:
		arr := make([]any, r.IntN(3))
		for i := range arr {
			arr[i] = int64(r.IntN(3))
		}
		return arr, true
	case 7:
		return r.IntN(2) == 0, true
	case 8:
		return []any{int64(math.MaxInt64), int64(1<<53 + 1), float64(1 << 53), int64(math.MinInt64)}[r.IntN(4)], true
	default:
		return int64(r.IntN(3)), true
	}
}

// testDocs returns n documents with unique ids in random order and mixed
// values in the fields v, w (small ints), o.x and tags.p.
func testDocs(seed uint64, n int) []map[string]any {
	r := rand.New(rand.NewPCG(seed, 7))
	docs := make([]map[string]any, n)
	for i, id := range r.Perm(n) {
		d := map[string]any{"_id": fmt.Sprintf("d%d", id), "_version": int64(r.IntN(5) + 1)}
		if v, ok := mixedValue(r); ok {
			d["v"] = v
		}
		if r.IntN(5) > 0 {
			d["w"] = int64(r.IntN(4))
		}
		if v, ok := mixedValue(r); ok {
			d["o"] = map[string]any{"x": v}
		}
		if r.IntN(2) == 0 {
			tags := make([]any, r.IntN(3))
			for j := range tags {
				tags[j] = map[string]any{"p": int64(r.IntN(3))}
			}
			d["tags"] = tags
		}
		docs[i] = d
	}
	return docs
}

// pageThrough reads all pages of a query, giving Page a freshly shuffled
// copy of docs each time as a store might. It checks the page sizes.
func pageThrough(t *testing.T, docs []map[string]any, filter, sort string, limit int, r *rand.Rand) []map[string]any {
	t.Helper()
	f, err := ParseFilter(filter)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSort(sort)
	if err != nil {
		t.Fatal(err)
	}
	var all []map[string]any
	after := ""
	input := slices.Clone(docs)
	for n := 0; ; n++ {
		if n > len(docs)+1 {
			t.Fatalf("filter %s sort %q limit %d: paging does not end", filter, sort, limit)
		}
		r.Shuffle(len(input), func(i, j int) { input[i], input[j] = input[j], input[i] })
		page, next, err := Page(input, PageRequest{Filter: f, Sort: s, Limit: limit, After: after, FilterText: filter, Key: testKey})
		if err != nil {
			t.Fatalf("filter %s sort %q limit %d page %d: %v", filter, sort, limit, n, err)
		}
		if len(page) > limit || (next != "" && len(page) != limit) {
			t.Fatalf("filter %s sort %q limit %d page %d: %d documents, next %q", filter, sort, limit, n, len(page), next)
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		after = next
	}
}

func ids(docs []map[string]any) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i], _ = d["_id"].(string)
	}
	return out
}

func TestPageAll(t *testing.T) {
	docs := testDocs(1, 1000)
	filters := []string{``, `{"w": {"$ne": 2}}`, `{"v": {"$type": ["number", "string", "null"]}}`}
	sorts := []string{"", "v", "-v", "v,w", "-w,v", "o.x,-v", "-_id", "w,-o.x,v", "tags.p", "-o,_id,w", "o.x.k"}
	limits := []int{1, 7, 100, 1000}
	for i, filter := range filters {
		f, _ := ParseFilter(filter)
		for j, sort := range sorts {
			s, _ := ParseSort(sort)
			var want []map[string]any
			for _, d := range docs {
				if f.Match(d) {
					want = append(want, d)
				}
			}
			slices.SortFunc(want, s.Compare)
			t.Run(fmt.Sprintf("filter%d/sort=%s", i, sort), func(t *testing.T) {
				t.Parallel()
				r := rand.New(rand.NewPCG(uint64(i), uint64(j)))
				for _, limit := range limits {
					// Keep the test fast: limit 1 (1000 pages) only for some sorts.
					if limit == 1 && !(sort == "v" || i == 0 && (sort == "-v" || sort == "-_id" || sort == "w,-o.x,v" || sort == "tags.p")) {
						continue
					}
					got := pageThrough(t, docs, filter, sort, limit, r)
					if !slices.Equal(ids(got), ids(want)) {
						t.Errorf("filter %s sort %q limit %d: pages give %d documents, want %d in order", filter, sort, limit, len(got), len(want))
					}
				}
			})
		}
	}
}

// TestPageMixedTypeOrder checks the type order on the sort field directly.
func TestPageMixedTypeOrder(t *testing.T) {
	docs := []map[string]any{
		doc(t, `{"_id": "bool", "v": false}`),
		doc(t, `{"_id": "arr", "v": [1]}`),
		doc(t, `{"_id": "obj", "v": {"a": 1}}`),
		doc(t, `{"_id": "str", "v": "s"}`),
		doc(t, `{"_id": "num2", "v": 2.5}`),
		doc(t, `{"_id": "num1", "v": 1}`),
		doc(t, `{"_id": "null", "v": null}`),
		doc(t, `{"_id": "missing"}`),
	}
	s, _ := ParseSort("v")
	page, next, err := Page(docs, PageRequest{Sort: s, Limit: 100, Key: testKey})
	if err != nil || next != "" {
		t.Fatal(err, next)
	}
	want := []string{"missing", "null", "num1", "num2", "str", "obj", "arr", "bool"}
	if got := ids(page); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	s, _ = ParseSort("-v")
	page, _, _ = Page(docs, PageRequest{Sort: s, Limit: 100, Key: testKey})
	slices.Reverse(want)
	want[6], want[7] = "missing", "null" // the _id tie-break stays ascending
	if got := ids(page); !slices.Equal(got, want) {
		t.Errorf("descending: got %v, want %v", got, want)
	}
}

// TestPageUnderChanges checks that documents which do not change are each
// returned exactly once while others are inserted and deleted between pages.
func TestPageUnderChanges(t *testing.T) {
	docs := testDocs(5, 300)
	stable := map[string]bool{}
	for _, d := range docs[:200] {
		stable[d["_id"].(string)] = true
	}
	s, _ := ParseSort("-v,w")
	seen := map[string]int{}
	after := ""
	extra := testDocs(6, 300)
	for i := 0; ; i++ {
		page, next, err := Page(docs, PageRequest{Sort: s, Limit: 13, After: after, Key: testKey})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			seen[d["_id"].(string)]++
		}
		if next == "" {
			break
		}
		after = next
		// Delete an unstable document and insert a new one.
		docs = slices.DeleteFunc(docs, func(d map[string]any) bool {
			return !stable[d["_id"].(string)] && d["_id"] == docs[len(docs)-1]["_id"]
		})
		e := extra[i%len(extra)]
		e["_id"] = fmt.Sprintf("new%d", i)
		docs = append(docs, e)
	}
	for id := range stable {
		if seen[id] != 1 {
			t.Errorf("stable document %s returned %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("document %s returned %d times", id, n)
		}
	}
}

func TestPageDoesNotModifyInput(t *testing.T) {
	docs := testDocs(2, 50)
	before := ids(docs)
	s, _ := ParseSort("v")
	if _, _, err := Page(docs, PageRequest{Sort: s, Limit: 10, Key: testKey}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(docs), before) {
		t.Error("Page modified its input")
	}
}

func TestPageEmptyAndExact(t *testing.T) {
	page, next, err := Page(nil, PageRequest{Limit: 10, Key: testKey})
	if err != nil || len(page) != 0 || next != "" {
		t.Fatalf("empty input: %v %q %v", page, next, err)
	}
	docs := testDocs(3, 20)
	page, next, err = Page(docs, PageRequest{Limit: 20, Key: testKey})
	if err != nil || len(page) != 20 || next != "" {
		t.Fatalf("exactly one page: %d %q %v", len(page), next, err)
	}
	page, next, err = Page(docs, PageRequest{Limit: 10, Key: testKey})
	if err != nil || len(page) != 10 || next == "" {
		t.Fatalf("first of two pages: %d %q %v", len(page), next, err)
	}
	// A different limit may be used with the same cursor.
	page, next, err = Page(docs, PageRequest{Limit: 15, After: next, Key: testKey})
	if err != nil || len(page) != 10 || next != "" {
		t.Fatalf("second page: %d %q %v", len(page), next, err)
	}
}

func TestPageProgrammingErrors(t *testing.T) {
	for _, req := range []PageRequest{{Limit: 0, Key: testKey}, {Limit: -1, Key: testKey}, {Limit: 1}} {
		_, _, err := Page(nil, req)
		var qe *Error
		if err == nil || errors.As(err, &qe) {
			t.Errorf("Page(%+v): got %v, want a non-*Error error", req, err)
		}
	}
}

// firstCursor returns the cursor after the first page of a query.
func firstCursor(t *testing.T, docs []map[string]any, filter, sort string) string {
	t.Helper()
	f, err := ParseFilter(filter)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSort(sort)
	if err != nil {
		t.Fatal(err)
	}
	_, next, err := Page(docs, PageRequest{Filter: f, Sort: s, Limit: 3, FilterText: filter, Key: testKey})
	if err != nil || next == "" {
		t.Fatalf("no cursor: %v", err)
	}
	return next
}

func TestCursorTampering(t *testing.T) {
	docs := testDocs(4, 40)
	for _, d := range docs {
		d["v"] = map[string]any{"s": "some string", "n": 1.5, "a": []any{int64(1), true, nil}}
	}
	const filter = `{"w": {"$gte": 0}}`
	cursor := firstCursor(t, docs, filter, "-v,o.x")
	f, _ := ParseFilter(filter)
	s, _ := ParseSort("-v,o.x")
	try := func(after string, key []byte) error {
		_, _, err := Page(docs, PageRequest{Filter: f, Sort: s, Limit: 3, After: after, FilterText: filter, Key: key})
		return err
	}
	if err := try(cursor, testKey); err != nil {
		t.Fatalf("valid cursor refused: %v", err)
	}
	// Flip every bit of every byte.
	for i := range len(cursor) {
		for bit := range 8 {
			b := []byte(cursor)
			b[i] ^= 1 << bit
			if err := try(string(b), testKey); err == nil {
				t.Fatalf("cursor with bit %d of byte %d flipped was accepted", bit, i)
			} else {
				wantQueryError(t, err, "flipped cursor")
			}
		}
	}
	bad := []string{
		cursor[:len(cursor)-1], cursor[1:], cursor + "A", cursor + "=", cursor + "\n", "\n" + cursor,
		cursor[:10] + "\n" + cursor[10:], "x", "!!!!", "AAAA", strings.Repeat("A", 100),
	}
	for _, c := range bad {
		wantQueryError(t, try(c, testKey), fmt.Sprintf("cursor %q", c))
	}
	if err := try(cursor, []byte("another key")); !errors.Is(err, errBadCursor) {
		t.Errorf("wrong key: got %v", err)
	}
	// The same cursor with another filter text or another sort.
	for _, other := range []struct{ filter, sort string }{
		{`{"w": {"$gte": 1}}`, "-v,o.x"},
		{` {"w": {"$gte": 0}}`, "-v,o.x"},
		{filter, "v,o.x"},
		{filter, "-v"},
		{filter, "-v,o.x,w"},
		{filter, "-v,o.x,_id"},
	} {
		f2, err := ParseFilter(other.filter)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := ParseSort(other.sort)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = Page(docs, PageRequest{Filter: f2, Sort: s2, Limit: 3, After: cursor, FilterText: other.filter, Key: testKey})
		if other.sort == "-v,o.x,_id" { // equivalent to "-v,o.x"
			if err != nil {
				t.Errorf("equivalent sort %q refused: %v", other.sort, err)
			}
			continue
		}
		if !errors.Is(err, errForeignCursor) {
			t.Errorf("cursor reused with filter %s sort %q: got %v, want %v", other.filter, other.sort, err, errForeignCursor)
		}
	}
}

func TestCursorVersionAndCount(t *testing.T) {
	s, _ := ParseSort("v")
	binding := cursorBinding(s, "")
	// A correctly signed cursor of another version.
	payload := append([]byte{cursorVersion + 1}, binding[:]...)
	payload = append(payload, 0)
	c := base64.RawURLEncoding.EncodeToString(append(payload, cursorMAC(testKey, payload)...))
	if _, err := decodeCursor(c, testKey, binding, 2); !errors.Is(err, errOldCursor) {
		t.Errorf("other version: got %v", err)
	}
	// A correctly signed cursor with the wrong number of values.
	c, err := encodeCursor(testKey, binding, []any{int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeCursor(c, testKey, binding, 2); !errors.Is(err, errForeignCursor) {
		t.Errorf("wrong count: got %v", err)
	}
	// Trailing bytes after the values.
	payload = append([]byte{cursorVersion}, binding[:]...)
	payload = append(payload, 1, tagNull, tagNull)
	c = base64.RawURLEncoding.EncodeToString(append(payload, cursorMAC(testKey, payload)...))
	if _, err := decodeCursor(c, testKey, binding, 1); !errors.Is(err, errBadCursor) {
		t.Errorf("trailing bytes: got %v", err)
	}
}

// TestCursorValuesExact checks that sort values survive a cursor exactly.
func TestCursorValuesExact(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	var binding [bindingSize]byte
	for range 2000 {
		vals := []any{randomValue(r, 0), randomValue(r, 0), "\xff\xfe invalid UTF-8", math.Copysign(0, -1)}
		c, err := encodeCursor(testKey, binding, vals)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeCursor(c, testKey, binding, len(vals))
		if err != nil {
			t.Fatal(err)
		}
		for i := range vals {
			a, _ := appendValue(nil, vals[i], 0)
			b, _ := appendValue(nil, got[i], 0)
			if string(a) != string(b) || Compare(vals[i], got[i]) != 0 {
				t.Fatalf("value %#v came back as %#v", vals[i], got[i])
			}
		}
	}
	// Go integer types are encoded as int64.
	c, _ := encodeCursor(testKey, binding, []any{7, float32(0.5)})
	got, _ := decodeCursor(c, testKey, binding, 2)
	if got[0] != int64(7) || got[1] != 0.5 {
		t.Errorf("got %#v", got)
	}
}

// A page sorted by _id, given its documents in id order from after its
// cursor and stopped as soon as the pager is full, is the page the whole
// collection gives, with the same cursor; and it stops at the first
// matching document past the page (TestQueriesInKeyOrderStopAtTheirLimit
// in package api shows the store reads no further).
func TestAPageInKeyOrderStopsWhenFull(t *testing.T) {
	docs := testDocs(2, 300)
	slices.SortFunc(docs, func(a, b map[string]any) int { return strings.Compare(a["_id"].(string), b["_id"].(string)) })
	for _, filter := range []string{``, `{"w": {"$ne": 2}}`, `{"v": {"$type": "string"}}`, `{"_id": "none"}`} {
		f, _ := ParseFilter(filter)
		for _, sort := range []string{"", "_id"} {
			s, _ := ParseSort(sort)
			for _, limit := range []int{1, 7, 1000} {
				for _, maxBytes := range []int64{0, 2500} {
					req := PageRequest{Filter: f, Sort: s, Limit: limit, FilterText: filter, Key: testKey, MaxBytes: maxBytes}
					var got []map[string]any
					for pages := 0; ; pages++ {
						whole, err := NewPager(req)
						if err != nil {
							t.Fatal(err)
						}
						early, _ := NewPager(req)
						afterID, ok := early.InKeyOrder()
						if !ok {
							t.Fatalf("sort %q: not in key order", sort)
						}
						read, past := 0, 0
						for _, d := range docs {
							if err := whole.Add(d, 1000); err != nil {
								t.Fatal(err)
							}
							if d["_id"].(string) <= afterID || early.Full() {
								continue
							}
							read++
							if err := early.Add(d, 1000); err != nil {
								t.Fatal(err)
							}
							if early.Full() && f.Match(d) {
								past++
							}
						}
						w, _ := whole.Result()
						e, _ := early.Result()
						if !slices.Equal(ids(e.Docs), ids(w.Docs)) || past > 1 {
							t.Fatalf("filter %s sort %q limit %d bytes %d page %d: stopped early %v, whole %v (%d matches read past the page)",
								filter, sort, limit, maxBytes, pages, ids(e.Docs), ids(w.Docs), past)
						}
						if len(w.Docs) == 0 {
							break
						}
						wn, _ := w.Next(len(w.Docs) - 1)
						en, _ := e.Next(len(e.Docs) - 1)
						if wn != en {
							t.Fatalf("filter %s sort %q limit %d page %d: cursors differ", filter, sort, limit, pages)
						}
						got = append(got, e.Docs...)
						if wn == "" {
							break
						}
						req.After = wn
					}
					var want []map[string]any
					for _, d := range docs {
						if f.Match(d) {
							want = append(want, d)
						}
					}
					if !slices.Equal(ids(got), ids(want)) {
						t.Fatalf("filter %s sort %q limit %d bytes %d: pages give %d documents, want %d", filter, sort, limit, maxBytes, len(got), len(want))
					}
				}
			}
		}
	}
	for _, sort := range []string{"-_id", "v", "_id,v", "v,_id"} {
		s, _ := ParseSort(sort)
		p, _ := NewPager(PageRequest{Sort: s, Limit: 1, Key: testKey})
		if _, ok := p.InKeyOrder(); ok {
			t.Errorf("sort %q taken for key order", sort)
		}
	}
}

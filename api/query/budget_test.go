package query

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// unlimited is a budget no test reaches.
const unlimited = math.MaxInt64

func mustFilter(t testing.TB, s string) *Filter {
	t.Helper()
	f, err := ParseFilter(s)
	if err != nil {
		t.Fatalf("ParseFilter(%s): %v", s, err)
	}
	return f
}

func mustSort(t testing.TB, s string) Sort {
	t.Helper()
	so, err := ParseSort(s)
	if err != nil {
		t.Fatalf("ParseSort(%s): %v", s, err)
	}
	return so
}

// The example: a 5-clause $or of a regex that compiles to about
// 2,000 instructions, over one 100 KB document, took 11.7 s of CPU. Each
// test would cost about 2·10^8 units, so the first is refused before it
// runs and nothing is charged for it.
func TestBudgetRefusesCatastrophicRegex(t *testing.T) {
	clause := `{"s":{"$regex":"(?:a*){1000}b0"}}`
	f := mustFilter(t, `{"$or":[`+strings.Repeat(clause+",", 4)+clause+`]}`)
	d := map[string]any{"s": strings.Repeat("a", 100<<10)}
	b := NewBudget(DefaultBudget)
	ok, err := f.MatchWithin(d, b)
	if !errors.Is(err, ErrTooExpensive) || ok || !b.Exhausted() {
		t.Fatalf("MatchWithin = %v, %v (exhausted %v), want ErrTooExpensive", ok, err, b.Exhausted())
	}
	// Charged: the $or clause tried and the path's one value; the refused
	// regex test is not.
	if b.Used() != 2 {
		t.Fatalf("used %d units, want 2: the first regex must be refused before it runs", b.Used())
	}
	// The same regex over a short text is cheap enough.
	b = NewBudget(DefaultBudget)
	if ok, err := f.MatchWithin(map[string]any{"s": "aab0"}, b); err != nil || !ok {
		t.Fatalf("on a short text: %v, %v", ok, err)
	}
}

// Work the budget must bound besides regexes: an $in of 1,000 values
// tested against each element of a 100,000-element array, $and clauses that
// match everything, and sorting by a big array value.
func TestBudgetBoundsOtherWork(t *testing.T) {
	in := make([]string, 1000)
	for i := range in {
		in[i] = fmt.Sprint(-i - 1)
	}
	arr := make([]any, 100_000)
	for i := range arr {
		arr[i] = int64(i)
	}
	big := map[string]any{"a": arr}
	const limit = 1_000_000
	for _, tc := range []struct {
		name, filter, sort string
		docs               []map[string]any
	}{
		{"$in over a long array", `{"a":{"$in":[` + strings.Join(in, ",") + `]}}`, "", []map[string]any{big}},
		{"empty $and clauses", `{"$and":[` + strings.Repeat(`{},`, 5000) + `{}]}`, "", slices.Repeat([]map[string]any{{}}, 500)},
		{"sort by a long array", ``, "a", func() []map[string]any {
			docs := make([]map[string]any, 200)
			for i := range docs {
				docs[i] = map[string]any{"_id": fmt.Sprint(i), "a": arr}
			}
			return docs
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBudget(limit)
			_, _, err := Page(tc.docs, PageRequest{Filter: mustFilter(t, tc.filter), Sort: mustSort(t, tc.sort),
				Limit: 10, Key: testKey, Budget: b})
			if !errors.Is(err, ErrTooExpensive) {
				t.Fatalf("Page = %v, want ErrTooExpensive", err)
			}
			if b.Used() > limit {
				t.Fatalf("used %d units of %d", b.Used(), limit)
			}
		})
	}
}

// The work is counted exactly and deterministically: a page that needs U
// units passes with a budget of U, gives the same answer as without a
// budget, and fails with U-1.
func TestBudgetIsExact(t *testing.T) {
	docs := testDocs(3, 300)
	docs = append(docs, map[string]any{"_id": "s", "v": "x" + strings.Repeat("y", 1000), "o": map[string]any{"x": []any{"a", "b"}}})
	filters := []string{``, `{"w": {"$ne": 2}}`, `{"v": {"$type": ["number", "string", "null"]}}`,
		`{"$or": [{"v": {"$regex": "^a", "$options": "i"}}, {"tags.p": {"$in": [1, 2]}}]}`,
		`{"tags": {"$elemMatch": {"p": {"$gte": 1}}}, "o.x": {"$exists": true}}`,
		`{"$nor": [{"v": {"k": 1}}, {"v": [0, 1]}], "o": {"$not": {"$size": 2}}}`,
		`{"v": {"$all": [1]}, "w": {"$lt": 3}}`}
	for _, tt := range filterTests {
		filters = append(filters, tt.filter)
	}
	for _, filter := range filters {
		for _, sort := range []string{"", "v", "-o.x,w"} {
			req := PageRequest{Filter: mustFilter(t, filter), Sort: mustSort(t, sort), Limit: 25, Key: testKey, FilterText: filter}
			req.Budget = NewBudget(unlimited)
			want, wantNext, err := Page(docs, req)
			if err != nil {
				t.Fatal(err)
			}
			used := req.Budget.Used()
			req.Budget = NewBudget(used)
			got, next, err := Page(docs, req)
			if err != nil || next != wantNext || !slices.Equal(ids(got), ids(want)) || req.Budget.Used() != used {
				t.Fatalf("filter %s sort %q with exactly the %d units it needs: %v, %d units used", filter, sort, used, err, req.Budget.Used())
			}
			req.Budget = NewBudget(used - 1)
			if _, _, err := Page(docs, req); !errors.Is(err, ErrTooExpensive) {
				t.Fatalf("filter %s sort %q with one unit less than the %d it needs: %v", filter, sort, used, err)
			}
			// Without a budget the answer is the same.
			req.Budget = nil
			if got, next, err := Page(docs, req); err != nil || next != wantNext || !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("filter %s sort %q without a budget: a different page", filter, sort)
			}
		}
	}
}

// smallDocs returns n documents like those of an ordinary application:
// about 250 bytes of JSON each.
func smallDocs(n int) []map[string]any {
	r := rand.New(rand.NewPCG(11, 12))
	names := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	cities := []string{"Paris", "Lyon", "Berlin", "Madrid", "Rome", "Oslo"}
	docs := make([]map[string]any, n)
	for i := range docs {
		tags := make([]any, r.IntN(4))
		for j := range tags {
			tags[j] = fmt.Sprintf("tag%d", r.IntN(20))
		}
		docs[i] = map[string]any{
			"_id":      fmt.Sprintf("%026d", i),
			"_version": int64(1 + r.IntN(3)),
			"name":     fmt.Sprintf("%s %s-%d", names[r.IntN(len(names))], names[r.IntN(len(names))], i),
			"age":      int64(18 + r.IntN(60)),
			"active":   r.IntN(2) == 0,
			"tags":     tags,
			"address":  map[string]any{"city": cities[r.IntN(len(cities))], "zip": fmt.Sprintf("%05d", r.IntN(99999))},
			"note":     strings.Repeat("lorem ipsum ", 1+r.IntN(8)),
		}
	}
	return docs
}

// The default budget lets ordinary queries over 20,000 small documents
// pass with room to spare; the units they use are logged.
func TestDefaultBudgetFitsOrdinaryQueries(t *testing.T) {
	docs := smallDocs(20_000)
	for _, q := range []struct{ filter, sort string }{
		{``, ``},
		{``, `-age,name`},
		{`{"age": {"$gte": 30, "$lt": 50}, "active": true}`, `name`},
		{`{"address.city": {"$in": ["Paris", "Lyon", "Oslo"]}, "tags": "tag3"}`, `-_version`},
		{`{"name": {"$regex": "^bob"}}`, ``},
		{`{"name": {"$regex": "carol", "$options": "i"}}`, `address.city,-age`},
		{`{"note": {"$regex": "ipsum\\s+lorem"}, "$or": [{"tags": {"$size": 0}}, {"age": {"$lte": 20}}]}`, ``},
		{`{"$and": [{"tags": {"$all": ["tag1", "tag2"]}}, {"address": {"$elemMatch": {"$exists": true}}}, {"name": {"$not": {"$regex": "e"}}}]}`, `-name`},
	} {
		b := NewBudget(DefaultBudget)
		if _, _, err := Page(docs, PageRequest{Filter: mustFilter(t, q.filter), Sort: mustSort(t, q.sort), Limit: 1000, Key: testKey, Budget: b}); err != nil {
			t.Fatalf("filter %s sort %q over %d documents: %v", q.filter, q.sort, len(docs), err)
		}
		if b.Used() > DefaultBudget/2 {
			t.Errorf("filter %s sort %q used %d units, more than half the default budget", q.filter, q.sort, b.Used())
		}
		t.Logf("%9d units: filter %s sort %q", b.Used(), q.filter, q.sort)
	}
}

// docSize is a stand-in for a document's stored size.
func docSize(d map[string]any) int64 { return int64(len(fmt.Sprint(d))) }

// A page cut by its writer to a byte bound, at any document, continues
// with the cursor of the last document written; paging so returns every
// matching document exactly once, in order. The pager keeps no more
// documents than the bound needs.
func TestPagerByteBound(t *testing.T) {
	docs := testDocs(5, 150)
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range docs {
		d["pad"] = strings.Repeat("p", r.IntN(300))
	}
	for _, tc := range []struct {
		filter, sort string
		limit        int
		maxBytes     int64
	}{
		{``, ``, 1000, 4000}, {``, `v,-w`, 50, 2000}, {`{"w": {"$ne": 1}}`, `-o.x`, 1000, 100}, {``, `tags.p`, 7, 1 << 20},
	} {
		f, s := mustFilter(t, tc.filter), mustSort(t, tc.sort)
		var want []map[string]any
		for _, d := range docs {
			if f.Match(d) {
				want = append(want, d)
			}
		}
		slices.SortFunc(want, s.Compare)
		var got []map[string]any
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(docs) {
				t.Fatalf("%+v: paging does not end", tc)
			}
			p, err := NewPager(PageRequest{Filter: f, Sort: s, Limit: tc.limit, After: after, FilterText: tc.filter, Key: testKey, MaxBytes: tc.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range r.Perm(len(docs)) {
				if err := p.Add(docs[i], docSize(docs[i])); err != nil {
					t.Fatal(err)
				}
			}
			res, err := p.Result()
			if err != nil {
				t.Fatal(err)
			}
			// The pager keeps documents up to the first that reaches the
			// bound, and no more than the limit.
			var kept int64
			for i, d := range res.Docs {
				if i > 0 && kept >= tc.maxBytes || i >= tc.limit {
					t.Fatalf("%+v: the pager kept %d documents; the first %d already hold %d bytes", tc, len(res.Docs), i, kept)
				}
				kept += docSize(d)
			}
			// The writer cuts at a random document (at least one).
			n := len(res.Docs)
			if n > 1 {
				n = 1 + r.IntN(n)
			}
			if n == 0 {
				break
			}
			got = append(got, res.Docs[:n]...)
			if after, err = res.Next(n - 1); err != nil {
				t.Fatal(err)
			}
			if after == "" {
				break
			}
		}
		if !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("%+v: paging returned %d documents, want %d in order", tc, len(got), len(want))
		}
	}
}

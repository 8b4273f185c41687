package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shoal-db/shoal/store"
)

// A page sorted by _id (the default) reads the collection in id order from
// after its cursor and stops at the first match past its limit: the
// documents it evaluates are about what it returns, not the collection. A
// page with another sort reads every document.
func TestQueriesInKeyOrderStopAtTheirLimit(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: t.TempDir(), Database: "shoal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	wr := store.NewWriter(st, 1, store.WriterOptions{})
	t.Cleanup(func() { wr.Close(context.Background()) })
	s := New(Config{NodeID: "n1", PartitionCount: 1, MaxBodyBytes: 1 << 20, Insecure: true}, st, wr)
	var evaluated atomic.Int32
	s.queryHook = func(context.Context) { evaluated.Add(1) }
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	const total = 500
	for i := range total {
		req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/v1/users/u/collections/c/documents/d%03d", hs.URL, i), strings.NewReader(fmt.Sprintf(`{"odd":%v}`, i%2 == 1)))
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("seeding: status %d", resp.StatusCode)
		}
	}
	page := func(query string) (ids []string, next string, read int32) {
		t.Helper()
		evaluated.Store(0)
		resp, err := hs.Client().Get(hs.URL + "/v1/users/u/collections/c/documents?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Documents []struct {
				ID string `json:"_id"`
			} `json:"documents"`
			Next string `json:"next"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", query, resp.StatusCode, err)
		}
		for _, d := range out.Documents {
			ids = append(ids, d.ID)
		}
		return ids, out.Next, evaluated.Load()
	}
	ids, next, read := page("limit=10")
	if len(ids) != 10 || ids[0] != "d000" || ids[9] != "d009" || next == "" || read != 11 {
		t.Fatalf("the first 10: %v next %q, %d documents read; want d000..d009, a cursor, 11 read", ids, next, read)
	}
	ids, _, read = page("limit=10&after=" + url.QueryEscape(next))
	if len(ids) != 10 || ids[0] != "d010" || read != 11 {
		t.Fatalf("the next 10: %v, %d documents read; want d010.., 11 read", ids, read)
	}
	filter := url.QueryEscape(`{"odd":true}`)
	ids, next, read = page("limit=5&filter=" + filter)
	if len(ids) != 5 || ids[0] != "d001" || ids[4] != "d009" || read != 12 {
		t.Fatalf("5 odd ones: %v, %d documents read; want d001..d009, 12 read (up to d011, the sixth match)", ids, read)
	}
	if _, _, read = page("limit=5&filter=" + filter + "&after=" + url.QueryEscape(next)); read != 12 {
		t.Fatalf("the next 5 odd ones read %d documents, want 12 (d010..d021, d021 the sixth match)", read)
	}
	ids, next, read = page("limit=1000")
	if len(ids) != total || next != "" || read != total {
		t.Fatalf("all of them: %d, next %q, %d read", len(ids), next, read)
	}
	for _, sort := range []string{"-_id", "odd"} {
		if ids, _, read = page("limit=10&sort=" + sort); len(ids) != 10 || read != total {
			t.Fatalf("sorted by %s: %d documents, %d read; want 10, and every document read", sort, len(ids), read)
		}
	}
}

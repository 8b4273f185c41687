package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// A linearizable query page of the registers is recorded as a read of
// each register of the current round it covers, with the page's call and
// return: the state it holds, or absent; a register past the page's last
// when it has a next page is not covered, and a failed query records
// nothing. A majority page is recorded the same way, as majority reads.
func TestAQueryPageIsAReadOfEachRegisterItCovers(t *testing.T) {
	var answer string
	var status int
	concern := "linearizable"
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Read-Concern") != concern || r.URL.Path != "/v1/users/r/collections/registers/documents" {
			t.Errorf("asked %s with read concern %q", r.URL.Path, r.Header.Get("X-Read-Concern"))
		}
		rw.WriteHeader(status)
		rw.Write([]byte(answer))
	}))
	defer srv.Close()
	w := NewWorkload([]Target{{ID: "n1", URL: srv.URL}}, WorkloadOptions{Token: "t", RegisterUser: "r"})
	w.Round(2) // the registers: a1 b1 c1, then a2 b2 c2
	cl := &client{id: 1, rng: rand.New(rand.NewPCG(1, 1)), hc: &http.Client{Timeout: time.Second}, avoid: map[string]time.Time{}}

	// b2 is the page's last and more follow: c2 is not covered, a1 and
	// b1 are of the round before.
	status, answer = 200, `{"documents":[{"_id":"a1","v":"w","_version":1},{"_id":"a2","v":"x","_version":2},{"_id":"b2","v":"y","_version":5}],"next":"cursor"}`
	w.query(context.Background(), cl, ReadLinearizable)
	status, answer = 503, `{"type":"urn:shoal:problem:unavailable"}`
	w.query(context.Background(), cl, ReadLinearizable)
	h := w.History()
	var got []string
	for _, op := range h.ops {
		got = append(got, describeOp(op.Input, op.Output))
	}
	want := []string{`query-linearizable(a2) -> "x" v2`, `query-linearizable(b2) -> "y" v5`}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	if h.QueryPages[ReadLinearizable] != 1 || h.QueryReads[ReadLinearizable] != 2 {
		t.Fatalf("%d query pages, %d reads from them: want 1 and 2", h.QueryPages[ReadLinearizable], h.QueryReads[ReadLinearizable])
	}
	// The whole collection on one page: the round's three registers are
	// covered, c2 absent.
	status, answer = 200, `{"documents":[{"_id":"a2","v":"x","_version":2}]}`
	w.query(context.Background(), cl, ReadLinearizable)
	if n := len(w.History().ops) - len(h.ops); n != 3 {
		t.Fatalf("a page without a next one recorded %d reads, want 3", n)
	}
	concern = "majority"
	before := len(w.History().ops)
	w.query(context.Background(), cl, ReadMajority)
	h = w.History()
	got = nil
	for _, op := range h.ops[before:] {
		got = append(got, describeOp(op.Input, op.Output))
	}
	want = []string{`query-majority(a2) -> "x" v2`, `query-majority(b2) -> absent`, `query-majority(c2) -> absent`}
	if !slices.Equal(got, want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	if h.QueryPages[ReadMajority] != 1 || h.QueryReads[ReadMajority] != 3 || h.QueryPages[ReadLinearizable] != 2 {
		t.Fatalf("query pages %v, reads from them %v: want 2 linearizable and 1 majority page, 3 majority reads", h.QueryPages, h.QueryReads)
	}
}

// A client's local or majority read of a register it wrote sends the
// token of its last acknowledged write of it, and is recorded with that
// write's version.
func TestALocalOrMajorityReadSendsTheTokenOfItsClientsLastWrite(t *testing.T) {
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "PUT":
			rw.Header().Set("ETag", `"4"`)
			rw.Header().Set("X-Consistency-Token", "tok-4")
			rw.WriteHeader(200)
		case "GET":
			sent = append(sent, r.Header.Get("X-Consistency-Token"))
			rw.Write([]byte(`{"v":"x","_version":4}`))
		}
	}))
	defer srv.Close()
	w := NewWorkload([]Target{{ID: "n1", URL: srv.URL}}, WorkloadOptions{Token: "t", RegisterUser: "r"})
	cl := &client{id: 1, rng: rand.New(rand.NewPCG(1, 1)), hc: &http.Client{Timeout: time.Second}, avoid: map[string]time.Time{}, own: map[string]ownWrite{}}
	ctx := context.Background()
	w.read(ctx, cl, "a1", ReadLocal) // nothing written yet: no token
	w.write(ctx, cl, regInput{Doc: "a1", Kind: opPut, Value: "x"})
	w.read(ctx, cl, "a1", ReadLocal)
	w.read(ctx, cl, "a1", ReadMajority)
	w.read(ctx, cl, "a1", ReadLinearizable) // a linearizable read needs none
	if want := []string{"", "tok-4", "tok-4", ""}; !slices.Equal(sent, want) {
		t.Fatalf("tokens sent %q, want %q", sent, want)
	}
	var since []int64
	for _, op := range w.History().ops {
		if in := op.Input.(regInput); in.Kind == opRead {
			since = append(since, in.Since)
		}
	}
	if want := []int64{0, 4, 4, 0}; !slices.Equal(since, want) {
		t.Fatalf("reads recorded since %v, want %v", since, want)
	}
}

// A local or majority query page sends the token of its client's last
// write of any register (one partition holds them all), and each register
// it covers is recorded as a read since that client's own last write of
// it; a linearizable page sends none.
func TestALocalOrMajorityQueryPageSendsTheTokenOfItsClientsLastWrite(t *testing.T) {
	var sent []string
	version := 0
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case "PUT":
			version++
			rw.Header().Set("ETag", fmt.Sprintf(`"%d"`, version))
			rw.Header().Set("X-Consistency-Token", fmt.Sprintf("tok-%d", version))
			rw.WriteHeader(200)
		case "GET":
			sent = append(sent, r.Header.Get("X-Consistency-Token"))
			rw.Write([]byte(`{"documents":[{"_id":"a1","v":"x","_version":1},{"_id":"b1","v":"y","_version":2}]}`))
		}
	}))
	defer srv.Close()
	w := NewWorkload([]Target{{ID: "n1", URL: srv.URL}}, WorkloadOptions{Token: "t", RegisterUser: "r"})
	cl := &client{id: 1, rng: rand.New(rand.NewPCG(1, 1)), hc: &http.Client{Timeout: time.Second}, avoid: map[string]time.Time{}, own: map[string]ownWrite{}}
	ctx := context.Background()
	w.query(ctx, cl, ReadLocal) // nothing written yet: no token
	w.write(ctx, cl, regInput{Doc: "a1", Kind: opPut, Value: "x"})
	w.write(ctx, cl, regInput{Doc: "b1", Kind: opPut, Value: "y"})
	w.query(ctx, cl, ReadLocal)
	w.query(ctx, cl, ReadMajority)
	w.query(ctx, cl, ReadLinearizable)
	if want := []string{"", "tok-2", "tok-2", ""}; !slices.Equal(sent, want) {
		t.Fatalf("tokens sent %q, want %q", sent, want)
	}
	var got []string
	for _, op := range w.History().ops {
		if in := op.Input.(regInput); in.Kind == opRead {
			got = append(got, fmt.Sprintf("%s %s since %d %q", in.Concern, in.Doc, in.Since, in.SinceValue))
		}
	}
	want := []string{`local a1 since 0 ""`, `local b1 since 0 ""`, `local c1 since 0 ""`,
		`local a1 since 1 "x"`, `local b1 since 2 "y"`, `local c1 since 0 ""`,
		`majority a1 since 1 "x"`, `majority b1 since 2 "y"`, `majority c1 since 0 ""`,
		`linearizable a1 since 0 ""`, `linearizable b1 since 0 ""`, `linearizable c1 since 0 ""`}
	if !slices.Equal(got, want) {
		t.Fatalf("reads recorded:\n%q\nwant\n%q", got, want)
	}
	if h := w.History(); h.QueryPages[ReadLocal] != 2 || h.QueryReads[ReadLocal] != 6 {
		t.Fatalf("%d local query pages, %d reads from them: want 2 and 6", h.QueryPages[ReadLocal], h.QueryReads[ReadLocal])
	}
}

// While a node is aimed at (an isolated master), half the majority reads
// and query pages go to it, and no other read; once the aim is cleared,
// none.
func TestMajorityReadsAimAtAnIsolatedMaster(t *testing.T) {
	hits := map[string]map[string]int{}      // node -> read concern -> reads
	tokenless := map[string]map[string]int{} // of them, those sent without a token
	serve := func(id string) *httptest.Server {
		hits[id], tokenless[id] = map[string]int{}, map[string]int{}
		return httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			hits[id][r.Header.Get("X-Read-Concern")]++
			if r.Header.Get("X-Consistency-Token") == "" {
				tokenless[id][r.Header.Get("X-Read-Concern")]++
			}
			rw.Write([]byte(`{"v":"x","_version":4}`))
		}))
	}
	n1, n2 := serve("n1"), serve("n2")
	defer n1.Close()
	defer n2.Close()
	w := NewWorkload([]Target{{ID: "n1", URL: n1.URL}, {ID: "n2", URL: n2.URL}}, WorkloadOptions{Token: "t", RegisterUser: "r"})
	// The client wrote a1: its local and majority reads send a token, but
	// for the aimed ones (the isolated master is behind its successor's
	// tokens, and would answer 503 rather than what it holds).
	cl := &client{id: 1, rng: rand.New(rand.NewPCG(1, 1)), hc: &http.Client{Timeout: time.Second}, avoid: map[string]time.Time{},
		own: map[string]ownWrite{"a1": {token: "tok-4", version: 4, value: "x"}}, lastToken: "tok-4"}
	ctx := context.Background()
	// toN2 is how many of 400 reads (or query pages) of concern went to
	// n2: about 300 when aimed at it, about 200 at random.
	const n, half = 400, 250
	toN2 := func(concern ReadConcern, page bool) int {
		before := hits["n2"][string(concern)]
		for range n {
			if page {
				w.query(ctx, cl, concern)
			} else {
				w.read(ctx, cl, "a1", concern)
			}
		}
		return hits["n2"][string(concern)] - before
	}
	w.Aim("n2")
	if m := toN2(ReadMajority, false); m < half || m == n {
		t.Fatalf("aimed at n2, %d of %d majority reads went to it: want about three in four", m, n)
	}
	if m := toN2(ReadMajority, true); m < half || m == n {
		t.Fatalf("aimed at n2, %d of %d majority query pages went to it: want about three in four", m, n)
	}
	if l := toN2(ReadLocal, false); l >= half {
		t.Fatalf("aimed at n2, %d of %d local reads went to it: only majority reads are aimed", l, n)
	}
	// About 400 aimed reads and pages, all without a token; none else.
	if a := tokenless["n2"][string(ReadMajority)]; a < 300 || tokenless["n1"][string(ReadMajority)] > 0 || tokenless["n2"][string(ReadLocal)] > 0 {
		t.Fatalf("reads without a token: %v; want about 400 majority ones at n2, none at n1, no local one", tokenless)
	}
	w.Aim("")
	if m := toN2(ReadMajority, false); m >= half {
		t.Fatalf("with no aim, %d of %d majority reads went to n2", m, n)
	}
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/api/wire"
)

// Which failures a call is tried again after: a write only after one that
// proves it was not applied, a read after any a node may not repeat.
func TestRetryable(t *testing.T) {
	answer := func(status int, typ string) error {
		e := &HTTPError{StatusCode: status}
		if typ != "" {
			e.Problem = &api.Problem{Type: typ, Status: status}
		}
		return e
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	// A real dial timeout: net's error matches context.DeadlineExceeded
	// too, yet nothing was sent.
	_, dialTimeout := (&net.Dialer{Deadline: time.Now().Add(-time.Second)}).Dial("tcp", "127.0.0.1:1")
	if !errors.Is(dialTimeout, context.DeadlineExceeded) || !isDialError(dialTimeout) {
		t.Fatalf("a dial past its deadline answered %v, not a dial timeout", dialTimeout)
	}
	for _, tc := range []struct {
		name        string
		err         error
		write, read bool
	}{
		{"421 not the master", answer(421, api.TypeMisdirected), true, true},
		{"503 unavailable: nothing written", answer(503, api.TypeUnavailable), true, true},
		{"503 outcome unknown: the lease ran out after the commit", answer(503, api.TypeTimeout), false, true},
		{"503 of a proxy, no problem", answer(503, ""), false, true},
		{"504 write concern not met", answer(504, api.TypeTimeout), false, false},
		{"500 internal", answer(500, api.TypeInternal), false, false},
		{"502 of a proxy", answer(502, ""), false, false},
		{"409 already exists", answer(409, api.TypeAlreadyExists), false, false},
		{"412 precondition failed", answer(412, api.TypePreconditionFailed), false, false},
		{"404 not found", answer(404, api.TypeNotFound), false, false},
		{"a refused dial: never sent", fmt.Errorf("Post: %w", refused), true, true},
		{"a connection reset, read: sent or not", fmt.Errorf("Get: %w", reset), true, true},
		{"a write unanswered after it was sent", &UnansweredError{Err: reset}, false, false},
		{"the caller's context ended", fmt.Errorf("Get: %w", context.DeadlineExceeded), false, false},
		{"the caller cancelled", context.Canceled, false, false},
		{"a dial that timed out: never sent", fmt.Errorf("Post: %w", dialTimeout), true, true},
		{"a 200 whose body broke off", &bodyError{err: errors.New("unexpected EOF")}, false, true},
		{"a 200 that is not Shoal's", &AnswerError{What: "document"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryable(true, tc.err); got != tc.write {
				t.Errorf("write: retryable %v, want %v", got, tc.write)
			}
			if got := retryable(false, tc.err); got != tc.read {
				t.Errorf("read: retryable %v, want %v", got, tc.read)
			}
		})
	}
}

// ErrOutcomeUnknown matches exactly the failures of a write that the
// client does not send again for not knowing whether it was applied.
func TestOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		method string
		status int
		typ    string
		want   bool
	}{
		{"POST", 504, api.TypeTimeout, true},
		{"PUT", 503, api.TypeTimeout, true},
		{"DELETE", 503, "", true},
		{"PATCH", 500, api.TypeInternal, true},
		{"POST", 503, api.TypeUnavailable, false},
		{"POST", 421, api.TypeMisdirected, false},
		{"PUT", 412, api.TypePreconditionFailed, false},
		{"GET", 504, api.TypeTimeout, false},
		{"GET", 503, api.TypeTimeout, false},
	} {
		e := &HTTPError{Method: tc.method, StatusCode: tc.status}
		if tc.typ != "" {
			e.Problem = &api.Problem{Type: tc.typ}
		}
		if got := errors.Is(e, ErrOutcomeUnknown); got != tc.want {
			t.Errorf("%s answered %d %s: ErrOutcomeUnknown %v, want %v", tc.method, tc.status, tc.typ, got, tc.want)
		}
	}
	u := &UnansweredError{Method: "POST", Err: fmt.Errorf("Post: %w", syscall.ECONNRESET)}
	if !errors.Is(u, ErrOutcomeUnknown) || !errors.Is(u, syscall.ECONNRESET) {
		t.Errorf("%v: not ErrOutcomeUnknown or not ECONNRESET", u)
	}
	// A write answered 2xx whose answer broke off was applied: the caller
	// must read before writing again.
	if b := (&bodyError{err: io.ErrUnexpectedEOF, write: true}); !errors.Is(b, ErrOutcomeUnknown) || !errors.Is(b, io.ErrUnexpectedEOF) {
		t.Errorf("%v: a write's broken answer is not ErrOutcomeUnknown", b)
	}
	if b := (&bodyError{err: io.ErrUnexpectedEOF}); errors.Is(b, ErrOutcomeUnknown) {
		t.Errorf("%v: a read's broken answer is ErrOutcomeUnknown", b)
	}
}

// The waits double from Backoff up to MaxBackoff, each drawn between half
// and all of it, and are at least a Retry-After up to MaxRetryAfter.
func TestWait(t *testing.T) {
	r := Retry{Attempts: 9, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRetryAfter: 3 * time.Second}
	for _, tc := range []struct {
		n          int
		retryAfter time.Duration
		r01        float64
		want       time.Duration
	}{
		{1, 0, 0, 50 * time.Millisecond},
		{1, 0, 0.999999, 100 * time.Millisecond},
		{2, 0, 0.5, 150 * time.Millisecond},
		{4, 0, 0, 400 * time.Millisecond},
		{5, 0, 0.999999, time.Second},
		{30, 0, 0, 500 * time.Millisecond},
		{1, time.Second, 0, time.Second},
		{1, time.Minute, 0, 3 * time.Second},
		{5, 100 * time.Millisecond, 0.999999, time.Second},
	} {
		if got := r.wait(tc.n, tc.retryAfter, tc.r01); got < tc.want-time.Millisecond || got > tc.want {
			t.Errorf("wait(%d, %s, %v) = %s, want %s", tc.n, tc.retryAfter, tc.r01, got, tc.want)
		}
	}
	if d := (Retry{Attempts: 1}).withDefaults(); d.Attempts != 1 || d.Backoff != DefaultRetry().Backoff || d.MaxRetryAfter != DefaultRetry().MaxRetryAfter {
		t.Errorf("withDefaults %+v", d)
	}
	if d := (Retry{Backoff: 5 * time.Second}).withDefaults(); d.MaxBackoff != 5*time.Second || d.Attempts != DefaultRetry().Attempts {
		t.Errorf("withDefaults of a Backoff over the default MaxBackoff: %+v", d)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "1": time.Second, "120": 2 * time.Minute, "soon": 0, "-1": 0,
		now.Add(7 * time.Second).Format(http.TimeFormat): 7 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):      0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
}

// Where calls go as the client learns: the master for writes, the first
// node holding a copy for local reads, nodes that refused connections
// passed over, every node tried once before any twice, and an epoch never
// going back.
func TestRoutesChoose(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRoutes([]string{"http://a", "http://b", "http://c"}, func() time.Time { return now })
	if !r.needsLookup("alice", true) || r.needsLookup("alice", false) {
		t.Fatal("a user never looked up: a write looks it up, a read for a copy does not")
	}
	if got := r.choose("alice", true, nil); got != "http://a" {
		t.Errorf("nothing known: %s, want the first node", got)
	}
	view := api.PlacementView{Master: "n3", Epoch: 4, Responsible: []string{"n3", "n2"}}
	if r.learnView("http://a", "n1", "alice", view) {
		t.Error("the lookup stopped while the master's URL is not known")
	}
	if !r.needsLookup("alice", true) {
		t.Error("the master's URL not known, and not every id: look up")
	}
	if !r.learnView("http://c", "n3", "alice", view) {
		t.Error("the lookup went on once the master's URL was known")
	}
	if r.needsLookup("alice", true) || r.needsLookup("alice", false) {
		t.Error("a lookup with everything needed known")
	}
	if got := r.choose("alice", true, nil); got != "http://c" {
		t.Errorf("write: %s, want the master's node", got)
	}
	// b's id is not known yet: the first node holding a copy is c.
	if got := r.choose("alice", false, nil); got != "http://c" {
		t.Errorf("local read: %s, want c", got)
	}
	r.learnView("http://b", "n2", "alice", view)
	if got := r.choose("alice", false, nil); got != "http://b" {
		t.Errorf("local read: %s, want b, the first holding a copy", got)
	}

	// An older epoch is refused; a 421's master of an older epoch too.
	r.learnView("http://a", "n1", "alice", api.PlacementView{Master: "n1", Epoch: 3, Responsible: []string{"n1"}})
	r.learnMaster("alice", "n1", 2)
	if got := r.choose("alice", true, nil); got != "http://c" {
		t.Errorf("after older news: %s, want c still", got)
	}
	// A 421 naming a newer master is followed.
	r.learnMaster("alice", "n2", 5)
	if got := r.choose("alice", true, nil); got != "http://b" {
		t.Errorf("after a 421 naming n2 at epoch 5: %s, want b", got)
	}
	// A write served by another node teaches the master.
	r.servedWrite("alice", "n1")
	if got := r.choose("alice", true, nil); got != "http://a" {
		t.Errorf("after a write served by n1: %s, want a", got)
	}

	// a refuses connections: passed over for downFor, and every node was
	// tried: a new round, the nodes not down first.
	r.unreachable("http://a")
	if got := r.choose("alice", true, nil); got != "http://b" {
		t.Errorf("the master's node down: %s, want b", got)
	}
	all := map[string]bool{"http://a": true, "http://b": true, "http://c": true}
	if got := r.choose("alice", true, all); got != "http://b" {
		t.Errorf("every node tried: %s, want the first not down", got)
	}
	if got := r.lookupOrder("http://b"); !slices.Equal(got, []string{"http://c", "http://b"}) {
		t.Errorf("lookup order %v: the down node left out, the failed one last", got)
	}
	now = now.Add(downFor)
	if got := r.choose("alice", true, map[string]bool{"http://b": true}); got != "http://a" {
		t.Errorf("after downFor: %s, want a again", got)
	}

	// A failure marks the placement stale: looked up again.
	r.failed("alice")
	if !r.needsLookup("alice", true) || !r.needsLookup("alice", false) {
		t.Error("a stale placement not looked up again")
	}

	// A client of one node asks it, whatever it learns.
	one := newRoutes([]string{"http://only"}, time.Now)
	one.unreachable("http://only")
	if one.needsLookup("alice", true) || one.choose("alice", true, map[string]bool{"http://only": true}) != "http://only" {
		t.Error("a client of one node did not ask its node")
	}
}

// The placements remembered are bounded: a node that does not say the
// partition count (older than partition_count) has them kept per user.
func TestRoutesForget(t *testing.T) {
	r := newRoutes([]string{"http://a", "http://b"}, time.Now)
	for i := range maxPlaces + 1 {
		r.learnView("http://a", "n1", fmt.Sprint("u", i), api.PlacementView{Master: "n1", Epoch: 1})
	}
	if n := len(r.places); n != 1 {
		t.Errorf("%d placements remembered, want 1 after the reset", n)
	}
}

// Once a node says the partition count, a placement serves every user of
// its partition: a client writing as many users looks each partition up
// once. Kept per user, a client writing as more users than it remembered
// looked up before every call.
func TestRoutesKeepPlacementsPerPartition(t *testing.T) {
	r := newRoutes([]string{"http://a", "http://b"}, time.Now)
	r.learnView("http://a", "n1", "n1", api.PlacementView{})
	r.learnView("http://b", "n2", "n2", api.PlacementView{})
	const count = 8
	lookups := 0
	for i := range 20000 {
		user := fmt.Sprint("u", i)
		if !r.needsLookup(user, true) {
			continue
		}
		lookups++
		p := wire.PartitionOf(user, count)
		r.learnView("http://a", "n1", user, api.PlacementView{Partition: p, PartitionCount: count, Master: []string{"n1", "n2"}[p%2], Epoch: 1})
	}
	if lookups != count {
		t.Errorf("%d lookups for 20,000 users in %d partitions, want one per partition", lookups, count)
	}
	for i := range 100 {
		user := fmt.Sprint("v", i)
		want := []string{"http://a", "http://b"}[wire.PartitionOf(user, count)%2]
		if r.needsLookup(user, true) || r.choose(user, true, nil) != want {
			t.Fatalf("%s: a lookup needed %v, sent to %s; want %s at once", user, r.needsLookup(user, true), r.choose(user, true, nil), want)
		}
	}
	// A 421 and a write served elsewhere teach the partition's master,
	// for every user of it; an answer without the count (a node of an
	// older version) is of the user's partition all the same.
	var u1, u2 string
	for i := 0; u2 == ""; i++ {
		user := fmt.Sprint("x", i)
		switch {
		case wire.PartitionOf(user, count) != 3:
		case u1 == "":
			u1 = user
		default:
			u2 = user
		}
	}
	r.learnMaster(u1, "n2", 2)
	if got := r.choose(u2, true, nil); got != "http://b" {
		t.Errorf("after a 421 for %s naming n2: %s's write goes to %s, want b", u1, u2, got)
	}
	r.servedWrite(u2, "n1")
	if got := r.choose(u1, true, nil); got != "http://a" {
		t.Errorf("after %s's write served by n1: %s's goes to %s, want a", u2, u1, got)
	}
	r.learnView("http://b", "n2", u1, api.PlacementView{Partition: 3, Master: "n2", Epoch: 3})
	if got := r.choose(u2, true, nil); got != "http://b" || r.partitions != count {
		t.Errorf("after an answer without the count for %s: %s's write goes to %s (count %d), want b (%d)", u1, u2, got, r.partitions, count)
	}
	// A failure marks the partition's placement stale, for every user of it.
	r.failed("v0")
	p := wire.PartitionOf("v0", count)
	for i := range 100 {
		user := fmt.Sprint("w", i)
		if got, want := r.needsLookup(user, true), wire.PartitionOf(user, count) == p; got != want {
			t.Fatalf("%s after a failure in partition %d: lookup needed %v, want %v", user, p, got, want)
		}
	}
}

// Every partition's placement at once (GET /v1/placement): a call for any
// user whose partition has a master known at a known URL needs no
// lookup; an older epoch does not replace a newer one; a node that does
// not serve the table (404, or an answer that is not one) leaves lookups
// per user.
func TestRoutesLearnTheTable(t *testing.T) {
	r := newRoutes([]string{"http://a", "http://b"}, time.Now)
	r.learnView("http://b", "n2", "n2", api.PlacementView{})
	if !r.wantsTable() {
		t.Fatal("a client that knows no partition count does not want the table")
	}
	const count = 4
	rows := make([]api.PartitionView, count)
	for p := range rows {
		rows[p] = api.PartitionView{Partition: p, Master: []string{"n1", "n2"}[p%2], Epoch: 2, Responsible: []string{"n1", "n2"}}
	}
	rows[3].Master = "" // no master known: looked up when needed
	r.learnTable("http://a", "n1", api.PlacementTable{PartitionCount: count, Partitions: rows})
	if r.wantsTable() {
		t.Error("a client that learnt the table wants it again")
	}
	for i := range 200 {
		user := fmt.Sprint("u", i)
		p := wire.PartitionOf(user, count)
		if got, want := r.needsLookup(user, true), p == 3; got != want {
			t.Fatalf("%s in partition %d: lookup needed %v, want %v", user, p, got, want)
		}
		if want := []string{"http://a", "http://b"}[p%2]; p != 3 && r.choose(user, true, nil) != want {
			t.Fatalf("%s in partition %d goes to %s, want %s", user, p, r.choose(user, true, nil), want)
		}
	}
	// A newer epoch learnt since is kept over an older table.
	var u string
	for i := 0; u == ""; i++ {
		if user := fmt.Sprint("v", i); wire.PartitionOf(user, count) == 0 {
			u = user
		}
	}
	r.learnMaster(u, "n2", 5)
	r.learnTable("http://a", "n1", api.PlacementTable{PartitionCount: count, Partitions: rows})
	if got := r.choose(u, true, nil); got != "http://b" {
		t.Errorf("after a 421 naming n2 at epoch 5 and a table naming n1 at 2: %s, want b", got)
	}

	// No table (an answer that is not one, or none at all): lookups per
	// user for tableAgain, then the table is asked for again.
	now := time.Now()
	clock := func() time.Time { return now }
	for _, bad := range []api.PlacementTable{{}, {PartitionCount: 2, Partitions: rows[:1]}} {
		r := newRoutes([]string{"http://a", "http://b"}, clock)
		r.learnTable("http://a", "n1", bad)
		if r.wantsTable() || r.partitions != 0 {
			t.Errorf("after %+v: the table wanted again %v, count %d; want neither", bad, r.wantsTable(), r.partitions)
		}
	}
	r = newRoutes([]string{"http://a", "http://b"}, clock)
	r.noTable()
	if r.wantsTable() {
		t.Error("a client that just got no table wants it again at once")
	}
	now = now.Add(tableAgain)
	if !r.wantsTable() {
		t.Error("a client that got no table tableAgain ago does not ask again")
	}
}

// fakeNodes are nodes on loopback that answer a placement table as table
// says (its status, and a table of count partitions mastered by n1 when
// 200), placement lookups (partition_count count, master n1) and reads;
// they count the requests for the table.
type fakeNodes struct {
	urls   []string
	tables atomic.Int64
}

func startFakeNodes(t *testing.T, n, count, tableStatus int) *fakeNodes {
	t.Helper()
	f := &fakeNodes{}
	for i := range n {
		id := fmt.Sprint("n", i+1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Served-By", id)
			w.Header().Set("Content-Type", "application/json")
			switch {
			case r.URL.Path == "/v1/placement":
				f.tables.Add(1)
				if tableStatus != http.StatusOK {
					w.WriteHeader(tableStatus)
					return
				}
				rows := make([]api.PartitionView, count)
				for p := range rows {
					rows[p] = api.PartitionView{Partition: p, Master: "n1", Epoch: 1, Responsible: []string{"n1"}}
				}
				json.NewEncoder(w).Encode(api.PlacementTable{PartitionCount: count, Partitions: rows})
			case strings.HasSuffix(r.URL.Path, "/placement"):
				user := strings.Split(r.URL.Path, "/")[3]
				json.NewEncoder(w).Encode(api.PlacementView{User: user, Partition: wire.PartitionOf(user, count), PartitionCount: count, Master: "n1", Epoch: 1, Responsible: []string{"n1"}})
			default:
				w.Write([]byte(`{"_id":"d","_version":1}`))
			}
		}))
		t.Cleanup(srv.Close)
		f.urls = append(f.urls, srv.URL)
	}
	return f
}

// The table is asked for once, whatever the answer: concurrent first
// calls share one request, and a refusal (a token that is not an
// admin's), a node that does not serve it (404) or nodes that fail (5xx)
// leave the client looking up per user (where the count is learnt too)
// rather than asking for the table at every call.
func TestTheTableIsAskedForOnce(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			f := startFakeNodes(t, 2, 8, status)
			c := New(f.urls[0], "tok", WithNodes(f.urls[1]), WithRetry(Retry{Attempts: 1}))
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := c.Get(context.Background(), fmt.Sprint("u", i), "c", "d", ReadOptions{}); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			for i := range 20 {
				if _, err := c.Get(context.Background(), fmt.Sprint("v", i), "c", "d", ReadOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			want := int64(1)
			if status >= 500 {
				want = 2 // each node, once
			}
			if got := f.tables.Load(); got != want {
				t.Errorf("%d requests for the table, want %d", got, want)
			}
		})
	}
}

// A node whose answer names another partition than the client works out
// (a cluster placing users by another rule) makes the client keep
// placements per user, as before partition_count: never one user's
// master for another's partition.
func TestRoutesKeepPlacementsPerUserWhenTheRuleDisagrees(t *testing.T) {
	r := newRoutes([]string{"http://a", "http://b"}, time.Now)
	r.learnView("http://a", "n1", "alice", api.PlacementView{Partition: wire.PartitionOf("alice", 8) + 1, PartitionCount: 8, Master: "n1", Epoch: 1})
	for i := range 100 {
		if user := fmt.Sprint("u", i); !r.needsLookup(user, true) {
			t.Fatalf("%s needs no lookup after an answer the client's rule disagrees with", user)
		}
	}
	if r.needsLookup("alice", true) {
		t.Error("alice's own placement was not kept")
	}
	r.learnView("http://a", "n1", "bob", api.PlacementView{Partition: wire.PartitionOf("bob", 8), PartitionCount: 8, Master: "n1", Epoch: 1})
	if !r.needsLookup("carol", true) {
		t.Error("an answer that agrees again made the client keep placements per partition")
	}
	// Disagreeing after agreeing: every answer is checked.
	r = newRoutes([]string{"http://a", "http://b"}, time.Now)
	r.learnView("http://a", "n1", "bob", api.PlacementView{Partition: wire.PartitionOf("bob", 8), PartitionCount: 8, Master: "n1", Epoch: 1})
	r.learnView("http://a", "n1", "alice", api.PlacementView{Partition: wire.PartitionOf("alice", 8) + 1, PartitionCount: 8, Master: "n1", Epoch: 1})
	if !r.perUser || !r.needsLookup("carol", true) {
		t.Error("an answer the client's rule disagrees with, after one it agreed with, left placements kept per partition")
	}
}

// With more partitions than maxPlaces, every partition's placement is
// kept: the bound is for placements kept per user.
func TestRoutesKeepEveryPartition(t *testing.T) {
	r := newRoutes([]string{"http://a", "http://b"}, time.Now)
	count := maxPlaces * 2
	for i := range 3 * count {
		user := fmt.Sprint("u", i)
		r.learnView("http://a", "n1", user, api.PlacementView{Partition: wire.PartitionOf(user, count), PartitionCount: count, Master: "n1", Epoch: 1})
	}
	if n := len(r.places); n <= maxPlaces {
		t.Errorf("%d placements kept of %d partitions, want more than %d", n, count, maxPlaces)
	}
}

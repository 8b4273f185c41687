package torture

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
)

// A list appender deletes one of its acknowledged elements every third
// append, each at most once, with a majority delete, and records how the
// delete was answered on the element: done (204), unknown (a 5xx), or
// absent (a 404 that says the document is not there).
func TestAListAppenderDeletesItsAcknowledgedElementsOnce(t *testing.T) {
	var mu sync.Mutex
	puts, deletes := 0, map[string]int{}
	enough := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if r.Header.Get("X-Write-Concern") != "majority" || !strings.HasPrefix(r.URL.Path, "/v1/users/list-0/collections/list/documents/") {
			t.Errorf("%s %s with write concern %q", r.Method, r.URL.Path, r.Header.Get("X-Write-Concern"))
		}
		switch r.Method {
		case "PUT":
			puts++
			if puts == 30 {
				close(enough)
			}
			if puts%5 == 0 { // every fifth append fails: never deleted
				rw.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			rw.WriteHeader(http.StatusCreated)
		case "DELETE":
			deletes[id]++
			switch len(deletes) % 3 {
			case 1:
				rw.WriteHeader(http.StatusNoContent)
			case 2:
				rw.WriteHeader(http.StatusServiceUnavailable)
			default:
				rw.WriteHeader(http.StatusNotFound)
				rw.Write([]byte(`{"type":"` + api.TypeNotFound + `"}`))
			}
		}
	}))
	defer srv.Close()
	w := NewWorkload([]Target{{ID: "n1", URL: srv.URL}}, WorkloadOptions{Token: "t", ListClients: 1, Seed: 3})
	// The first appender appends in the registers' user when there is one
	// (the partition the faults aim at), the others in users of their own.
	if u, v := NewWorkload(nil, WorkloadOptions{RegisterUser: "r"}).listUser(0), w.listUser(1); u != "r" || v != "list-1" {
		t.Fatalf("list users %q and %q, want r and list-1", u, v)
	}
	w.Start(context.Background())
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		t.Fatal("the appender did not send 30 appends in 30 s")
	}
	w.Stop()
	mu.Lock()
	defer mu.Unlock()

	h := w.History()
	outcomes := map[ListDelete]int{}
	for _, e := range h.List {
		n := deletes[e.ID]
		switch {
		case n > 1:
			t.Errorf("%s deleted %d times", e.ID, n)
		case n == 1 && !e.Acked:
			t.Errorf("%s deleted though its append was not acknowledged", e.ID)
		case n == 1 && e.Delete == NotDeleted, n == 0 && e.Delete != NotDeleted:
			t.Errorf("%s: %d deletes sent, recorded %d", e.ID, n, e.Delete)
		}
		outcomes[e.Delete]++
	}
	// One delete every third append (but the last, when the workload
	// stopped during that append).
	if len(deletes) < puts/3-1 || len(deletes) > puts/3 {
		t.Errorf("%d deletes for %d appends, want one every third", len(deletes), puts)
	}
	if outcomes[DeleteDone] == 0 || outcomes[DeleteUnknown] == 0 || outcomes[DeleteAbsent] == 0 {
		t.Errorf("delete outcomes recorded: %v, want done, unknown and absent ones", outcomes)
	}
	if n := outcomes[DeleteDone] + outcomes[DeleteUnknown] + outcomes[DeleteAbsent]; n != len(deletes) {
		t.Errorf("%d deletes recorded, %d sent", n, len(deletes))
	}
}

// The registers do compare-and-deletes in runs whose nodes may purge
// tombstones too (a register made again after its tombstone's purge
// starts higher, which the model follows), and the history says which
// kind of run it was.
func TestTheRegistersDeleteInPurgeRunsToo(t *testing.T) {
	for _, purged := range []bool{false, true} {
		var mu sync.Mutex
		requests, deletes := 0, 0
		enough := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if requests++; requests == 400 {
				close(enough)
			}
			switch r.Method {
			case "DELETE":
				deletes++
				rw.WriteHeader(http.StatusNoContent)
			case "PUT":
				rw.Header().Set("ETag", `"2"`)
				rw.WriteHeader(http.StatusOK)
			default:
				rw.Write([]byte(`{"_id":"a1","v":"x","_version":1,"documents":[]}`))
			}
		}))
		w := NewWorkload([]Target{{ID: "n1", URL: srv.URL}}, WorkloadOptions{Token: "t", RegisterUser: "r", RegisterClients: 1, Seed: 5, TombstonesMayBePurged: purged})
		w.Start(context.Background())
		select {
		case <-enough:
		case <-time.After(30 * time.Second):
			t.Fatal("the register client did not send 400 requests in 30 s")
		}
		w.Stop()
		srv.Close()
		if deletes == 0 {
			t.Errorf("TombstonesMayBePurged %v: no delete in %d requests", purged, requests)
		}
		if h := w.History(); h.TombstonesMayBePurged != purged {
			t.Errorf("TombstonesMayBePurged %v: the history says %v", purged, h.TombstonesMayBePurged)
		}
	}
}

// A run goes on past its Duration until every fault kind has run, so a
// TOMBSTONE_RETENTION longer than Duration may still be reached while the
// clients write: the register model must allow versions made above the
// next in any run that sets one, or a purge late in a long run reads as a
// violation.
func TestARunWithAnyRetentionMayPurgeTombstones(t *testing.T) {
	for _, c := range []struct {
		retention time.Duration
		want      bool
	}{{0, false}, {3 * time.Second, true}, {3 * time.Minute, true}} {
		if got := (Config{Duration: 2 * time.Minute, TombstoneRetention: c.retention}).tombstonesMayBePurged(); got != c.want {
			t.Errorf("retention %s, duration 2m: tombstones may be purged %v, want %v", c.retention, got, c.want)
		}
	}
}

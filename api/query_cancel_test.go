package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// A query whose client goes away stops evaluating documents: the client
// cancels its request while the first document is being evaluated, and
// no further document is evaluated. (Documents are few enough to arrive
// from the store in one batch, so it is the query's own check that stops
// it, not the store's cursor.)
func TestQueryStopsWhenClientGoesAway(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{DataDir: t.TempDir(), Database: "shoal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	wr := store.NewWriter(st, 1, store.WriterOptions{})
	t.Cleanup(func() { wr.Close(context.Background()) })
	s := New(Config{NodeID: "n1", PartitionCount: 1, MaxBodyBytes: 1 << 20, Insecure: true}, st, wr)
	handled := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		if r.Method == http.MethodGet {
			close(handled)
		}
	}))
	t.Cleanup(hs.Close)

	const total = 50
	for i := range total {
		req, _ := http.NewRequest("PUT", fmt.Sprintf("%s/v1/users/u/collections/c/documents/d%02d", hs.URL, i), strings.NewReader(`{"a":1}`))
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("seeding: status %d", resp.StatusCode)
		}
	}

	var evaluated atomic.Int32
	started := make(chan struct{})
	s.queryHook = func(ctx context.Context) {
		if evaluated.Add(1) != 1 {
			return
		}
		close(started)
		// Hold the first document until the request's context ends.
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Error("the request's context did not end after its client went away")
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(cctx, "GET", hs.URL+"/v1/users/u/collections/c/documents?limit=1000", nil)
	answered := make(chan error, 1)
	go func() {
		resp, err := hs.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	<-started
	cancel()
	if err := <-answered; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	<-handled
	if n := evaluated.Load(); n != 1 {
		t.Fatalf("%d of %d documents were evaluated after the client went away at the first", n, total)
	}
}

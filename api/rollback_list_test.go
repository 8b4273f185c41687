package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/store"
)

// GET /v1/admin/rollback says when the collection holds more than the
// limit asked for (a test of the isolated master read 999 of its 1,019
// rolled back writes from the default page of 1,000 and called the rest
// lost, with nothing in the answer to tell it the list was cut).
func TestTheRollbackListSaysWhenItIsNotWhole(t *testing.T) {
	ctx := context.Background()
	logger := testnode.Logger(t)
	st := openStore(t, logger)
	w := store.NewWriter(st, 1, store.WriterOptions{Logger: logger})
	t.Cleanup(func() { w.Close(context.Background()) })
	doc := func(id string, seq uint64) *store.Doc {
		return &store.Doc{Key: store.DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Version: 1,
			Pos: store.Position{Epoch: 2, Seq: seq}, Updated: time.Unix(1, 0).UTC(), Body: map[string]any{"v": int64(1)}}
	}
	// Three changes of this node's own tenure at epoch 2 that the master
	// of epoch 3, which started from 2.1, never had.
	if r := w.Apply(ctx, store.Batch{Partition: 0, Epoch: 2, UpTo: store.Position{Epoch: 2, Seq: 4},
		Docs: []*store.Doc{doc("a", 1), doc("b", 2), doc("c", 3), doc("d", 4)}}); r.Err != nil {
		t.Fatalf("the first batch: %+v", r)
	}
	if r := w.Apply(ctx, store.Batch{Partition: 0, Epoch: 3, EpochStart: store.Position{Epoch: 2, Seq: 1}}); !errors.Is(r.Err, store.ErrDiverged) || len(r.Diverged) != 3 {
		t.Fatalf("the new master's first batch: %+v; want 3 changes diverged", r)
	}
	srv := httptest.NewServer(api.New(api.Config{NodeID: "a", PartitionCount: 1, MaxBodyBytes: 1 << 20,
		AuthSecret: []byte(testnode.Secret), Logger: logger}, st, w))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		limit string
		n     int
		more  bool
	}{{"2", 2, true}, {"3", 3, false}, {"10", 3, false}} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/admin/rollback?limit="+c.limit, nil)
		req.Header.Set("Authorization", "Bearer "+testnode.AdminToken(t))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var l api.RollbackList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(l.RolledBack) != c.n || l.More != c.more {
			t.Fatalf("limit %s: %d, %d documents, more %v (%v); want %d documents, more %v", c.limit, resp.StatusCode, len(l.RolledBack), l.More, err, c.n, c.more)
		}
	}
}

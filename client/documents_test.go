package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/testnode"
)

// Every document call against a real node (its store, its router): what
// each answers, the conditions and the errors they give.
func TestDocumentCallsOnARealNode(t *testing.T) {
	n := testnode.StartNew(t)
	c := client.New(n.URL(), testnode.Token(t, "alice"))
	ctx := context.Background()
	majority := client.WriteOptions{Concern: "majority"}

	gen, err := c.Create(ctx, "alice", "notes", map[string]any{"title": "hello"}, majority)
	if err != nil || gen.ID == "" || gen.Version != 1 || gen.Token == "" || gen.Fields["title"] != "hello" {
		t.Fatalf("Create with a generated id: %+v, %v", gen, err)
	}
	n1, err := c.Create(ctx, "alice", "notes", map[string]any{"_id": "n1", "title": "first", "stars": 3}, client.WriteOptions{})
	if err != nil || n1.ID != "n1" {
		t.Fatalf("Create n1: %+v, %v", n1, err)
	}
	if _, err := c.Create(ctx, "alice", "notes", map[string]any{"_id": "n1"}, client.WriteOptions{}); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Create of an existing _id: %v, want ErrConflict", err)
	}

	got, err := c.Get(ctx, "alice", "notes", "n1", client.ReadOptions{After: n1.Token, Concern: "majority"})
	if err != nil || got.Version != 1 || got.Fields["title"] != "first" {
		t.Fatalf("Get n1: %+v, %v", got, err)
	}
	var note struct {
		Title string `json:"title"`
		Stars int    `json:"stars"`
	}
	if err := got.Decode(&note); err != nil || note.Title != "first" || note.Stars != 3 {
		t.Errorf("Decode: %+v, %v", note, err)
	}

	if _, _, err := c.Put(ctx, "alice", "notes", "n1", map[string]any{"title": "x"}, client.WriteOptions{IfMatch: "7"}); !errors.Is(err, client.ErrPreconditionFailed) {
		t.Errorf("Put with a stale If-Match: %v, want ErrPreconditionFailed", err)
	}
	put, created, err := c.Put(ctx, "alice", "notes", "n1", map[string]any{"title": "first, edited", "stars": 4}, client.WriteOptions{IfMatch: "1"})
	if err != nil || created || put.Version != 2 {
		t.Errorf("Put replacing n1: %+v created %v, %v; want version 2, not created", put, created, err)
	}
	if _, created, err := c.Put(ctx, "alice", "notes", "n2", map[string]any{"title": "second", "stars": 1}, client.WriteOptions{}); err != nil || !created {
		t.Errorf("Put of a new id: created %v, %v", created, err)
	}

	patched, err := c.Patch(ctx, "alice", "notes", "n1", map[string]any{"stars": nil, "done": true}, client.WriteOptions{IfMatch: "*"})
	if _, has := patched.Fields["stars"]; err != nil || has || patched.Fields["done"] != true || patched.Version != 3 {
		t.Errorf("Patch: %+v, %v", patched, err)
	}
	if _, err := c.Patch(ctx, "alice", "notes", "absent", map[string]any{"x": 1}, client.WriteOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Patch of an absent document: %v, want ErrNotFound", err)
	}

	// Answered minimally: the id, version and token from the headers, no
	// fields; a json.RawMessage is sent as it is.
	minimal := client.WriteOptions{Minimal: true}
	m, err := c.Create(ctx, "alice", "notes", json.RawMessage(`{"title":"minimal"}`), minimal)
	if err != nil || m.ID == "" || m.Version != 1 || m.Token == "" || m.Fields != nil {
		t.Fatalf("Create answered minimally: %+v, %v", m, err)
	}
	// One that is not valid JSON fails here, as json.Marshal fails it,
	// without a request.
	var he *client.HTTPError
	if _, err := c.Create(ctx, "alice", "notes", json.RawMessage(`{"a":1} {"b":2}`), minimal); err == nil || errors.As(err, &he) {
		t.Errorf("Create of invalid raw JSON: %v, want a local error", err)
	}
	mput, created, err := c.Put(ctx, "alice", "notes", m.ID, map[string]any{"title": "minimal, edited"}, client.WriteOptions{Minimal: true, IfMatch: "1"})
	if err != nil || created || mput.ID != m.ID || mput.Version != 2 || mput.Token == "" || mput.Fields != nil {
		t.Errorf("Put answered minimally: %+v created %v, %v", mput, created, err)
	}
	if mpatch, err := c.Patch(ctx, "alice", "notes", m.ID, map[string]any{"stars": 2}, minimal); err != nil || mpatch.Version != 3 || mpatch.Fields != nil {
		t.Errorf("Patch answered minimally: %+v, %v", mpatch, err)
	}
	if got, err := c.Get(ctx, "alice", "notes", m.ID, client.ReadOptions{}); err != nil || got.Fields["title"] != "minimal, edited" || got.Fields["stars"] != json.Number("2") {
		t.Errorf("Get of the document written minimally: %+v, %v", got, err)
	}
	if _, err := c.Delete(ctx, "alice", "notes", m.ID, client.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	colls, err := c.Collections(ctx, "alice")
	if err != nil || !slices.Equal(colls, []client.Collection{{Name: "notes", Count: 3}}) {
		t.Errorf("Collections: %+v, %v", colls, err)
	}

	tok, err := c.Delete(ctx, "alice", "notes", "n2", client.WriteOptions{})
	if err != nil || tok == "" {
		t.Errorf("Delete: %q, %v", tok, err)
	}
	if _, err := c.Get(ctx, "alice", "notes", "n2", client.ReadOptions{After: tok}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := c.Delete(ctx, "alice", "notes", "n2", client.WriteOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Delete of an absent document: %v, want ErrNotFound", err)
	}

	other := client.New(n.URL(), testnode.Token(t, "bob"))
	if _, err := other.Get(ctx, "alice", "notes", "n1", client.ReadOptions{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("bob reading alice's document: %v, want ErrForbidden", err)
	}
}

// Documents follows the pages' cursors: every matching document once, in
// the sort's order, and a bad filter is the one error it yields.
func TestDocumentsIteratesEveryPage(t *testing.T) {
	n := testnode.StartNew(t)
	c := client.New(n.URL(), testnode.Token(t, "alice"))
	ctx := context.Background()
	for i := range 7 {
		if _, _, err := c.Put(ctx, "alice", "items", fmt.Sprintf("i%d", i), map[string]any{"n": i, "even": i%2 == 0}, client.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for d, err := range c.Documents(ctx, "alice", "items", client.Query{Filter: map[string]any{"even": true}, Sort: "-n", Limit: 2}, client.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ID)
	}
	if want := []string{"i6", "i4", "i2", "i0"}; !slices.Equal(ids, want) {
		t.Errorf("documents %v, want %v (two pages of two)", ids, want)
	}
	var errs []error
	for _, err := range c.Documents(ctx, "alice", "items", client.Query{Filter: `{"$where":"1"}`}, client.ReadOptions{}) {
		errs = append(errs, err)
	}
	var he *client.HTTPError
	if len(errs) != 1 || !errors.As(errs[0], &he) || he.StatusCode != 400 || he.Problem == nil || he.Problem.Type != "urn:shoal:problem:invalid-filter" {
		t.Errorf("a forbidden filter yielded %v; want one 400 invalid-filter", errs)
	}
}

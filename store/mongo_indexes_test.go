package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/shoal-db/shoal/internal/storetest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// indexNames lists the indexes of a collection, sorted.
func indexNames(t *testing.T, s *Store, coll string) []string {
	t.Helper()
	ctx := context.Background()
	cur, err := s.db.Collection(coll).Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.M
	if err := cur.All(ctx, &specs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, spec := range specs {
		names = append(names, spec["name"].(string))
	}
	slices.Sort(names)
	return names
}

// On a MongoDB given by URI, a partition's collection gets the indexes its
// reads need when the partition is first written, and a restart asks for
// them again without harm; the reads answer as before.
func TestAStoreOnMongoDBIndexesEveryAccessPath(t *testing.T) {
	ctx := context.Background()
	mongo := storetest.Start(t)
	open := func() (*Store, *Writer) {
		s, err := Open(ctx, Options{URI: mongo.URI, Database: "shoal"})
		if err != nil {
			t.Fatal(err)
		}
		w := NewWriter(s, 4, WriterOptions{CacheBytes: 1 << 20})
		if err := w.LoadAll(ctx); err != nil {
			t.Fatal(err)
		}
		return s, w
	}
	s, w := open()
	for _, id := range []string{"a", "b", "c"} {
		if r := w.Do(ctx, Op{Partition: 3, User: "u", Coll: "c", ID: id, Fresh: true, Mutate: put(map[string]any{"id": id})}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	want := []string{"_id_", "collection", "position", "tombstones"}
	if got := indexNames(t, s, CollectionName(3)); !slices.Equal(got, want) {
		t.Fatalf("partition 3's indexes: %v, want %v", got, want)
	}
	if got := indexNames(t, s, rollbackCollection); !slices.Equal(got, []string{"_id_", "at"}) {
		t.Fatalf("the rollback collection's indexes: %v, want _id_ and at", got)
	}
	w.Close(ctx)
	s.Close(ctx)

	s, w = open()
	defer s.Close(ctx)
	defer w.Close(ctx)
	if got := indexNames(t, s, CollectionName(3)); !slices.Equal(got, want) {
		t.Fatalf("after a restart, partition 3's indexes: %v, want %v", got, want)
	}
	last, err := s.LastPosition(ctx, 3)
	if err != nil || last.Seq != 3 {
		t.Fatalf("newest position %v (%v), want the third write's", last, err)
	}
	after, err := s.ScanAfter(ctx, 3, Position{Epoch: last.Epoch, Seq: 1}, 0)
	if err != nil || len(after) != 2 || after[0].ID != "b" || after[1].ID != "c" {
		t.Fatalf("scan after the first write: %d documents (%v), want b and c in order", len(after), err)
	}
	live, err := s.Scan(ctx, 3, "u", "c")
	if err != nil || len(live) != 3 {
		t.Fatalf("the collection holds %d documents (%v), want 3", len(live), err)
	}
	counts, err := s.Collections(ctx, 3, "u")
	if err != nil || len(counts) != 1 || counts[0].Count != 3 {
		t.Fatalf("collections %v (%v), want c with 3", counts, err)
	}
}

// The first writes of many partitions at once on a new MongoDB each
// create their collection's indexes beside the others. On FerretDB's
// SQLite one schema change holds the database's lock, and the others
// were answered SQLITE_BUSY and failed at once (the commit failed: the
// bench's first two writes on a fresh database were answered 503, a CI
// flake of cmd/shoal's TestBenchMeasuresTheMongoEngine); they are now
// made one at a time and tried again while busy, as commits are (on the
// code before, a run failed so now and then on a loaded machine). The
// index models were shared by every partition, and the driver writes to
// a model's options as it creates the index: a data race, which go test
// -race reported on the code before in every run.
func TestTheFirstWritesOfManyPartitionsAtOnceEachGetTheirIndexes(t *testing.T) {
	ctx := context.Background()
	mongo := storetest.Start(t)
	const partitions = 32
	for round := range 2 { // a fresh database each round
		s, err := Open(ctx, Options{URI: mongo.URI, Database: fmt.Sprintf("fresh%d", round)})
		if err != nil {
			t.Fatal(err)
		}
		w := NewWriter(s, partitions, WriterOptions{CacheBytes: 1 << 20})
		if err := w.LoadAll(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for p := range partitions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := w.Do(ctx, Op{Partition: p, User: "u", Coll: "c", ID: "a", Fresh: true, Mutate: put(map[string]any{"p": p})}); r.Err != nil {
					t.Errorf("round %d, partition %d's first write: %v", round, p, r.Err)
				}
			}()
		}
		wg.Wait()
		for p := range partitions {
			if got := indexNames(t, s, CollectionName(p)); !slices.Equal(got, []string{"_id_", "collection", "position", "tombstones"}) {
				t.Errorf("round %d, partition %d's indexes: %v", round, p, got)
			}
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

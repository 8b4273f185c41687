package pebbleengine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/store/engine"
	"github.com/shoal-db/shoal/store/engine/enginetest"
)

// The Pebble engine passes the engines' conformance suite.
func TestThePebbleEngineConforms(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) enginetest.Engine {
		e, err := Open(Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
		return e
	})
}

// A call after Close answers ErrUnavailable instead of meeting a closed
// database (Pebble panics on one): a node's loops may still be stopping.
func TestACallAfterCloseIsRefused(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := e.Get(ctx, 0, "u/c/a"); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := e.SaveTenureLists(ctx, map[int]engine.TenureList{1: {Epoch: 1}}); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("a save after Close: %v", err)
	}
}

// A scan after a position reads one state of the partition: a key the
// writer moves to a later position during the scan does not come back at
// it (a catch-up continues after the last position it was sent, and would
// skip every position between).
func TestAScanAfterAPositionSeesOneState(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	put := func(id string, seq uint64) {
		t.Helper()
		d := &record.Doc{Key: record.DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Pos: record.Position{Epoch: 1, Seq: seq}, Updated: time.Now()}
		if err := e.Commit(ctx, 0, []engine.Write{{Doc: d}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 20; i++ {
		put(fmt.Sprintf("k%02d", i), uint64(i))
	}
	afterIndexScan = func() { put("k05", 21) }
	defer func() { afterIndexScan = nil }()
	docs, err := e.ScanAfter(ctx, 0, record.Position{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		if want := (record.Position{Epoch: 1, Seq: uint64(i + 1)}); d.Pos != want {
			t.Fatalf("state %d of the scan is %s at %s, want %s: the scan mixed two states of the partition", i, d.Key, d.Pos, want)
		}
	}
}

// The purge deletes what the store's planPurge picked: tombstones written
// before the cutoff in whole milliseconds, and only while they are still
// the key's state.
func TestThePurgeCutsAtWholeMillisecondsAndOnlyTombstones(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	base := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	tomb := func(id string, seq uint64, at time.Time) *record.Doc {
		return &record.Doc{Key: record.DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Pos: record.Position{Epoch: 1, Seq: seq}, Deleted: true, Updated: at}
	}
	// Written 0.2 ms into the millisecond the cutoff falls 0.5 ms into:
	// planPurge keeps it (same millisecond), so must the engine.
	same := tomb("same-ms", 1, base.Add(200*time.Microsecond))
	older := tomb("older", 2, base.Add(-time.Second))
	if err := e.Commit(ctx, 0, []engine.Write{{Doc: same}, {Doc: older}}); err != nil {
		t.Fatal(err)
	}
	if err := e.PurgeTombstones(ctx, 0, base.Add(500*time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(ctx, 0, same.Key); err != nil {
		t.Fatalf("a tombstone of the cutoff's millisecond was purged: %v", err)
	}
	if _, err := e.Get(ctx, 0, older.Key); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("an older tombstone was kept: %v", err)
	}
}

// Inserting a new document looks its key up first, and a table's Bloom
// filter answers that lookup for the tables that do not hold the key
// without reading them.
func TestAnInsertOfANewKeyIsRuledOutByTheFilters(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	doc := func(id string, seq uint64) *record.Doc {
		return &record.Doc{Key: record.DocKey("u", "c", id), User: "u", Coll: "c", ID: id,
			Pos: record.Position{Epoch: 1, Seq: seq}, Updated: time.Now(), Body: map[string]any{"n": int64(seq)}}
	}
	for seq := uint64(1); seq <= 100; seq++ {
		if _, err := e.InsertNew(ctx, 0, []*record.Doc{doc(fmt.Sprintf("old-%03d", seq), seq)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.db.Flush(); err != nil { // into a table, out of the memtable
		t.Fatal(err)
	}
	before := e.db.Metrics().Filter.Hits
	for seq := uint64(101); seq <= 200; seq++ {
		held, err := e.InsertNew(ctx, 0, []*record.Doc{doc(fmt.Sprintf("new-%03d", seq), seq)})
		if err != nil || len(held) != 0 {
			t.Fatalf("inserting a new key: held %v, %v", held, err)
		}
	}
	if hits := e.db.Metrics().Filter.Hits - before; hits < 90 {
		t.Fatalf("the filters ruled out the table %d times in 100 inserts of new keys; want nearly every time (no filter configured?)", hits)
	}
}

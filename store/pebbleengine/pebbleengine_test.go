package pebbleengine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

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

// The tombstones due for a purge are those written before the cutoff in
// whole milliseconds, as the store's planPurge compares.
func TestTombstonesDueAreCutAtWholeMilliseconds(t *testing.T) {
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
	due, err := e.Tombstones(ctx, 0, time.Time{}, base.Add(500*time.Microsecond), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].Key != older.Key {
		t.Fatalf("due before the cutoff: %v, want the older tombstone alone (one of the cutoff's millisecond is kept)", due)
	}
}

// An index entry of a tombstone that its key's state does not account for
// (no write leaves one; a bug of an older version could) is removed by
// the purge that reads it, and counted: left, every purge would read it
// again, and a purge goes on while its chunks remove something.
func TestAPurgeRemovesATombstoneEntryItsKeyDoesNotAccountFor(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	then := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	live := &record.Doc{Key: record.DocKey("u", "c", "a"), User: "u", Coll: "c", ID: "a", Pos: record.Position{Epoch: 1, Seq: 2},
		Updated: then, Body: map[string]any{}}
	if err := e.Commit(ctx, 0, []engine.Write{{Doc: live}}); err != nil {
		t.Fatal(err)
	}
	stale := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 1), 1)
	if err := e.db.Set(tombKey(0, then.Add(-time.Hour), live.Key), stale, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	due, err := e.Tombstones(ctx, 0, time.Time{}, then, 0)
	if err != nil || len(due) != 1 {
		t.Fatalf("due: %v (%v), want the stale entry", due, err)
	}
	if n, err := e.PurgeTombstones(ctx, 0, due); err != nil || n != 1 {
		t.Fatalf("purged %d (%v), want the stale entry", n, err)
	}
	if due, err := e.Tombstones(ctx, 0, time.Time{}, time.Time{}, 0); err != nil || len(due) != 0 {
		t.Fatalf("tombstones after the purge: %v (%v), want none", due, err)
	}
	if _, err := e.Get(ctx, 0, live.Key); err != nil {
		t.Fatalf("the live document after the purge: %v", err)
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
	doc := numberedDoc
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

// A write reads each key's state at most once, and none for a key its
// caller knows is new (engine.Write.Insert), nor a collection count it
// committed itself: a master's lookup of the document it replaces, a
// replica's check of each insert and a count's read back were each made
// twice per write before.
func TestAWriteLooksEachKeyUpOnce(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	ctx := context.Background()
	doc := numberedDoc
	lookups := func(what string, want int64, do func() error) {
		t.Helper()
		before := e.lookups.Load()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := e.lookups.Load() - before; got != want {
			t.Fatalf("%s read %d states or counts, want %d", what, got, want)
		}
	}
	lookups("a replica's insert of 3 new documents (and the collection's count, not yet known)", 4, func() error {
		_, err := e.InsertNew(ctx, 0, []*record.Doc{doc("a", 1), doc("b", 2), doc("c", 3)})
		return err
	})
	lookups("a master's commit of a document known to be new", 0, func() error {
		return e.Commit(ctx, 0, []engine.Write{{Doc: doc("d", 4), Insert: true}})
	})
	lookups("a commit replacing a document", 1, func() error {
		return e.Commit(ctx, 0, []engine.Write{{Doc: doc("a", 5)}})
	})
	lookups("an insert of a document already held", 1, func() error {
		held, err := e.InsertNew(ctx, 0, []*record.Doc{doc("b", 6)})
		if err == nil && !held[record.DocKey("u", "c", "b")] {
			err = fmt.Errorf("the held document was not reported: %v", held)
		}
		return err
	})
	lookups("a replica's insert of 2 documents, one known to be new", 1, func() error {
		held, err := e.InsertNewDeferred(ctx, 0, []engine.Write{{Doc: doc("e", 8), Insert: true}, {Doc: doc("f", 9)}})
		if err == nil && len(held) != 0 {
			err = fmt.Errorf("new documents reported held: %v", held)
		}
		return err
	})
	counts, err := e.Collections(ctx, 0, "u")
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 1 || counts[0].Count != 6 {
		t.Fatalf("collections %+v, want c with 6 documents", counts)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// The counts a reopened engine reads are the ones committed.
	e, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	lookups("a delete after a restart (its state and the count, read once)", 2, func() error {
		d := doc("c", 7)
		d.Deleted, d.Body = true, nil
		return e.Commit(ctx, 0, []engine.Write{{Doc: d}})
	})
	if counts, err = e.Collections(ctx, 0, "u"); err != nil || len(counts) != 1 || counts[0].Count != 5 {
		t.Fatalf("collections %+v (%v), want c with 5 documents", counts, err)
	}
}

// A deferred change (engine.Deferring) survives a crash once a later
// synced write has returned, and not before: the replica's documents are
// made durable by its applied positions' write, which it answers after.
// The crash is a clone of a file system that keeps only what was synced.
func TestADeferredChangeIsDurableAtTheNextSyncedWrite(t *testing.T) {
	fs := vfs.NewCrashableMem()
	const dir = "/data"
	e, err := Open(Options{Dir: dir, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	ctx := context.Background()
	doc := numberedDoc
	// held reports which of the keys an engine opened on a crash of fs
	// holds.
	held := func(keys ...string) map[string]bool {
		t.Helper()
		c, err := Open(Options{Dir: dir, FS: fs.CrashClone(vfs.CrashCloneCfg{})})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		out := map[string]bool{}
		for _, id := range keys {
			_, err := c.Get(ctx, 0, record.DocKey("u", "c", id))
			switch {
			case err == nil:
				out[id] = true
			case !errors.Is(err, record.ErrNotFound):
				t.Fatal(err)
			}
		}
		return out
	}
	if _, err := e.InsertNewDeferred(ctx, 0, []engine.Write{{Doc: doc("a", 1)}, {Doc: doc("b", 2)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.CommitDeferred(ctx, 0, []engine.Write{{Doc: doc("a", 3)}}); err != nil {
		t.Fatal(err)
	}
	if d, err := e.Get(ctx, 0, record.DocKey("u", "c", "a")); err != nil || d.Pos.Seq != 3 {
		t.Fatalf("a deferred change is not read at once: %+v, %v", d, err)
	}
	if got := held("a", "b"); len(got) != 0 {
		t.Fatalf("deferred changes survived a crash before any synced write: %v (then they are not deferred)", got)
	}
	if err := e.SaveRecords(ctx, []engine.PartitionRecord{{Partition: 0, Epoch: 1, Seq: 3}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := held("a", "b"); !got["a"] || !got["b"] {
		t.Fatalf("after a synced write of the records, a crash kept %v of a and b", got)
	}
	// A synced commit of documents makes the deferred changes before it
	// durable too.
	if _, err := e.InsertNewDeferred(ctx, 0, []engine.Write{{Doc: doc("c", 4)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Commit(ctx, 1, []engine.Write{{Doc: doc("d", 5)}}); err != nil {
		t.Fatal(err)
	}
	if got := held("c"); !got["c"] {
		t.Fatalf("a deferred insert did not survive a crash after a synced commit")
	}
	// Sync alone, with nothing else to write.
	if _, err := e.InsertNewDeferred(ctx, 0, []engine.Write{{Doc: doc("e", 6)}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := held("e"); !got["e"] {
		t.Fatalf("a deferred insert did not survive a crash after Sync")
	}
}

// numberedDoc is document id of user u's collection c, at position 1.seq,
// its body {"n": seq}.
func numberedDoc(id string, seq uint64) *record.Doc {
	return &record.Doc{Key: record.DocKey("u", "c", id), User: "u", Coll: "c", ID: id,
		Pos: record.Position{Epoch: 1, Seq: seq}, Updated: time.Now(), Body: map[string]any{"n": int64(seq)}}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store/engine"
)

func TestPlanPurge(t *testing.T) {
	cutoff := time.UnixMilli(10_000)
	at := func(id string, seq uint64, ms int64) *Doc {
		d := doc(id, 1, seq, 2, true)
		d.Updated = time.UnixMilli(ms)
		return d
	}
	cases := []struct {
		name    string
		tombs   []*Doc
		horizon Position
		keys    []string
		want    Position
	}{
		{"none", nil, Position{}, nil, Position{}},
		{"all young", []*Doc{at("a", 3, 10_000), at("b", 4, 12_000)}, Position{}, nil, Position{}},
		{"old and young", []*Doc{at("a", 3, 9_999), at("b", 7, 10_000), at("c", 5, 1)},
			Position{}, []string{DocKey("u", "c", "a"), DocKey("u", "c", "c")}, Position{Epoch: 1, Seq: 5}},
		{"horizon never goes back", []*Doc{at("a", 3, 1)}, Position{Epoch: 2, Seq: 1},
			[]string{DocKey("u", "c", "a")}, Position{Epoch: 2, Seq: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := planPurge(c.tombs, cutoff, c.horizon)
			var k []string
			for _, d := range got.gone {
				k = append(k, d.Key)
			}
			if !slices.Equal(k, c.keys) || got.horizon != c.want {
				t.Fatalf("got keys %v horizon %v, want keys %v horizon %v", k, got.horizon, c.keys, c.want)
			}
		})
	}
}

// As a replica (tombstones with the master's times): only tombstones older
// than the cutoff go, the horizon is the highest of them, and a partition
// left with no tombstone is not looked at again.
func TestPurgeRemovesOnlyOldTombstones(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 2, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	now := time.Now().UTC().Truncate(time.Millisecond)
	young := doc("young", 1, 4, 2, true)
	young.Updated = now
	live := doc("live", 1, 1, 1, false) // old, but not a tombstone
	b := Batch{Partition: 0, Epoch: 1, UpTo: Position{Epoch: 1, Seq: 4},
		Docs: []*Doc{live, doc("old1", 1, 2, 2, true), doc("old2", 1, 3, 2, true), young}}
	if r := w.Apply(ctx, b); r.Err != nil {
		t.Fatal(r.Err)
	}
	n, err := w.PurgeTombstones(ctx, now.Add(-time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("purged %d (%v), want 2", n, err)
	}
	for _, id := range []string{"old1", "old2"} {
		if _, err := w.Get(ctx, 0, DocKey("u", "c", id)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s after the purge: %v", id, err)
		}
		if _, err := s.Get(ctx, 0, DocKey("u", "c", id)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s still stored: %v", id, err)
		}
	}
	for _, id := range []string{"young", "live"} {
		if _, err := w.Get(ctx, 0, DocKey("u", "c", id)); err != nil {
			t.Fatalf("%s was purged: %v", id, err)
		}
	}
	if h := w.Horizon(0); h != (Position{Epoch: 1, Seq: 3}) {
		t.Fatalf("horizon %v, want 1.3", h)
	}
	if !w.parts[0].tombstones.Load() {
		t.Fatal("a partition that still holds a tombstone is not purged again")
	}
	// The young one goes once it is old enough; then nothing is left.
	if n, err := w.PurgeTombstones(ctx, now.Add(time.Millisecond)); err != nil || n != 1 {
		t.Fatalf("second purge: %d %v", n, err)
	}
	if w.Horizon(0) != (Position{Epoch: 1, Seq: 4}) || w.parts[0].tombstones.Load() {
		t.Fatalf("horizon %v, may hold tombstones %v", w.Horizon(0), w.parts[0].tombstones.Load())
	}
	// The applied position is untouched by the purge.
	if w.Applied(0) != (Position{Epoch: 1, Seq: 4}) {
		t.Fatalf("applied %v after the purges", w.Applied(0))
	}
}

// As a master: the horizon is durable, a purged delete's position is never
// handed out again, even after a restart, and a document created again
// after its tombstone is gone starts at its position's sequence number,
// above every version it had (an old If-Match cannot match it).
func TestHorizonSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openAt(t, dir)
	w := NewWriter(s, 3, WriterOptions{CacheBytes: 1 << 20})
	var del Result
	for _, op := range []struct {
		id     string
		delete bool
	}{{"a", false}, {"b", false}, {"b", true}} {
		del = w.Do(ctx, Op{Partition: 2, User: "u", Coll: "c", ID: op.id,
			Mutate: func(*Doc) (Next, error) { return Next{Body: map[string]any{}, Delete: op.delete}, nil }})
		if del.Err != nil {
			t.Fatal(del.Err)
		}
	}
	if n, err := w.PurgeTombstones(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("purged %d %v", n, err)
	}
	if w.Horizon(2) != del.Doc.Pos || w.Position(2) != del.Doc.Pos {
		t.Fatalf("horizon %v, position %v, want both %v", w.Horizon(2), w.Position(2), del.Doc.Pos)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)

	s2 := openAt(t, dir)
	w2 := NewWriter(s2, 3, WriterOptions{CacheBytes: 1 << 20})
	defer w2.Close(ctx)
	if err := w2.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if w2.Horizon(2) != del.Doc.Pos || w2.Position(2) != del.Doc.Pos {
		t.Fatalf("after a restart: horizon %v, position %v, want both %v", w2.Horizon(2), w2.Position(2), del.Doc.Pos)
	}
	if w2.parts[0].tombstones.Load() || w2.parts[2].tombstones.Load() {
		t.Fatal("after a restart, a partition whose only tombstone was purged is taken to hold one")
	}
	res := w2.Do(ctx, Op{Partition: 2, User: "u", Coll: "c", ID: "b", Mutate: put(map[string]any{"again": true})})
	if res.Err != nil || res.Doc.Pos.Compare(del.Doc.Pos) <= 0 || res.Doc.Version != int64(res.Doc.Pos.Seq) || res.Doc.Version <= del.Doc.Version {
		t.Fatalf("b created again: %+v %v, want it after %v at the version of its sequence number, above its tombstone's v%d", res.Doc, res.Err, del.Doc.Pos, del.Doc.Version)
	}
	// A document that has a state goes on from it.
	if a := w2.Do(ctx, Op{Partition: 2, User: "u", Coll: "c", ID: "a", Mutate: put(map[string]any{"more": true})}); a.Err != nil || a.Doc.Version != 2 {
		t.Fatalf("a changed: %+v %v, want version 2", a.Doc, a.Err)
	}
	// The applied record written by the purge kept the rest of the record.
	if _, seen, err := s2.Applied(ctx, 2); err != nil || seen != 0 {
		t.Fatalf("applied record: seen %d %v", seen, err)
	}
}

// openAt opens the store in dir, closed when the test ends (closing twice
// is harmless).
func openAt(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Database: "shoal", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// The chunks of a full copy come in key order, each exactly once, whatever
// order the documents were written in.
func TestScanKeysPagesInKeyOrder(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{})
	defer w.Close(ctx)
	var want []string
	var docs []*Doc
	for i := range 23 {
		d := doc(fmt.Sprintf("k%02d", i), 1, uint64(i+1), 1, i%5 == 0)
		docs = append(docs, d)
		want = append(want, d.Key)
	}
	rand.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: Position{Epoch: 1, Seq: 23}, Docs: docs}); r.Err != nil {
		t.Fatal(r.Err)
	}
	var got []string
	after := ""
	for {
		page, err := s.ScanKeys(ctx, 0, after, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			got = append(got, d.Key)
		}
		if len(page) < 5 {
			break
		}
		after = page[len(page)-1].Key
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
}

// A chunk of a full copy replaces the replica's copy of its key range:
// what it holds there that the chunk lacks goes (documents and tombstones),
// newer states are written, older ones skipped, keys outside the range are
// kept, and only the final chunk moves the applied position.
func TestFullCopyChunksReplaceTheirKeyRange(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	held := Batch{Partition: 0, Epoch: 2, UpTo: Position{Epoch: 2, Seq: 5}, Docs: []*Doc{
		doc("a", 2, 1, 1, false), doc("b", 2, 2, 1, false), doc("c", 2, 3, 2, true), doc("d", 2, 4, 1, false), doc("z", 2, 5, 1, false)}}
	if r := w.Apply(ctx, held); r.Err != nil {
		t.Fatal(r.Err)
	}
	key := func(id string) string { return DocKey("u", "c", id) }
	// A full copy from an older epoch is refused before anything is removed.
	stale := Batch{Partition: 0, Epoch: 1, Full: true, UpTo: Position{Epoch: 2, Seq: 9}}
	if r := w.Apply(ctx, stale); !errors.Is(r.Err, ErrStaleEpoch) {
		t.Fatalf("stale full copy: %+v", r)
	}
	if _, err := w.Get(ctx, 0, key("z")); err != nil {
		t.Fatalf("a refused full copy removed z: %v", err)
	}
	applied := Position{Epoch: 2, Seq: 5}
	horizon := Position{Epoch: 2, Seq: 8}
	// First chunk: keys up to "m". a is newer on the master, b the same
	// (an older state of b is sent: skipped), c and d are gone.
	older := doc("b", 2, 2, 1, false)
	older.Pos, older.Body = Position{Epoch: 2, Seq: 1}, map[string]any{"stale": true}
	first := Batch{Partition: 0, Epoch: 2, Full: true, KeyTo: key("m"), UpTo: applied, Horizon: horizon,
		Docs: []*Doc{doc("a", 2, 9, 2, false), older}}
	if r := w.Apply(ctx, first); r.Err != nil || r.Applied != applied {
		t.Fatalf("first chunk: %+v", r)
	}
	if a, _ := w.Get(ctx, 0, key("a")); a == nil || a.Version != 2 {
		t.Fatalf("a after the first chunk: %+v", a)
	}
	if b, _ := w.Get(ctx, 0, key("b")); b == nil || b.Body["stale"] != nil {
		t.Fatalf("b after the first chunk: %+v", b)
	}
	for _, id := range []string{"c", "d"} {
		if _, err := s.Get(ctx, 0, key(id)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s, missing from the chunk, is still stored: %v", id, err)
		}
	}
	if _, err := w.Get(ctx, 0, key("z")); err != nil {
		t.Fatalf("z, outside the first chunk's range, is gone: %v", err)
	}
	if w.Horizon(0) != horizon {
		t.Fatalf("the replica's horizon %v, want the master's %v", w.Horizon(0), horizon)
	}
	// Final chunk: everything after "m"; z is gone, y is new.
	target := Position{Epoch: 2, Seq: 10}
	final := Batch{Partition: 0, Epoch: 2, Full: true, KeyFrom: key("m"), UpTo: target, Horizon: horizon,
		Docs: []*Doc{doc("y", 2, 10, 1, false)}}
	if r := w.Apply(ctx, final); r.Err != nil || r.Applied != target {
		t.Fatalf("final chunk: %+v", r)
	}
	if _, err := w.Get(ctx, 0, key("z")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("z after the final chunk: %v", err)
	}
	all, err := s.ScanKeys(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(all); !slices.Equal(got, []string{"a@2.9", "b@2.2", "y@2.10"}) {
		t.Fatalf("the replica holds %v", got)
	}
	if err := w.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if p, _, err := s.Applied(ctx, 0); err != nil || p != target {
		t.Fatalf("stored applied %v %v", p, err)
	}
}

// A replica that took a full copy holds none of the tombstones its master
// purged; promoted, it creates a document at its position's sequence
// number, above any version the key had, as the master that purged them
// would: the horizon it adopted with the copy says tombstones may be gone.
func TestANewMasterCreatesAboveTheHorizonItsFullCopyBrought(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{Epoch: 3})
	defer w.Close(ctx)
	horizon := Position{Epoch: 2, Seq: 8}
	full := Batch{Partition: 0, Epoch: 2, Full: true, UpTo: Position{Epoch: 2, Seq: 9}, Horizon: horizon,
		Docs: []*Doc{doc("a", 2, 9, 4, false)}}
	if r := w.Apply(ctx, full); r.Err != nil {
		t.Fatalf("full copy: %+v", r)
	}
	for _, c := range []struct {
		id   string
		want int64
	}{{"gone", 10}, {"a", 5}} {
		res := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: c.id, Mutate: put(map[string]any{"x": 1})})
		if res.Err != nil || res.Doc.Version != c.want {
			t.Fatalf("%s written by the new master: %+v %v, want version %d", c.id, res.Doc, res.Err, c.want)
		}
	}
}

func TestPlanFullChunk(t *testing.T) {
	held := []*Doc{doc("a", 1, 1, 1, false), doc("b", 1, 5, 1, false), doc("c", 1, 3, 1, true)}
	chunk := []*Doc{doc("a", 1, 2, 2, false), doc("b", 1, 4, 1, false), doc("n", 1, 6, 1, false)}
	gone, writes, abandoned := planFullChunk(held, chunk, []EpochStart{{Epoch: 1}})
	if !slices.Equal(gone, []string{DocKey("u", "c", "c")}) || len(abandoned) != 0 {
		t.Fatalf("gone %v, abandoned %v", gone, abandoned)
	}
	var got []string
	for _, w := range writes {
		got = append(got, fmt.Sprintf("%s insert=%v", w.doc.ID, w.insert))
	}
	if !slices.Equal(got, []string{"a insert=false", "n insert=true"}) {
		t.Fatalf("writes %v", got)
	}
}

// A full copy from a master whose chain says a held state is of an
// abandoned history replaces it with the master's state even when that
// is older (a), and removes one the master has no record of (x): the
// same rule as the check of a new master's first batch. Judged by the
// master's epoch start alone (3.4), both looked held and a kept its
// abandoned state.
func TestPlanFullChunkReplacesAnAbandonedHistory(t *testing.T) {
	chain := []EpochStart{{Epoch: 3, Start: Position{Epoch: 2, Seq: 1}}, {Epoch: 4, Start: Position{Epoch: 3, Seq: 4}}}
	held := []*Doc{doc("a", 2, 4, 2, false), doc("b", 3, 2, 1, false), doc("x", 2, 5, 1, false)}
	chunk := []*Doc{doc("a", 2, 1, 1, false), doc("b", 3, 2, 1, false)}
	gone, writes, abandoned := planFullChunk(held, chunk, chain)
	key := func(id string) string { return DocKey("u", "c", id) }
	if !slices.Equal(gone, []string{key("x")}) || !slices.Equal(abandoned, []string{key("a"), key("x")}) {
		t.Fatalf("gone %v, abandoned %v; want x gone, a and x abandoned", gone, abandoned)
	}
	if len(writes) != 1 || writes[0].doc.ID != "a" || writes[0].doc.Pos != (Position{Epoch: 2, Seq: 1}) || writes[0].insert {
		t.Fatalf("writes %+v, want the master's a@2.1 over the abandoned a@2.4", writes)
	}
}

// tombstoneReads is an engine that records how many tombstones each read
// of them returned, and calls before, when set, before each read with the
// number of reads before it.
type tombstoneReads struct {
	engine.Documents
	reads  []int
	before func(n int)
}

func (r *tombstoneReads) Tombstones(ctx context.Context, partition int, from, until time.Time, limit int) ([]*Doc, error) {
	if r.before != nil {
		r.before(len(r.reads))
	}
	got, err := r.Documents.Tombstones(ctx, partition, from, until, limit)
	r.reads = append(r.reads, len(got))
	return got, err
}

// A purge reads and removes the tombstones due a chunk at a time, oldest
// first, each chunk a request of its own to the partition's writer, and
// never reads those it keeps: its memory and the pause of the partition's
// writes are bounded by a chunk, however many tombstones the partition
// holds (it read all of them, kept ones too, at every pass, in one
// request).
func TestAPurgeReadsTheTombstonesDueAChunkAtATime(t *testing.T) {
	s, w := purgeWriter(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	const old, young = 2*purgeChunk + purgeChunk/2, 10
	var seq uint64
	// Every 100 share a millisecond, as deletes in a burst do.
	applyTombstones(t, w, &seq, old, func(seq uint64) time.Time { return now.Add(-time.Hour + time.Duration(seq/100)*time.Millisecond) })
	applyTombstones(t, w, &seq, young, func(uint64) time.Time { return now })
	reads := &tombstoneReads{Documents: s.docs}
	s.docs = reads
	// A write sent while the first chunk runs is done before the second.
	wrote := make(chan Result, 1)
	reads.before = func(n int) {
		switch n {
		case 0:
			go func() {
				wrote <- w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "between", Mutate: put(map[string]any{})})
			}()
			for len(w.parts[0].queue) == 0 {
				runtime.Gosched() // until the write waits in the partition's queue
			}
		case 1:
			if _, err := reads.Documents.Get(ctx, 0, DocKey("u", "c", "between")); err != nil {
				t.Errorf("a write queued during the first chunk is not stored before the second (%v): the chunks ran as one request", err)
			}
		}
	}
	n, err := w.PurgeTombstones(ctx, now.Add(-time.Minute))
	if err != nil || n != old {
		t.Fatalf("purged %d (%v), want %d", n, err, old)
	}
	if r := <-wrote; r.Err != nil {
		t.Fatalf("the write between the chunks: %v", r.Err)
	}
	if want := []int{purgeChunk, purgeChunk, purgeChunk / 2, 1}; !slices.Equal(reads.reads, want) {
		t.Fatalf("the purge read %v tombstones at a time, want %v (three chunks, then whether any is left)", reads.reads, want)
	}
	if h := w.Horizon(0); h != (Position{Epoch: 1, Seq: old}) {
		t.Fatalf("horizon %v, want 1.%d", h, old)
	}
	if !w.parts[0].tombstones.Load() {
		t.Fatal("a partition that still holds tombstones is not purged again")
	}
	left, err := s.tombstones(ctx, 0, time.Time{}, time.Time{}, 0)
	if err != nil || len(left) != young {
		t.Fatalf("%d tombstones left (%v), want the %d young ones", len(left), err, young)
	}
	// A pass with nothing due reads nothing but whether any is left.
	reads.reads, reads.before = nil, nil
	if n, err := w.PurgeTombstones(ctx, now.Add(-time.Minute)); err != nil || n != 0 {
		t.Fatalf("the second pass purged %d (%v)", n, err)
	}
	if want := []int{0, 1}; !slices.Equal(reads.reads, want) {
		t.Fatalf("a pass with nothing due read %v tombstones at a time, want %v", reads.reads, want)
	}
}

// removesNothing is an engine whose purge removes nothing, as one whose
// index entries no state accounts for would, if it left them.
type removesNothing struct{ engine.Documents }

func (removesNothing) PurgeTombstones(context.Context, int, []*Doc) (int, error) { return 0, nil }

// A purge goes on to a next chunk only while its chunks remove something:
// a full chunk of which nothing could be removed would be read again and
// again, the partition's writer busy with it for good.
func TestAPurgeThatRemovesNothingEnds(t *testing.T) {
	s, w := purgeWriter(t)
	now := time.Now().UTC()
	var seq uint64
	applyTombstones(t, w, &seq, purgeChunk+1, func(uint64) time.Time { return now.Add(-time.Hour) })
	s.docs = removesNothing{s.docs}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := w.PurgeTombstones(ctx, now); err != nil || n != 0 {
		t.Fatalf("purged %d (%v), want none, and an end", n, err)
	}
	if !w.parts[0].tombstones.Load() {
		t.Fatal("a partition whose tombstones stay is taken to hold none")
	}
}

// A tombstone dated before 1970 (a clock set back, on the master that
// deleted) is as due as any older than the retention, on both engines:
// the embedded one wrote its time into the index as an unsigned count,
// where a negative one sorted after every other and was never due.
func TestATombstoneDatedBefore1970IsDue(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *Store{"embedded": openTestStore, "mongo": openMongoStore} {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			ctx := context.Background()
			w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
			defer w.Close(ctx)
			old := doc("old", 1, 1, 2, true)
			old.Updated = time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)
			recent := doc("recent", 1, 2, 2, true)
			recent.Updated = time.Now().UTC().Truncate(time.Millisecond)
			if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 1, UpTo: Position{Epoch: 1, Seq: 2}, Docs: []*Doc{old, recent}}); r.Err != nil {
				t.Fatal(r.Err)
			}
			if n, err := w.PurgeTombstones(ctx, time.Now().Add(-time.Hour)); err != nil || n != 1 {
				t.Fatalf("purged %d (%v), want the one of 1969", n, err)
			}
			if _, err := s.Get(ctx, 0, DocKey("u", "c", "old")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the tombstone of 1969 after the purge: %v", err)
			}
			if _, err := s.Get(ctx, 0, DocKey("u", "c", "recent")); err != nil {
				t.Fatalf("the recent tombstone was purged: %v", err)
			}
			// Nothing is left due: the next purge removes nothing.
			if n, err := w.PurgeTombstones(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
				t.Fatalf("purged %d (%v) more", n, err)
			}
		})
	}
}

// A restore removes a key its master holds nothing of. When the master's
// history that deleted it (and purged the tombstone) is abandoned in turn,
// the key's older state, in the history both shared, is gone from this
// copy too, with nothing left to find it by: no state of the key to roll
// back, and no tombstone. The horizon the copy took with the restore is
// what tells the next master's first batch that this copy holds less than
// the history it claims: it asks for a full copy. Before, it took the
// batch and went on without k for good.
//
// Here k (1.1) and z (1.2) are shared; this node, master at epoch 1, made
// k again at 1.3, which never left it. The master of epoch 2 (from 1.2)
// deleted k at 2.4 and purged the tombstone, and restored this copy: k
// absent. It then died; the master of epoch 3 started from 1.2, with k
// at 1.1.
func TestACopyThatRemovedAPurgedKeyAsksTheNextMasterForAFullCopy(t *testing.T) {
	s := openTestStore(t)
	ctx := context.Background()
	w := NewWriter(s, 1, WriterOptions{CacheBytes: 1 << 20})
	defer w.Close(ctx)
	k := DocKey("u", "c", "k")
	chain1 := []EpochStart{{Epoch: 1}}
	for _, b := range []Batch{
		{Partition: 0, Epoch: 1, Epochs: chain1, UpTo: Position{Epoch: 1, Seq: 2}, Docs: []*Doc{doc("k", 1, 1, 1, false), doc("z", 1, 2, 1, false)}},
		{Partition: 0, Epoch: 1, Epochs: chain1, From: Position{Epoch: 1, Seq: 2}, UpTo: Position{Epoch: 1, Seq: 3}, Docs: []*Doc{doc("k", 1, 3, 2, false)}},
	} {
		if r := w.Apply(ctx, b); r.Err != nil {
			t.Fatalf("epoch 1: %+v", r)
		}
	}
	shared := Position{Epoch: 1, Seq: 2}
	chain2 := []EpochStart{{Epoch: 1}, {Epoch: 2, Start: shared}}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, EpochStart: shared, Epochs: chain2, From: shared, UpTo: shared}); !errors.Is(r.Err, ErrDiverged) || r.Applied != shared {
		t.Fatalf("epoch 2's first batch: %+v, want diverged at 1.2", r)
	}
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 2, EpochStart: shared, Epochs: chain2, From: shared, UpTo: shared,
		Restore: true, Absent: []string{k}, Horizon: Position{Epoch: 2, Seq: 4}}); r.Err != nil {
		t.Fatalf("restore: %+v", r)
	}
	if _, err := w.Get(ctx, 0, k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("k after the restore: %v", err)
	}
	chain3 := []EpochStart{{Epoch: 1}, {Epoch: 3, Start: shared}}
	r := w.Apply(ctx, Batch{Partition: 0, Epoch: 3, EpochStart: shared, Epochs: chain3, From: shared, UpTo: Position{Epoch: 3, Seq: 3},
		Docs: []*Doc{doc("x", 3, 3, 1, false)}})
	if !errors.Is(r.Err, ErrNeedsFullCopy) {
		t.Fatalf("epoch 3's first batch: %+v, want a full copy asked for (this copy lacks k, which epoch 3's history holds at 1.1)", r)
	}
}

// Package enginetest is the conformance suite every storage engine passes
// (engine.Documents): one table of behaviours, run against each engine by
// its own test, so that the engines answer alike.
package enginetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/store/engine"
)

// Engine is what an engine offers: documents and records.
type Engine interface {
	engine.Documents
	engine.Records
}

// Open returns an empty engine for one test; the engine is closed when the
// test ends.
type Open func(t *testing.T) Engine

// Run runs the suite against the engines open makes, each case on an
// engine of its own.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, e Engine)
	}{
		{"a state is read back as written", readBack},
		{"a missing key is not found", notFound},
		{"a commit replaces, in order", replaces},
		{"partitions are apart", partitionsApart},
		{"an insert of new states reports those held", insertNew},
		{"removed keys are gone", remove},
		{"the newest position", last},
		{"the history after a position, in position order", scanAfter},
		{"key order, after a key, with a limit", scanKeys},
		{"a key range without bodies", keyRange},
		{"live documents of a scope", each},
		{"a collection in id order, after an id", eachInOrder},
		{"collections and their counts", collections},
		{"tombstones and their purge", tombstones},
		{"the partitions that hold states", partitionsHeld},
		{"partition records", partitionRecords},
		{"partition records over many saves", manyRecordSaves},
		{"lease votes and the voter set", leaseVotes},
		{"tenure lists", tenureLists},
		{"the meta is created once", meta},
		{"rolled back states", rollbacks},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

var at = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// doc is a state of user u's collection coll at position epoch.seq.
func doc(coll, id string, epoch, seq uint64, body map[string]any) *record.Doc {
	return &record.Doc{Key: record.DocKey("u", coll, id), User: "u", Coll: coll, ID: id, Version: int64(seq),
		Pos: record.Position{Epoch: epoch, Seq: seq}, Updated: at.Add(time.Duration(seq) * time.Millisecond), Body: body}
}

// tomb is the tombstone of coll/id at epoch.seq, written at when.
func tomb(coll, id string, epoch, seq uint64, when time.Time) *record.Doc {
	d := doc(coll, id, epoch, seq, nil)
	d.Deleted, d.Updated = true, when
	return d
}

func commit(t *testing.T, e engine.Documents, partition int, docs ...*record.Doc) {
	t.Helper()
	writes := make([]engine.Write, len(docs))
	for i, d := range docs {
		writes[i] = engine.Write{Doc: d}
	}
	if err := e.Commit(context.Background(), partition, writes); err != nil {
		t.Fatalf("commit to partition %d: %v", partition, err)
	}
}

// same checks that got says what want says (Size is the engine's own
// estimate, not compared).
func same(t *testing.T, what string, got, want *record.Doc) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nothing, want %s at %s", what, want.Key, want.Pos)
	}
	g, w := *got, *want
	g.Size, w.Size = 0, 0
	if w.Body == nil && !w.Deleted {
		w.Body = map[string]any{}
	}
	if !g.Updated.Equal(w.Updated) {
		t.Fatalf("%s: written at %v, want %v", what, g.Updated, w.Updated)
	}
	g.Updated, w.Updated = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

// keys lists the ids of the docs' keys (user/collection/id), in their
// order: a key range and the tombstones carry keys, not the other fields.
func keys(docs []*record.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Key[strings.LastIndex(d.Key, "/")+1:]
	}
	return out
}

func readBack(t *testing.T, e Engine) {
	ctx := context.Background()
	body := map[string]any{"s": "text", "i": int64(-7), "f": 2.5, "t": true, "n": nil,
		"a": []any{"x", int64(1), map[string]any{"deep": false}}, "o": map[string]any{"k": "v", "empty": map[string]any{}}}
	d := doc("c", "a", 2, 9, body)
	commit(t, e, 0, d)
	got, err := e.Get(ctx, 0, d.Key)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "the state read back", got, d)
	gone := tomb("c", "b", 2, 10, at)
	commit(t, e, 0, gone)
	got, err = e.Get(ctx, 0, gone.Key)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "the tombstone read back", got, gone)
}

func notFound(t *testing.T, e Engine) {
	if _, err := e.Get(context.Background(), 0, record.DocKey("u", "c", "nothing")); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("a key never written: %v, want record.ErrNotFound", err)
	}
}

func replaces(t *testing.T, e Engine) {
	ctx := context.Background()
	commit(t, e, 0, doc("c", "a", 1, 1, map[string]any{"v": int64(1)}))
	// Two states of one key in one commit: the later one stands.
	commit(t, e, 0, doc("c", "a", 1, 2, map[string]any{"v": int64(2)}), doc("c", "a", 1, 3, map[string]any{"v": int64(3)}))
	got, err := e.Get(ctx, 0, record.DocKey("u", "c", "a"))
	if err != nil {
		t.Fatal(err)
	}
	same(t, "after two commits", got, doc("c", "a", 1, 3, map[string]any{"v": int64(3)}))
	if n, err := e.CountAfter(ctx, 0, record.Position{}); err != nil || n != 1 {
		t.Fatalf("a key replaced three times counts %d states (%v), want 1", n, err)
	}
}

func partitionsApart(t *testing.T, e Engine) {
	ctx := context.Background()
	commit(t, e, 1, doc("c", "a", 1, 1, map[string]any{"in": "one"}))
	commit(t, e, 2, doc("c", "a", 1, 1, map[string]any{"in": "two"}))
	for p, want := range map[int]string{1: "one", 2: "two"} {
		got, err := e.Get(ctx, p, record.DocKey("u", "c", "a"))
		if err != nil || got.Body["in"] != want {
			t.Fatalf("partition %d holds %+v (%v), want its own state", p, got, err)
		}
	}
	if _, err := e.Get(ctx, 3, record.DocKey("u", "c", "a")); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("partition 3 was never written, yet answers %v", err)
	}
}

func insertNew(t *testing.T, e Engine) {
	ctx := context.Background()
	held := doc("c", "a", 1, 1, map[string]any{"v": "held"})
	commit(t, e, 0, held)
	dups, err := e.InsertNew(ctx, 0, []*record.Doc{doc("c", "a", 1, 5, map[string]any{"v": "newer"}), doc("c", "b", 1, 6, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dups, map[string]bool{held.Key: true}) {
		t.Fatalf("held keys %v, want only %s", dups, held.Key)
	}
	got, err := e.Get(ctx, 0, held.Key)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "a held key after an insert", got, held)
	if _, err := e.Get(ctx, 0, record.DocKey("u", "c", "b")); err != nil {
		t.Fatalf("a new key was not inserted: %v", err)
	}
}

func remove(t *testing.T, e Engine) {
	ctx := context.Background()
	commit(t, e, 0, doc("c", "a", 1, 1, nil), doc("c", "b", 1, 2, nil), doc("c", "c", 1, 3, nil))
	if err := e.Remove(ctx, 0, []string{record.DocKey("u", "c", "a"), record.DocKey("u", "c", "c"), record.DocKey("u", "c", "never")}); err != nil {
		t.Fatal(err)
	}
	left, err := e.ScanKeys(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(left); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("left after removing a and c: %v, want b", got)
	}
}

func last(t *testing.T, e Engine) {
	ctx := context.Background()
	if pos, err := e.Last(ctx, 0); err != nil || pos != (record.Position{}) {
		t.Fatalf("an empty partition's newest position: %s (%v), want zero", pos, err)
	}
	commit(t, e, 0, doc("c", "a", 1, 9, nil), doc("c", "b", 2, 1, nil), doc("c", "c", 1, 12, nil))
	if pos, err := e.Last(ctx, 0); err != nil || pos != (record.Position{Epoch: 2, Seq: 1}) {
		t.Fatalf("newest position %s (%v), want 2.1 (epoch first)", pos, err)
	}
}

func scanAfter(t *testing.T, e Engine) {
	ctx := context.Background()
	// Committed out of position order, with a tombstone among them, and
	// seq numbers that sort differently as text.
	commit(t, e, 0, doc("c", "d", 2, 3, nil), doc("c", "a", 1, 10, nil), tomb("c", "b", 1, 9, at), doc("c", "c", 2, 1, nil), doc("c", "e", 1, 2, nil))
	for _, c := range []struct {
		after record.Position
		limit int
		want  []string
	}{
		{record.Position{}, 0, []string{"e", "b", "a", "c", "d"}},
		{record.Position{Epoch: 1, Seq: 2}, 0, []string{"b", "a", "c", "d"}},
		{record.Position{Epoch: 1, Seq: 9}, 2, []string{"a", "c"}},
		{record.Position{Epoch: 1, Seq: 99}, 0, []string{"c", "d"}},
		{record.Position{Epoch: 2, Seq: 3}, 0, nil},
	} {
		docs, err := e.ScanAfter(ctx, 0, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(docs); !slices.Equal(got, c.want) {
			t.Errorf("after %s, limit %d: %v, want %v", c.after, c.limit, got, c.want)
		}
		n, err := e.CountAfter(ctx, 0, c.after)
		if err != nil {
			t.Fatal(err)
		}
		if c.limit == 0 && n != int64(len(c.want)) {
			t.Errorf("count after %s: %d, want %d", c.after, n, len(c.want))
		}
	}
}

func scanKeys(t *testing.T, e Engine) {
	ctx := context.Background()
	var docs []*record.Doc
	for i, id := range []string{"b", "a", "c10", "c2", "d"} {
		docs = append(docs, doc("c", id, 1, uint64(i+1), nil))
	}
	docs = append(docs, tomb("c", "e", 1, 9, at))
	commit(t, e, 0, docs...)
	for _, c := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 0, []string{"a", "b", "c10", "c2", "d", "e"}},
		{"", 2, []string{"a", "b"}},
		{record.DocKey("u", "c", "b"), 2, []string{"c10", "c2"}},
		{record.DocKey("u", "c", "e"), 0, nil},
	} {
		got, err := e.ScanKeys(ctx, 0, c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if k := keys(got); !slices.Equal(k, c.want) {
			t.Errorf("after %q, limit %d: %v, want %v", c.after, c.limit, k, c.want)
		}
	}
}

func keyRange(t *testing.T, e Engine) {
	ctx := context.Background()
	commit(t, e, 0, doc("c", "a", 1, 1, map[string]any{"big": "body"}), doc("c", "b", 1, 2, nil), doc("c", "c", 1, 3, nil), tomb("c", "d", 1, 4, at))
	got, err := e.KeyRange(ctx, 0, record.DocKey("u", "c", "a"), record.DocKey("u", "c", "d"))
	if err != nil {
		t.Fatal(err)
	}
	if k := keys(got); !slices.Equal(k, []string{"b", "c", "d"}) {
		t.Fatalf("keys in (a, d]: %v, want b c d", k)
	}
	for _, d := range got {
		if d.Key == "" || d.Pos == (record.Position{}) {
			t.Fatalf("a key range answered %+v: every state needs its key and position", d)
		}
	}
	all, err := e.KeyRange(ctx, 0, "", "")
	if err != nil || len(all) != 4 {
		t.Fatalf("an unbounded key range: %d states (%v), want 4", len(all), err)
	}
}

func each(t *testing.T, e Engine) {
	ctx := context.Background()
	other := doc("c", "x", 1, 5, nil)
	other.User, other.Key = "v", record.DocKey("v", "c", "x")
	commit(t, e, 0, doc("c", "a", 1, 1, nil), doc("c", "b", 1, 2, nil), tomb("c", "gone", 1, 3, at), doc("d", "a", 1, 4, nil), other)
	seen := func(scope engine.Scope) []string {
		var out []string
		if err := e.Each(ctx, 0, scope, func(d *record.Doc) error {
			out = append(out, d.Coll+"/"+d.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	if got := seen(engine.Scope{User: "u", Coll: "c"}); !slices.Equal(got, []string{"c/a", "c/b"}) {
		t.Errorf("u's collection c: %v, want its two live documents", got)
	}
	if got := seen(engine.Scope{User: "u"}); !slices.Equal(got, []string{"c/a", "c/b", "d/a"}) {
		t.Errorf("all of u's: %v, want the live documents of c and d", got)
	}
	if got := seen(engine.Scope{User: "w"}); len(got) != 0 {
		t.Errorf("a user with nothing: %v", got)
	}
	stop := errors.New("stop")
	calls := 0
	err := e.Each(ctx, 0, engine.Scope{User: "u"}, func(*record.Doc) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("fn's error ended the scan after %d calls with %v, want 1 call and fn's own error", calls, err)
	}
}

// A collection's live documents come in id order (byte order), from
// after AfterID, and no other collection's come with them: not one whose
// name starts with this one's, nor one of another user whose name starts
// with this user's.
func eachInOrder(t *testing.T, e Engine) {
	ctx := context.Background()
	ids := []string{"b", "a", "a.1", "a-", "a0", "B", "z", "\u00e9t\u00e9", "10", "9", "m"}
	var docs []*record.Doc
	for i, id := range ids {
		docs = append(docs, doc("c", id, 1, uint64(i+1), nil))
	}
	near := []*record.Doc{doc("c-d", "a", 1, 20, nil), doc("c0", "a", 1, 21, nil), doc("cc", "a", 1, 22, nil), tomb("c", "gone", 1, 23, at)}
	for i, u := range []string{"u-", "u0", "uu"} {
		d := doc("c", "a", 1, uint64(24+i), nil)
		d.User, d.Key = u, record.DocKey(u, "c", "a")
		near = append(near, d)
	}
	commit(t, e, 0, append(docs, near...)...)
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	read := func(after string, stopAt int) []string {
		var out []string
		stop := errors.New("stop")
		err := e.Each(ctx, 0, engine.Scope{User: "u", Coll: "c", AfterID: after}, func(d *record.Doc) error {
			if d.User != "u" || d.Coll != "c" {
				t.Fatalf("a scan of u's collection c read %s", d.Key)
			}
			out = append(out, d.ID)
			if len(out) == stopAt {
				return stop
			}
			return nil
		})
		if err != nil && err != stop {
			t.Fatal(err)
		}
		return out
	}
	if got := read("", 0); !slices.Equal(got, sorted) {
		t.Fatalf("u's collection c: %q, want %q (every live document, in byte order of their ids)", got, sorted)
	}
	for i, after := range sorted {
		if got := read(after, 0); !slices.Equal(got, sorted[i+1:]) {
			t.Fatalf("after %q: %q, want %q", after, got, sorted[i+1:])
		}
	}
	if got := read("a0x", 0); !slices.Equal(got, sorted[slices.Index(sorted, "a0")+1:]) {
		t.Fatalf("after an id it does not hold: %q", got)
	}
	i := slices.Index(sorted, "a") + 1
	if got := read("a", 3); !slices.Equal(got, sorted[i:i+3]) {
		t.Fatalf("three after a, then stopped: %q, want %q", got, sorted[i:i+3])
	}
}

func collections(t *testing.T, e Engine) {
	ctx := context.Background()
	if got, err := e.Collections(ctx, 0, "u"); err != nil || len(got) != 0 {
		t.Fatalf("an empty partition's collections: %v (%v)", got, err)
	}
	commit(t, e, 0, doc("zeta", "a", 1, 1, nil), doc("alpha", "a", 1, 2, nil), doc("alpha", "b", 1, 3, nil),
		tomb("alpha", "c", 1, 4, at), tomb("gone", "a", 1, 5, at))
	got, err := e.Collections(ctx, 0, "u")
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.CollectionCount{{Name: "alpha", Count: 2}, {Name: "zeta", Count: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("collections %v, want %v (live documents only, by name)", got, want)
	}
}

func tombstones(t *testing.T, e Engine) {
	ctx := context.Background()
	old, older, recent := at.Add(-time.Hour), at.Add(-2*time.Hour), at.Add(time.Hour)
	commit(t, e, 0, tomb("c", "old", 1, 1, old), tomb("c", "recent", 1, 2, recent), doc("c", "live", 1, 3, nil),
		tomb("c", "older", 1, 4, older), tomb("c", "edge", 1, 5, at.Add(-time.Millisecond+time.Microsecond)))
	read := func(from, before time.Time, limit int) []string {
		t.Helper()
		got, err := e.Tombstones(ctx, 0, from, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			if !d.Deleted || d.Key == "" || d.Pos == (record.Position{}) || d.Updated.IsZero() {
				t.Fatalf("a tombstone answered %+v: it needs its key, position and time", d)
			}
		}
		return keys(got)
	}
	var unbounded time.Time
	if got := read(unbounded, unbounded, 0); !slices.Equal(got, []string{"older", "old", "edge", "recent"}) {
		t.Fatalf("every tombstone: %v, want older, old, edge, recent (oldest first)", got)
	}
	// Compared in whole milliseconds: edge, a fraction of a millisecond
	// before at, is stored in at's millisecond less one.
	for _, c := range []struct {
		from, before time.Time
		limit        int
		want         []string
	}{
		{unbounded, at, 0, []string{"older", "old", "edge"}},
		{unbounded, at.Add(500 * time.Microsecond), 0, []string{"older", "old", "edge"}},
		{unbounded, at.Add(-time.Millisecond), 0, []string{"older", "old"}},
		{unbounded, at, 2, []string{"older", "old"}},
		{unbounded, unbounded, 1, []string{"older"}},
		{old, at, 0, []string{"old", "edge"}},
		{old.Add(time.Millisecond), unbounded, 0, []string{"edge", "recent"}},
		{at.Add(-500 * time.Microsecond), unbounded, 0, []string{"edge", "recent"}},
	} {
		if got := read(c.from, c.before, c.limit); !slices.Equal(got, c.want) {
			t.Fatalf("from %v before %v (limit %d): %v, want %v", c.from, c.before, c.limit, got, c.want)
		}
	}
	due, err := e.Tombstones(ctx, 0, unbounded, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	// old is written again (a document) and edge deleted again after they
	// were read: a purge of what was read leaves their states.
	commit(t, e, 0, doc("c", "old", 1, 6, map[string]any{"again": true}), tomb("c", "edge", 1, 7, recent))
	n, err := e.PurgeTombstones(ctx, 0, due)
	if err != nil || n != 1 {
		t.Fatalf("purged %d (%v), want 1: older", n, err)
	}
	left, err := e.ScanKeys(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if k := keys(left); !slices.Equal(k, []string{"edge", "live", "old", "recent"}) {
		t.Fatalf("after purging the tombstones read before %v: %v, want edge, live, old and recent", at, k)
	}
	if got := read(unbounded, unbounded, 0); !slices.Equal(got, []string{"recent", "edge"}) && !slices.Equal(got, []string{"edge", "recent"}) {
		t.Fatalf("tombstones left: %v, want recent and edge", got)
	}
}

func partitionsHeld(t *testing.T, e Engine) {
	ctx := context.Background()
	want := map[int]bool{4: true, 17: true, 10000: true, 65535: true}
	for p := range want {
		commit(t, e, p, doc("c", "a", 1, 1, nil))
	}
	got, err := e.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("partitions held: %v, want %v", got, want)
	}
	for p := range want {
		if pos, err := e.Last(ctx, p); err != nil || pos != (record.Position{Epoch: 1, Seq: 1}) {
			t.Fatalf("partition %d's newest position %s (%v)", p, pos, err)
		}
	}
}

func partitionRecords(t *testing.T, e Engine) {
	ctx := context.Background()
	got, err := e.LoadRecords(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("a new engine's records: %v (%v), want none", got, err)
	}
	one := engine.PartitionRecord{Partition: 1, Epoch: 2, Seq: 7, Seen: 3, HorizonEpoch: 1, HorizonSeq: 4, Restoring: 3,
		TenureEpoch: 2, TenureFrom: 1, TenureSeq: 9, Chain: []record.EpochStart{{Epoch: 1}, {Epoch: 2, Start: record.Position{Epoch: 1, Seq: 9}}}, Carrying: true}
	two := engine.PartitionRecord{Partition: 2, Recopy: true}
	all := func() []engine.PartitionRecord { return []engine.PartitionRecord{one, two} }
	if err := e.SaveRecords(ctx, []engine.PartitionRecord{one, two}, all); err != nil {
		t.Fatal(err)
	}
	one.Seq, one.Chain = 8, one.Chain[:1]
	if err := e.SaveRecords(ctx, []engine.PartitionRecord{one}, all); err != nil {
		t.Fatal(err)
	}
	got, err = e.LoadRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]engine.PartitionRecord{1: one, 2: two}; !reflect.DeepEqual(got, want) {
		t.Fatalf("records read back:\n got %+v\nwant %+v", got, want)
	}
}

func manyRecordSaves(t *testing.T, e Engine) {
	ctx := context.Background()
	recs := map[int]engine.PartitionRecord{}
	all := func() []engine.PartitionRecord {
		var out []engine.PartitionRecord
		for _, r := range recs {
			out = append(out, r)
		}
		return out
	}
	// More saves than an engine may let pile up before it rewrites them
	// all (the mongo engine's log: 512), each changing one of 8.
	for i := 1; i <= 1100; i++ {
		r := engine.PartitionRecord{Partition: i % 8, Epoch: 1, Seq: uint64(i)}
		recs[r.Partition] = r
		if err := e.SaveRecords(ctx, []engine.PartitionRecord{r}, all); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	got, err := e.LoadRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("after 1100 saves:\n got %+v\nwant %+v", got, recs)
	}
}

func leaseVotes(t *testing.T, e Engine) {
	ctx := context.Background()
	if votes, err := e.LeaseVotes(ctx); err != nil || len(votes) != 0 {
		t.Fatalf("a new engine's votes: %v (%v)", votes, err)
	}
	if voters, _, err := e.VoterSet(ctx); err != nil || voters != nil {
		t.Fatalf("a new engine's voter set: %v (%v), want none", voters, err)
	}
	votes := map[int]record.LeaseVote{
		0: {Partition: 0, Epoch: 3, Holder: "node1", List: &record.CopyList{Epoch: 3, Seq: 2, Copies: []string{"node1", "node2"}}},
		5: {Partition: 5, Epoch: 1, Holder: "node2"},
	}
	if err := e.SaveLeaseVotes(ctx, votes); err != nil {
		t.Fatal(err)
	}
	delete(votes, 5)
	votes[7] = record.LeaseVote{Partition: 7, Epoch: 9, Holder: "node3"}
	if err := e.SaveLeaseVotes(ctx, votes); err != nil {
		t.Fatal(err)
	}
	got, err := e.LeaseVotes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p, v := range votes {
		if g, ok := got[p]; !ok || g.Epoch != v.Epoch || g.Holder != v.Holder || (v.List == nil) != (g.List == nil) || v.List != nil && !v.List.Same(g.List) {
			t.Fatalf("vote of partition %d read back as %+v, want %+v", p, g, v)
		}
	}
	if len(got) != len(votes) {
		t.Fatalf("votes read back %v, want only those of the last save (%d)", got, len(votes))
	}
	changed := at.Truncate(time.Millisecond)
	if err := e.SaveVoterSet(ctx, []string{"node1", "node2", "node3"}, changed); err != nil {
		t.Fatal(err)
	}
	voters, when, err := e.VoterSet(ctx)
	if err != nil || !slices.Equal(voters, []string{"node1", "node2", "node3"}) || !when.Equal(changed) {
		t.Fatalf("voter set %v changed %v (%v), want the three nodes at %v", voters, when, err, changed)
	}
}

func tenureLists(t *testing.T, e Engine) {
	ctx := context.Background()
	lists := map[int]engine.TenureList{3: {Epoch: 4, Replicas: []string{"node2", "node3"}, Seq: 2, Counted: 2}, 9: {Epoch: 1, Replicas: []string{"node1"}, Seq: 1}}
	if err := e.SaveTenureLists(ctx, lists); err != nil {
		t.Fatal(err)
	}
	delete(lists, 9)
	if err := e.SaveTenureLists(ctx, lists); err != nil {
		t.Fatal(err)
	}
	got, err := e.TenureLists(ctx)
	if err != nil || !reflect.DeepEqual(got, lists) {
		t.Fatalf("tenure lists %+v (%v), want %+v", got, err, lists)
	}
}

func meta(t *testing.T, e Engine) {
	ctx := context.Background()
	if _, ok, err := e.Meta(ctx); err != nil || ok {
		t.Fatalf("a new engine has meta (%v, %v)", ok, err)
	}
	first := engine.Meta{PartitionCount: 16, NodeID: "node1", Created: at}
	if created, err := e.CreateMeta(ctx, first); err != nil || !created {
		t.Fatalf("the first meta was not created (%v, %v)", created, err)
	}
	if created, err := e.CreateMeta(ctx, engine.Meta{PartitionCount: 32, NodeID: "node2", Created: at}); err != nil || created {
		t.Fatalf("a second meta was created over the first (%v, %v)", created, err)
	}
	got, ok, err := e.Meta(ctx)
	if err != nil || !ok || got.PartitionCount != 16 || got.NodeID != "node1" || !got.Created.Equal(at) {
		t.Fatalf("meta %+v (%v, %v), want the first", got, ok, err)
	}
}

func rollbacks(t *testing.T, e Engine) {
	ctx := context.Background()
	state := func(id string, seq uint64, when time.Time) engine.RolledBack {
		return engine.RolledBack{Partition: 2, User: "u", Coll: "c", ID: id, Version: 1, Position: record.Position{Epoch: 3, Seq: seq},
			Body: map[string]any{"id": id, "n": int64(seq), "nested": map[string]any{"a": []any{true}}}, NewEpoch: 4,
			EpochStart: record.Position{Epoch: 3, Seq: 1}, At: when}
	}
	early, late := state("a", 5, at), state("b", 6, at.Add(time.Second))
	if err := e.SaveRollback(ctx, []engine.RolledBack{late, early}); err != nil {
		t.Fatal(err)
	}
	// Saved again (a retry): kept once.
	if err := e.SaveRollback(ctx, []engine.RolledBack{early}); err != nil {
		t.Fatal(err)
	}
	got, err := e.Rollbacks(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("rolled back states %+v, want a then b, once each", got)
	}
	if !reflect.DeepEqual(got[0].Body, early.Body) || got[0].Position != early.Position || !got[0].At.Equal(early.At) {
		t.Fatalf("rolled back state read back as %+v, want %+v", got[0], early)
	}
	if first, err := e.Rollbacks(ctx, 1); err != nil || len(first) != 1 || first[0].ID != "a" {
		t.Fatalf("the oldest one: %+v (%v)", first, err)
	}
}

package replicate

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// The byte bound relies on the estimates never being below what
// encoding/json writes, whatever the body holds.
func TestWireSizesBoundTheEncoding(t *testing.T) {
	bodies := map[string]map[string]any{
		"plain":   {"s": strings.Repeat("x", 1000)},
		"escaped": {"<&>": strings.Repeat("<&>\"\\\n\x01", 300)},
		"unicode": {"s": strings.Repeat("é€😀\u2028\u2029", 100) + "\xff\xfe"},
		"numbers": {"a": []any{int64(math.MinInt64), int64(math.MaxInt64), -0.0000012345678901234567, -1.2345678901234567e-308,
			math.MaxFloat64, -math.SmallestNonzeroFloat64, 1e21, 123456789012345678000.0}},
		"nested": {"a": map[string]any{"b": []any{map[string]any{"c": nil, "d": true}, []any{}, map[string]any{}}}},
		"empty":  {},
		"other":  {"t": time.Date(2024, 1, 2, 3, 4, 5, 999999999, time.FixedZone("x", -3600)), "n": json.Number("12345")},
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			d := &store.Doc{User: "<u>", Coll: "c\x00", ID: strings.Repeat("&", 40), Version: math.MaxInt64,
				Pos: store.Position{Epoch: math.MaxUint64, Seq: math.MaxUint64}, Deleted: true,
				Updated: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("y", -12*3600)), Body: body}
			b := store.Batch{Partition: math.MaxInt, Epoch: math.MaxUint64, EpochStart: d.Pos, From: d.Pos, UpTo: d.Pos,
				Docs: []*store.Doc{d}, Restore: true, Full: true, Horizon: d.Pos, Committed: d.Pos}
			for range 8 { // the longest epoch chain
				b.Epochs = append(b.Epochs, store.EpochStart{Epoch: math.MaxUint64, Start: d.Pos})
			}
			data, err := json.Marshal(Request{Batches: []WireBatch{ToWire(b)}})
			if err != nil {
				t.Fatal(err)
			}
			if est := wireBatchBase + docWireSize(d); est < len(data) {
				t.Fatalf("estimated %d bytes, encoded %d", est, len(data))
			}
			// Twice what it holds, at most, plus the fixed parts: a bound that
			// wastes most of a request is no use either.
			if name == "plain" {
				if est := docWireSize(d); est > 2*len(data)+wireDocBase {
					t.Fatalf("estimated %d bytes for %d encoded", est, len(data))
				}
			}
		})
	}
}

func TestARequestTakesWhatFitsAndAlwaysOne(t *testing.T) {
	for _, c := range []struct {
		docs, bytes int
		takes       [][]int // sizes offered in turn (header 0)
		want        []int
	}{
		{docs: 10, bytes: 100, takes: [][]int{{30, 30, 30, 30}}, want: []int{3}},
		{docs: 2, bytes: 100, takes: [][]int{{10, 10, 10}}, want: []int{2}},
		{docs: 10, bytes: 100, takes: [][]int{{500}, {1}}, want: []int{1, 0}},           // too big: alone, first
		{docs: 10, bytes: 100, takes: [][]int{{50}, {500}, {50}}, want: []int{1, 0, 1}}, // too big behind another: waits
		{docs: 10, bytes: 100, takes: [][]int{{}, {10}}, want: []int{0, 1}},
	} {
		rm := newRoom(c.docs, c.bytes)
		for i, sizes := range c.takes {
			if got := rm.take(0, sizes); got != c.want[i] {
				t.Errorf("room %d docs %d bytes, take %d of %v: took %d, want %d", c.docs, c.bytes, i, sizes, got, c.want[i])
			}
		}
	}
	rm := newRoom(10, 100)
	if rm.take(60, []int{30, 30}) != 1 || rm.take(0, []int{1}) != 1 || rm.take(0, []int{10}) != 0 {
		t.Error("a batch header does not count against the room")
	}
}

func TestScansAskForWhatFits(t *testing.T) {
	sizes := func(n, each int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = each
		}
		return out
	}
	for _, c := range []struct {
		limit  int
		sizes  []int
		want   int
		reason string
	}{
		{16, sizes(16, 100), 32, "small documents: twice as many"},
		{400, sizes(400, 100), 500, "at most MaxBatchDocs"},
		{64, sizes(64, 100<<10), 81, "8 MiB of 100 KiB documents"},
		{500, sizes(500, 1<<20), 8, "after small ones, 1 MiB ones: 8"},
		{8, sizes(8, 20<<20), 1, "larger than the bound: one at a time"},
		{16, nil, 16, "nothing read: as before"},
	} {
		if got := nextScanLimit(c.limit, c.sizes, 500, 8<<20); got != c.want {
			t.Errorf("%s: after asking for %d, %d; want %d", c.reason, c.limit, got, c.want)
		}
	}
}

// A run too large for the room gives the documents that fit, in a batch
// that leaves the replica where the run starts; the rest stays queued and
// moves the replica to the run's end. Runs that follow on are merged.
func TestQueuedRunsAreCutToTheRequestsBounds(t *testing.T) {
	s := New((&wiring{
		epochStart: func(int, uint64) store.Position { return store.Position{} },
		epoch:      func(int) (uint64, bool) { return 1, true },
		replicas:   func(int) []string { return []string{"r"} },
		last:       func(int) store.Position { return store.Position{Epoch: 1, Seq: 5} },
	}).config(Config{}))
	defer s.Close()
	pos := func(seq uint64) store.Position { return store.Position{Epoch: 1, Seq: seq} }
	run := func(from, upTo uint64) queuedRun {
		r := queuedRun{Batch: store.Batch{Partition: 0, Epoch: 1, From: pos(from), UpTo: pos(upTo)}}
		for seq := from + 1; seq <= upTo; seq++ {
			r.Docs = append(r.Docs, &store.Doc{Key: fmt.Sprintf("k%d", seq), Pos: pos(seq)})
			r.sizes = append(r.sizes, 100)
		}
		return r
	}
	pr := &progress{known: true, queue: []queuedRun{run(0, 2), run(2, 5)}, queued: 5}
	rm := newRoom(500, wireBatchBase+350)
	out, all := s.takeRuns(pr, 0, &rm)
	if all || len(out) != 1 {
		t.Fatalf("took %d batches, queue emptied %v; want one batch and a rest", len(out), all)
	}
	if b := out[0]; b.From != pos(0) || b.UpTo != pos(2) || len(b.Docs) != 3 || b.Docs[2].Pos != pos(3) {
		t.Fatalf("the first request: %+v", b)
	}
	if len(pr.queue) != 1 || pr.queue[0].From != pos(2) || pr.queue[0].UpTo != pos(5) || len(pr.queue[0].Docs) != 2 || pr.queued != 2 {
		t.Fatalf("left queued: %+v (%d documents)", pr.queue, pr.queued)
	}
	pr.acked = pos(2)
	rm = newRoom(500, wireBatchBase+350)
	out, all = s.takeRuns(pr, 0, &rm)
	if !all || len(out) != 1 || out[0].From != pos(2) || out[0].UpTo != pos(5) || len(out[0].Docs) != 2 {
		t.Fatalf("the second request: %+v (all %v)", out, all)
	}
}

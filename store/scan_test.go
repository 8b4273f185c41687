package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// ScanEach hands over every live document of the collection once, across
// batches sized by document size, and stops at fn's first error, returning
// it as it is.
func TestScanEach(t *testing.T) {
	s := openTestStore(t)
	w := NewWriter(s, 1, WriterOptions{})
	defer w.Close(context.Background())
	ctx := context.Background()
	const total = 60
	var ops []Op
	for i := range total {
		// Small documents and some of 300 KB: batches of many and of few.
		body := map[string]any{"i": int64(i)}
		if i%5 == 0 {
			body["s"] = strings.Repeat("x", 300<<10)
		}
		ops = append(ops, Op{Partition: 0, User: "u", Coll: "c", ID: fmt.Sprintf("d%02d", i), Fresh: true, Mutate: put(body)})
	}
	ops = append(ops, Op{Partition: 0, User: "u", Coll: "other", ID: "x", Fresh: true, Mutate: put(map[string]any{})})
	for _, r := range w.DoAll(ctx, ops) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if res := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "d01", Mutate: func(*Doc) (Next, error) { return Next{Delete: true}, nil }}); res.Err != nil {
		t.Fatal(res.Err)
	}
	seen := map[string]int{}
	if err := s.ScanEach(ctx, 0, "u", "c", "", func(d *Doc) error { seen[d.ID]++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != total-1 || seen["d01"] != 0 {
		t.Fatalf("ScanEach handed over %d documents (d01 %d times), want the %d live ones", len(seen), seen["d01"], total-1)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s handed over %d times", id, n)
		}
	}
	stop := errors.New("enough")
	calls := 0
	err := s.ScanEach(ctx, 0, "u", "c", "", func(*Doc) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("ScanEach after fn's error: %v after %d calls, want fn's error after 1", err, calls)
	}
}

func TestBatchFor(t *testing.T) {
	for _, tc := range []struct {
		avg, target int64
		want        int32
	}{{200, 4 << 20, 1024}, {900 << 10, 4 << 20, 4}, {64 << 10, 4 << 20, 64}, {0, 4 << 20, 1024}, {10 << 20, 4 << 20, 4}} {
		if got := batchFor(tc.avg, tc.target); got != tc.want {
			t.Errorf("batchFor(%d, %d) = %d, want %d", tc.avg, tc.target, got, tc.want)
		}
	}
}

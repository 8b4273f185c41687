package doc

import (
	"math"
	"sort"
	"sync"
	"testing"
	"time"
)

func TestNewIDValidAndIncreasing(t *testing.T) {
	const n = 20000
	prev := ""
	for i := 0; i < n; i++ {
		id := NewID()
		if len(id) < 20 || len(id) > 26 {
			t.Fatalf("id %q has length %d", id, len(id))
		}
		if err := ValidID(id); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		if id <= prev {
			t.Fatalf("id %q is not greater than the previous id %q", id, prev)
		}
		prev = id
	}
}

func TestNewIDConcurrentUnique(t *testing.T) {
	const goroutines, perG = 8, 12500
	results := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ids := make([]string, perG)
			for i := range ids {
				ids[i] = NewID()
			}
			results[g] = ids
		})
	}
	wg.Wait()
	seen := make(map[string]bool, goroutines*perG)
	for _, ids := range results {
		// Each goroutine sees increasing ids.
		if !sort.StringsAreSorted(ids) {
			t.Error("ids from one goroutine are not increasing")
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %q", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != goroutines*perG {
		t.Fatalf("got %d ids, want %d", len(seen), goroutines*perG)
	}
}

func TestNewIDTimeOrder(t *testing.T) {
	a := NewID()
	time.Sleep(2 * time.Millisecond)
	b := NewID()
	if a[:10] >= b[:10] {
		t.Errorf("time prefix did not advance: %q then %q", a, b)
	}
	// The first 10 characters (50 bits) encode the 128-bit number's top 48
	// bits, the millisecond time, preceded by the 2 unused top bits.
	var ms uint64
	for i := 0; i < 10; i++ {
		ms = ms<<5 | uint64(indexOf(b[i]))
	}
	now := uint64(time.Now().UnixMilli())
	if ms > now || now-ms > 1000 {
		t.Errorf("id %q encodes time %d, now is %d", b, ms, now)
	}
}

func indexOf(c byte) int {
	for i := 0; i < len(idAlphabet); i++ {
		if idAlphabet[i] == c {
			return i
		}
	}
	return -1
}

func TestIDGeneratorMonotonic(t *testing.T) {
	var g idGenerator
	prev := ""
	check := func(id string) {
		t.Helper()
		if id <= prev || len(id) != idLength || ValidID(id) != nil {
			t.Fatalf("id %q after %q", id, prev)
		}
		prev = id
	}
	// Same millisecond, the clock going back and forward again.
	for _, ms := range []uint64{1000, 1000, 1000, 999, 0, 1000, 1001, 1001, 5000, 4000} {
		check(g.next(ms))
	}
	// Overflow of the random part carries into the time.
	g.hi, g.lo = 6000<<randomHiBits|(1<<randomHiBits-1), math.MaxUint64
	prev = encodeID(g.hi, g.lo)
	check(g.next(6000))
	if g.hi>>randomHiBits != 6001 {
		t.Errorf("carry: time is %d, want 6001", g.hi>>randomHiBits)
	}
	check(g.next(6000))
	check(g.next(6002))
}

func TestEncodeID(t *testing.T) {
	for _, c := range []struct {
		hi, lo uint64
		want   string
	}{
		{0, 0, "00000000000000000000000000"},
		{0, 1, "00000000000000000000000001"},
		{0, 32, "00000000000000000000000010"},
		{math.MaxUint64, math.MaxUint64, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"},
	} {
		if got := encodeID(c.hi, c.lo); got != c.want {
			t.Errorf("encodeID(%#x, %#x) = %q, want %q", c.hi, c.lo, got, c.want)
		}
	}
	// Order is preserved across the hi/lo boundary.
	if !(encodeID(0, math.MaxUint64) < encodeID(1, 0)) {
		t.Error("order not preserved")
	}
	if !sort.StringsAreSorted([]string{idAlphabet[:1], idAlphabet[1:2], idAlphabet[31:]}) {
		t.Error("alphabet not sorted")
	}
	for i := 1; i < len(idAlphabet); i++ {
		if idAlphabet[i-1] >= idAlphabet[i] {
			t.Fatalf("alphabet not in ASCII order at %d", i)
		}
	}
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		NewID()
	}
}

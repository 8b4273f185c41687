package query

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ascending lists values in strictly ascending order of Compare.
var ascending = []any{
	nil,
	math.NaN(),
	math.Inf(-1),
	-1e19,
	int64(math.MinInt64),
	-9.2233720368547748e18, // just above MinInt64
	int64(-1),
	-0.5,
	int64(0),
	math.SmallestNonzeroFloat64,
	0.5,
	int64(1),
	1.5,
	int64(1 << 53),
	int64(1<<53 + 1),
	float64(1<<53 + 2),
	int64(math.MaxInt64 - 1),
	int64(math.MaxInt64),
	9.223372036854775808e18, // 2^63
	1e300,
	math.Inf(1),
	"",
	"A",
	"B",
	"a",
	"ab",
	"b",
	"\xff",
	map[string]any{},
	map[string]any{"a": nil},
	map[string]any{"a": int64(1)},
	map[string]any{"a": int64(1), "b": nil},
	map[string]any{"a": "x"},
	map[string]any{"b": int64(0)},
	[]any{},
	[]any{nil},
	[]any{int64(1)},
	[]any{int64(1), int64(2)},
	[]any{int64(2)},
	[]any{"a"},
	[]any{[]any{}},
	false,
	true,
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func TestCompareOrder(t *testing.T) {
	for i, a := range ascending {
		for j, b := range ascending {
			if got, want := Compare(a, b), sign(i-j); got != want {
				t.Errorf("Compare(%#v, %#v) = %d, want %d", a, b, got, want)
			}
			if got, want := equal(a, b), i == j; got != want {
				t.Errorf("equal(%#v, %#v) = %v, want %v", a, b, got, want)
			}
		}
	}
}

func TestCompareEqualValues(t *testing.T) {
	pairs := [][2]any{
		{int64(1), 1.0},
		{int64(0), math.Copysign(0, -1)},
		{0.0, math.Copysign(0, -1)},
		{math.NaN(), math.NaN()},
		{int64(1 << 53), float64(1 << 53)},
		{map[string]any{"a": int64(1), "b": []any{2.0}}, map[string]any{"b": []any{int64(2)}, "a": 1.0}},
		{[]any{int64(1), "x"}, []any{1.0, "x"}},
		{nil, nil},
		{1, int64(1)},
		{float32(0.5), 0.5},
		{struct{}{}, otherValue{}},
	}
	for _, p := range pairs {
		if c := Compare(p[0], p[1]); c != 0 {
			t.Errorf("Compare(%#v, %#v) = %d, want 0", p[0], p[1], c)
		}
		if !equal(p[0], p[1]) {
			t.Errorf("equal(%#v, %#v) = false", p[0], p[1])
		}
	}
	if Compare(true, struct{}{}) >= 0 {
		t.Error("values outside the model must sort last")
	}
}

// randomValue returns a value drawn from a small space, so that ties,
// near-ties and mixed int/float comparisons are frequent.
func randomValue(r *rand.Rand, depth int) any {
	nums := []any{
		int64(0), 0.0, math.Copysign(0, -1), int64(1), 1.0, 1.5, int64(-3), -3.25,
		int64(1 << 53), float64(1 << 53), int64(1<<53 + 1), float64(1<<53 + 2),
		int64(math.MaxInt64), 9.223372036854775808e18, int64(math.MinInt64), -9.223372036854775808e18,
		math.Inf(1), math.Inf(-1), math.NaN(), 1e300,
	}
	n := 8
	if depth > 2 {
		n = 6
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1, 2:
		return nums[r.IntN(len(nums))]
	case 3:
		return []string{"", "a", "b", "ab", "B", "\xff"}[r.IntN(6)]
	case 4:
		return r.IntN(2) == 0
	case 5:
		return otherValue{}
	case 6:
		arr := make([]any, r.IntN(3))
		for i := range arr {
			arr[i] = randomValue(r, depth+1)
		}
		return arr
	default:
		m := map[string]any{}
		for range r.IntN(3) {
			m[[]string{"a", "b", "c"}[r.IntN(3)]] = randomValue(r, depth+1)
		}
		return m
	}
}

// TestCompareTotalOrder checks antisymmetry, consistency with equal and,
// by sorting and checking every pair, transitivity.
func TestCompareTotalOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]any, 400)
	for i := range vals {
		vals[i] = randomValue(r, 0)
	}
	for _, a := range vals[:100] {
		for _, b := range vals {
			c := Compare(a, b)
			if c != -Compare(b, a) {
				t.Fatalf("Compare not antisymmetric on %#v, %#v", a, b)
			}
			if (c == 0) != equal(a, b) {
				t.Fatalf("equal(%#v, %#v) disagrees with Compare = %d", a, b, c)
			}
		}
	}
	slices.SortFunc(vals, Compare)
	for i := range vals {
		for j := i + 1; j < len(vals); j++ {
			if Compare(vals[i], vals[j]) > 0 {
				t.Fatalf("not transitive: after sorting, %#v (at %d) > %#v (at %d)", vals[i], i, vals[j], j)
			}
		}
	}
}

func TestCompareIntFloat(t *testing.T) {
	tests := []struct {
		i    int64
		f    float64
		want int
	}{
		{0, 0, 0},
		{0, 0.1, -1},
		{0, -0.1, 1},
		{-1, -0.5, -1},
		{-1, -1.5, 1},
		{math.MaxInt64, 9.223372036854775808e18, -1},
		{math.MinInt64, -9.223372036854775808e18, 0},
		{math.MinInt64, math.Inf(-1), 1},
		{1<<53 + 1, 1 << 53, 1},
		{1<<53 + 1, 1<<53 + 2, -1},
		{5, math.NaN(), 1},
	}
	for _, tt := range tests {
		if got := compareIntFloat(tt.i, tt.f); got != tt.want {
			t.Errorf("compareIntFloat(%d, %g) = %d, want %d", tt.i, tt.f, got, tt.want)
		}
	}
}

func TestTypeOf(t *testing.T) {
	tests := []struct {
		v    any
		want typeMask
	}{
		{nil, typeNull},
		{int64(5), typeInt | typeLong},
		{int64(math.MaxInt32 + 1), typeLong},
		{int64(math.MinInt32), typeInt | typeLong},
		{2.0, typeDouble},
		{"s", typeString},
		{[]any{}, typeArray},
		{map[string]any{}, typeObject},
		{true, typeBool},
		{struct{}{}, 0},
	}
	for _, tt := range tests {
		if got := typeOf(tt.v); got != tt.want {
			t.Errorf("typeOf(%#v) = %b, want %b", tt.v, got, tt.want)
		}
	}
}

func ExampleCompare() {
	vals := []any{true, []any{int64(1)}, map[string]any{"a": int64(1)}, "b", 2.5, int64(2), nil}
	slices.SortFunc(vals, Compare)
	fmt.Println(vals...)
	// Output: <nil> 2 2.5 b map[a:1] [1] true
}

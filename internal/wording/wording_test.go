package wording

import "testing"

func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		s, r, v bool
		want    string
	}{
		{true, true, true, "S R V"}, {true, true, false, "S R -"}, {false, true, false, "- R -"}, {false, false, false, "-"},
	} {
		if got := Roles(tc.s, tc.r, tc.v); got != tc.want {
			t.Errorf("Roles(%v,%v,%v) = %q, want %q", tc.s, tc.r, tc.v, got, tc.want)
		}
	}
}

func TestNaturalLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"node2", "node10", true}, {"node10", "node2", false}, {"node1", "node1", false},
		{"a", "b", true}, {"node", "node1", true}, {"node01", "node2", true}, {"n2x", "n2y", true},
	} {
		if got := NaturalLess(tc.a, tc.b); got != tc.want {
			t.Errorf("NaturalLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestRanges(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{nil, ""}, {[]int{5}, "5"}, {[]int{0, 1, 2, 3, 7, 9, 10, 11, 12}, "0-3,7,9-12"}, {[]int{1, 3}, "1,3"}, {[]int{4, 5}, "4-5"}} {
		if got := Ranges(c.in); got != c.want {
			t.Errorf("Ranges(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

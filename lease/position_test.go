package lease

import (
	"slices"
	"testing"
)

func TestPositionCompare(t *testing.T) {
	ordered := []Position{{0, 0}, {0, 9}, {1, 0}, {1, 1}, {2, 0}}
	for i, p := range ordered {
		for j, q := range ordered {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := p.Compare(q); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", p, q, got, want)
			}
		}
	}
	if s := (Position{3, 17}).String(); s != "3.17" {
		t.Errorf("String = %q", s)
	}
}

func TestMayCampaign(t *testing.T) {
	type pos = map[string]Position
	cases := []struct {
		name string
		self string
		ps   pos
		rf   int
		ok   bool
		why  string
	}{
		{"rf 2, alone", "b", pos{"b": {3, 5}}, 2, true, ""},
		{"rf 3, alone is not enough", "b", pos{"b": {3, 5}}, 3, false, "heard from 1 of 3 members, need 2"},
		{"rf 3, highest of two", "b", pos{"b": {3, 5}, "c": {3, 4}}, 3, true, ""},
		{"rf 3, other ahead by seq", "b", pos{"b": {3, 5}, "c": {3, 6}}, 3, false, "c is ahead at 3.6, b is at 3.5"},
		{"epoch before seq", "b", pos{"b": {3, 90}, "c": {4, 1}}, 3, false, "c is ahead at 4.1, b is at 3.90"},
		{"tie, lower id wins", "a", pos{"a": {3, 5}, "b": {3, 5}}, 3, true, ""},
		{"tie, higher id yields", "b", pos{"a": {3, 5}, "b": {3, 5}}, 3, false, "a is as current (3.5) and has a lower id"},
		{"rf 5 needs three", "c", pos{"c": {2, 2}, "d": {2, 1}}, 5, false, "heard from 2 of 5 members, need 3"},
		{"rf 5 with three", "c", pos{"c": {2, 2}, "d": {2, 1}, "e": {1, 9}}, 5, true, ""},
		{"own position missing", "x", pos{"a": {1, 1}, "b": {1, 1}}, 3, false, "own applied position unknown: x is not among the 2 positions heard"},
		{"bad rf", "a", pos{"a": {1, 1}}, 0, false, "replication factor 0 is not positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, why := MayCampaign(c.self, c.ps, c.rf)
			if ok != c.ok || why != c.why {
				t.Fatalf("got (%v, %q), want (%v, %q)", ok, why, c.ok, c.why)
			}
		})
	}
}

// TestMayCampaignOneWinner: among members that all heard from each other,
// exactly one may campaign.
func TestMayCampaignOneWinner(t *testing.T) {
	ps := map[string]Position{"n1": {2, 8}, "n2": {2, 9}, "n3": {2, 9}, "n4": {1, 20}}
	var winners []string
	for id := range ps {
		if ok, _ := MayCampaign(id, ps, 3); ok {
			winners = append(winners, id)
		}
	}
	if !slices.Equal(winners, []string{"n2"}) {
		t.Fatalf("winners %v, want [n2]", winners)
	}
}

package shard

import (
	"fmt"
	"slices"
	"testing"
)

func TestSuccessionStartsWithTheOwnerAndCoversEveryMember(t *testing.T) {
	members := []Member{{ID: "a", Sharding: true}, {ID: "b", Sharding: true}, {ID: "c", Sharding: true}, {ID: "d", Sharding: true}}
	r, err := NewRing(members, 64)
	if err != nil {
		t.Fatal(err)
	}
	seconds := map[string]int{}
	for p := 0; p < 64; p++ {
		s := Succession(r, p)
		if s[0] != r.Owner(p) || len(s) != 4 {
			t.Fatalf("partition %d: succession %v, owner %s", p, s, r.Owner(p))
		}
		sorted := slices.Sorted(slices.Values(s))
		if !slices.Equal(sorted, []string{"a", "b", "c", "d"}) {
			t.Fatalf("partition %d: succession %v is not a permutation of the members", p, s)
		}
		seconds[s[1]]++
	}
	// A dead owner's partitions spread over the others, not onto one.
	if len(seconds) < 3 {
		t.Fatalf("second in line is concentrated: %v", seconds)
	}
}

func TestShouldMasterPicksTheFirstAvailable(t *testing.T) {
	r, err := NewRing([]Member{{ID: "n1", Sharding: true}, {ID: "n2", Sharding: true}, {ID: "n3", Sharding: true}}, 32)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < 32; p++ {
		s := Succession(r, p)
		all := func(string) bool { return true }
		downFirst := func(id string) bool { return id != s[0] }
		for _, m := range s {
			want := m == s[0]
			if got := ShouldMaster(r, p, m, all); got != want {
				t.Fatalf("p%d all up: %s should master = %v", p, m, got)
			}
			if m == s[0] {
				continue // a node always counts itself as available
			}
			want = m == s[1]
			if got := ShouldMaster(r, p, m, downFirst); got != want {
				t.Fatalf("p%d owner down: %s should master = %v (succession %s)", p, m, got, fmt.Sprint(s))
			}
		}
	}
}

package shard

import (
	"slices"
	"testing"
)

func TestVoters(t *testing.T) {
	cases := []struct {
		name    string
		members []Member
		want    []string
	}{
		{"flagged voters only, sorted", []Member{
			{ID: "c", Sharding: true, Voter: true},
			{ID: "a", Voter: true},
			{ID: "b", Sharding: true},
		}, []string{"a", "c"}},
		{"none flagged: every sharding member", []Member{
			{ID: "z", Sharding: true},
			{ID: "r", Replica: true},
			{ID: "m", Sharding: true, Replica: true},
		}, []string{"m", "z"}},
		{"none flagged, none sharding", []Member{{ID: "r", Replica: true}}, nil},
		{"no members", nil, nil},
		{"duplicate id counts once", []Member{
			{ID: "a", Voter: true}, {ID: "a", Voter: true}, {ID: "b", Voter: true},
		}, []string{"a", "b"}},
		{"empty id ignored", []Member{{ID: "", Voter: true}, {ID: "a", Sharding: true}}, []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Voters(c.members); !slices.Equal(got, c.want) {
				t.Fatalf("Voters = %v, want %v", got, c.want)
			}
			rev := slices.Clone(c.members)
			slices.Reverse(rev)
			if got := Voters(rev); !slices.Equal(got, c.want) {
				t.Fatalf("Voters(reversed) = %v, want %v", got, c.want)
			}
		})
	}
}

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
		// Two majorities always share a voter; a minority cannot decide.
		if 2*Majority(n) <= n {
			t.Errorf("two majorities of %d can be disjoint", n)
		}
	}
}

package node

import (
	"slices"
	"testing"

	"github.com/shoal-db/shoal/cluster"
)

// A tenure's check asks the UP regular copies of its list; when the list
// names no other copy (a grant taken back after a restart, before the
// table knew the list), it asks every UP member, and only those holding
// the partition count (seed 11110: a tenure so taken back had nobody to
// ask).
func TestATenuresCheckAsksEveryMemberWhenItsListNamesNoOther(t *testing.T) {
	states := map[string]cluster.State{"x": cluster.Up, "a": cluster.Up, "b": cluster.Down, "c": cluster.Up}
	for _, tc := range []struct {
		name     string
		regular  []string
		members  []string
		everyone bool
	}{
		{"the regular copies up", []string{"x", "a", "b"}, []string{"a"}, false},
		{"a list of this node alone", []string{"x"}, []string{"a", "c"}, true},
		{"no list", nil, []string{"a", "c"}, true},
	} {
		got := confirmAsks("x", tc.regular, states)
		if !slices.Equal(got.members, tc.members) || got.everyone != tc.everyone {
			t.Errorf("%s: asks %v (everyone %v), want %v (everyone %v)", tc.name, got.members, got.everyone, tc.members, tc.everyone)
		}
	}
}

package torture

import (
	"slices"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/shard"
)

// A fault aimed at a replica waits for a placement that names a live one:
// a master that has just taken the lease may name itself alone (seed 5000
// failed as not healed on "responsible: []").
func TestAReplicaFaultWaitsForALiveReplicaNamed(t *testing.T) {
	live := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	cases := []struct {
		name        string
		responsible []string
		live        func(string) bool
		target      bool
	}{
		{"no responsible list yet", nil, live("node1", "node2", "node3"), false},
		{"the master alone", []string{"node3"}, live("node1", "node2", "node3"), false},
		{"every replica down", []string{"node3", "node1", "node2"}, live("node3"), false},
		{"one live replica", []string{"node3", "node1", "node2"}, live("node3", "node2"), true},
	}
	for _, c := range cases {
		why := namesALiveReplica("node3", c.responsible, c.live)
		if (why == "") != c.target {
			t.Errorf("%s: %q, want a target: %v", c.name, why, c.target)
		}
		if why != "" && !strings.Contains(why, "no live replica") {
			t.Errorf("%s: %q does not say what is missing", c.name, why)
		}
	}
}

func TestUsersOfEachPartition(t *testing.T) {
	for _, count := range []int{1, 8, 64} {
		users := usersOfEachPartition(count)
		for p := 0; p < count; p++ {
			if u, ok := users[p]; !ok || shard.PartitionOf(u, count) != p {
				t.Errorf("%d partitions: partition %d has user %q (of partition %d)", count, p, u, shard.PartitionOf(u, count))
			}
		}
	}
}

package shard

import "slices"

// Voters returns the sorted ids of the lease voters: the members with Voter
// set or, when none is, every member with Sharding set. An id listed twice
// counts once.
func Voters(members []Member) []string {
	var ids []string
	for _, m := range members {
		if m.Voter && m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		for _, m := range members {
			if m.Sharding && m.ID != "" {
				ids = append(ids, m.ID)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Majority returns how many of n voters make a majority: n/2+1. Any two
// majorities of the same n voters share at least one voter.
func Majority(n int) int {
	return n/2 + 1
}

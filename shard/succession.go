package shard

import (
	"encoding/binary"
	"slices"
	"strings"
)

// Succession orders the nodes that may master a partition: its ring owner
// (the preferred master) first, then the other sharding members by
// rendezvous hash of (partition, member). Every node computes the same
// order from the same peer list, and the order of the others does not
// depend on which member happens to be down.
func Succession(r *Ring, partition int) []string {
	owner := r.Owner(partition)
	rest := slices.DeleteFunc(slices.Clone(r.Members()), func(m string) bool { return m == owner })
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], uint64(partition))
	score := func(m string) uint64 { return mix64(Hash(append(append(key[:], 0), m...))) }
	slices.SortFunc(rest, func(a, b string) int {
		sa, sb := score(a), score(b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return append([]string{owner}, rest...)
}

// ShouldMaster says whether self should hold partition's lease: it is the
// first member of the succession that up reports as available.
func ShouldMaster(r *Ring, partition int, self string, up func(id string) bool) bool {
	return FirstAvailable(Succession(r, partition), self, up)
}

// FirstAvailable says whether self comes before every available node of
// order (a node always counts itself as available).
func FirstAvailable(order []string, self string, up func(id string) bool) bool {
	for _, m := range order {
		if m == self {
			return true
		}
		if up(m) {
			return false
		}
	}
	return false
}

// TakeoverOrder is who takes a partition over when its master is gone: the
// members of its responsible list first (they hold copies of its data, the
// master's first), then the rest of its succession.
func TakeoverOrder(responsible, succession []string) []string {
	out := slices.Clone(responsible)
	for _, m := range succession {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

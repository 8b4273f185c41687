package shard

import (
	"cmp"
	"slices"
)

// Candidate is what replica choice knows about one peer.
type Candidate struct {
	ID          string
	Replica     bool   // the peer list allows it to hold replicas
	Up          bool   // gossip reports it UP now
	FreeBytes   uint64 // free disk it last reported
	DownTooLong bool   // DOWN for longer than the grace period
	Listed      bool   // still in the peer list
	// Tie orders candidates with about the same free disk (within ~1%),
	// before their ids: a caller gives each partition its own order (a hash
	// of partition and id), so that nodes with equal disks share the
	// replicas instead of the first id taking them all.
	Tie uint64
}

// ChooseReplicas returns the replicas of a partition whose master is
// master: at most rf-1 ids (rf counts every copy, the master's included),
// none if rf < 2.
//
// Replicas are sticky. Every replica in current is kept, in its order, while
// it is listed, allowed to hold replicas, not the master and not
// DownTooLong, even if it is not Up at the moment: a short outage must not
// start a full copy elsewhere. If more are kept than there are slots (extra
// copies follow the regular ones in current, or the replication factor
// went down), the earlier ones in current keep them, Up or not. The free
// slots are then filled greedily
// with the candidates that have the most FreeBytes among those Up, Listed,
// allowed to hold replicas and not already chosen or the master; about
// equal FreeBytes (within ~1%) go by Tie, then to the lower id. With too few such candidates the result is
// shorter; that is not an error.
//
// The result depends only on the arguments (candidates in any order give
// the same answer; if an id is listed twice, its first entry counts).
// Free disk is compared at about 1% resolution; candidates within it are
// ordered by Tie, then id.
func ChooseReplicas(master string, current []string, candidates []Candidate, rf int) []string {
	slots := rf - 1
	if slots <= 0 {
		return []string{}
	}
	byID := make(map[string]Candidate, len(candidates))
	for _, c := range candidates {
		if _, dup := byID[c.ID]; !dup && c.ID != "" {
			byID[c.ID] = c
		}
	}

	chosen := make(map[string]bool, slots)
	var kept []string
	for _, id := range current {
		c, ok := byID[id]
		if !ok || chosen[id] || id == master || !c.Listed || !c.Replica || c.DownTooLong {
			continue
		}
		chosen[id] = true
		kept = append(kept, id)
	}
	if len(kept) > slots {
		// The earliest in current keep the slots, Up or not: the caller
		// lists the regular replicas (those write concerns and promotion
		// count) first and extra copies after them, and an extra copy
		// that took the slot of a regular replica merely unreachable would
		// be counted by a master cut off with it while the other copies,
		// deciding a promotion on the list they last heard, never ask it.
		for _, id := range kept[slots:] {
			delete(chosen, id)
		}
		kept = kept[:slots]
	}

	result := append(make([]string, 0, slots), kept...)
	if len(result) == slots {
		return result
	}
	var pool []Candidate
	for _, c := range byID {
		if c.ID != master && !chosen[c.ID] && c.Up && c.Listed && c.Replica && !c.DownTooLong {
			pool = append(pool, c)
		}
	}
	slices.SortFunc(pool, func(a, b Candidate) int {
		if a.FreeBytes != b.FreeBytes {
			return cmp.Compare(b.FreeBytes, a.FreeBytes) // most free first
		}
		return cmp.Compare(a.ID, b.ID)
	})
	// Take the candidates with about the most free disk (within 1% of the
	// most) as one group, in Tie order; then the next group, and so on.
	for len(pool) > 0 && len(result) < slots {
		floor := pool[0].FreeBytes - pool[0].FreeBytes/100
		g := 1
		for g < len(pool) && pool[g].FreeBytes >= floor {
			g++
		}
		group := slices.Clone(pool[:g])
		slices.SortFunc(group, func(a, b Candidate) int {
			if a.Tie != b.Tie {
				return cmp.Compare(a.Tie, b.Tie)
			}
			return cmp.Compare(a.ID, b.ID)
		})
		for _, c := range group {
			if len(result) == slots {
				break
			}
			result = append(result, c.ID)
		}
		pool = pool[g:]
	}
	return result
}

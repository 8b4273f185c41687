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
}

// ChooseReplicas returns the replicas of a partition whose master is
// master: at most rf-1 ids (rf counts every copy, the master's included),
// none if rf < 2.
//
// Replicas are sticky. Every replica in current is kept, in its order, while
// it is listed, allowed to hold replicas, not the master and not
// DownTooLong, even if it is not Up at the moment: a short outage must not
// start a full copy elsewhere. Only if more are kept than there are slots
// (the replication factor went down) are the ones that are Up preferred,
// then the earlier ones in current. The free slots are then filled greedily
// with the candidates that have the most FreeBytes among those Up, Listed,
// allowed to hold replicas and not already chosen or the master; equal
// FreeBytes go to the lower id. With too few such candidates the result is
// shorter; that is not an error.
//
// The result depends only on the arguments (candidates in any order give
// the same answer; if an id is listed twice, its first entry counts).
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
		up := 0
		for _, id := range kept {
			if byID[id].Up {
				up++
			}
		}
		// Keep the first `slots` by (Up first, then order in current),
		// and return them in their order in current.
		keepDown := max(slots-up, 0)
		keepUp := slots - keepDown
		trimmed := kept[:0:0]
		for _, id := range kept {
			if byID[id].Up && keepUp > 0 {
				keepUp--
			} else if !byID[id].Up && keepDown > 0 {
				keepDown--
			} else {
				delete(chosen, id)
				continue
			}
			trimmed = append(trimmed, id)
		}
		kept = trimmed
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
	for _, c := range pool {
		if len(result) == slots {
			break
		}
		result = append(result, c.ID)
	}
	return result
}

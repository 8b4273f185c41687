package lease

import (
	"slices"
	"time"
)

// NextVoterSet moves the voter set from current towards target one member at
// a time: first the additions, in id order, then the removals, in id order.
// Majorities of two sets that differ by one member always share a voter;
// majorities of sets further apart may not. lastChange is when the caller
// last changed its voter set (the zero time if never); settle is the least
// time between two steps, LEASE_TTL + PEERS_REFRESH, so that every node has
// taken the previous step (it saw the peer list within PEERS_REFRESH) and
// every lease counted under the set before it has run out.
//
// It returns the set to use now (sorted, without duplicates) and how long
// until the next step may be taken: 0 once next equals target. When next
// differs from current, the caller records now as its lastChange. A caller
// that has no previous set (a cluster's first start, when no lease exists
// yet) may use target directly.
func NextVoterSet(current, target []string, lastChange, now time.Time, settle time.Duration) (next []string, wait time.Duration) {
	cur, tgt := normalize(current), normalize(target)
	var add, remove []string
	for _, id := range tgt {
		if _, found := slices.BinarySearch(cur, id); !found {
			add = append(add, id)
		}
	}
	for _, id := range cur {
		if _, found := slices.BinarySearch(tgt, id); !found {
			remove = append(remove, id)
		}
	}
	steps := len(add) + len(remove)
	if steps == 0 {
		return cur, 0
	}
	if !lastChange.IsZero() {
		if since := now.Sub(lastChange); since < settle {
			return cur, settle - since
		}
	}
	if len(add) > 0 {
		next = append(cur, add[0])
		slices.Sort(next)
	} else {
		next = slices.DeleteFunc(cur, func(id string) bool { return id == remove[0] })
	}
	if steps == 1 {
		return next, 0
	}
	return next, settle
}

// normalize returns a sorted copy of ids without duplicates or empty ids.
func normalize(ids []string) []string {
	out := make([]string, 0, len(ids)+1)
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

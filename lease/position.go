package lease

import (
	"fmt"
	"maps"
	"slices"

	"github.com/shoal-db/shoal/record"
)

// Position is where a write sits in its partition's history: the epoch of
// the master that made it, then its sequence number within the partition
// (compared epoch first). It is the type the store keeps with every
// document (store.Position is the same type), defined in the leaf package
// record so that lease does not depend on the store.
type Position = record.Position

// MayCampaign is the promotion rule: whether self may try to acquire the
// lease of a partition whose master is gone. positions holds the applied
// positions self has heard from live members of the partition's responsible
// list, its own included; rf is the replication factor.
//
// A write acknowledged with write concern majority is on rf/2+1 copies, so
// any rf-rf/2 members include one that has it: self must have heard from at
// least that many (itself included, so with rf 2 itself alone suffices), and
// its own position must be the highest of them, ties going to named (the
// master the partition table names, when the other copies wait for it: it
// is up, its lease not known to be over), then to the lowest node id, so
// that two equally current members do not both campaign and a named master
// that no longer takes its lease back does not defer to a copy that waits
// for it. On refusal the string says why, naming the better member where
// there is one.
func MayCampaign(self string, positions map[string]Position, rf int, named string) (bool, string) {
	if rf < 1 {
		return false, fmt.Sprintf("replication factor %d is not positive", rf)
	}
	own, ok := positions[self]
	if !ok {
		return false, fmt.Sprintf("own applied position unknown: %s is not among the %d positions heard", self, len(positions))
	}
	need := rf - rf/2
	if len(positions) < need {
		return false, fmt.Sprintf("heard from %d of %d members, need %d", len(positions), rf, need)
	}
	ids := make([]string, 0, len(positions))
	for id := range positions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	best := self
	for _, id := range ids {
		c := positions[id].Compare(positions[best])
		if c > 0 || c == 0 && best != named && (id == named || id < best) {
			best = id
		}
	}
	if best == self {
		return true, ""
	}
	if positions[best] == own {
		if best == named {
			return false, fmt.Sprintf("%s is as current (%s) and the partition table names it master", best, own)
		}
		return false, fmt.Sprintf("%s is as current (%s) and has a lower id", best, own)
	}
	return false, fmt.Sprintf("%s is ahead at %s, %s is at %s", best, positions[best], self, own)
}

// ConfirmTenure decides whether a node that won a partition's lease by the
// promotion rule may take writes. The positions it campaigned on were
// heard before it won, and the old master may have acknowledged majority
// writes through another copy after one of those answers: only positions
// heard since the win count here (the old master stopped writing before
// the new lease could be granted).
//
// up are the answers of copies that could campaign themselves; over those
// of copies whose lease is over (a former master cut off from the voters,
// or a winner that yielded). A copy up and ahead makes this node step down,
// so that it campaigns. The tenure is confirmed once rf - rf/2 copies,
// this node included, have answered and none up is ahead; answers of
// copies whose lease is over count towards that only when the others are
// too few, and then one of them ahead makes this node wait (its extra
// writes may have a majority with a copy not heard), never step down: it
// may be unable to win.
func ConfirmTenure(self string, own Position, up, over map[string]Position, rf int) (confirmed, stepDown bool, why string) {
	return confirmTenure(self, own, up, over, rf-rf/2, true)
}

// ConfirmOnList is ConfirmTenure over the copies of list alone: the
// regular copies the previous master last counted writes on, as the
// lease voters keep them (record.CopyList), when this node's table names
// another list. Answers of other copies do not count, and this node
// counts itself only if list names it: a write acknowledged on a
// majority of list is then on one of the copies heard. A list shorter
// than rf (fewer nodes could hold a copy) needs that many fewer answers,
// and one of fewer than rf/2+1 copies, which never held a majority
// write, none: only a copy of it ahead still counts.
//
// A copy of list whose lease is over that is ahead makes this node wait,
// as for ConfirmTenure, unless the list's other copies (this node
// included, if it counts) could never be enough without it: then waiting
// is for good, and this node steps down (it took no write) so that that
// copy campaigns (a master restarted after a copy that lacked its writes
// was promoted alone: found with the count of copies rising). A copy
// gone for good that has not answered (gone: out of the peer list and no
// longer seen by gossip, or down past REPLICA_REPLACE_AFTER; nil: none)
// is never among those others: it will not answer. (A drained node was
// stopped while an older list of the voters still named it, and the
// master then paused with a change of its own ahead: the new master
// waited for the drained node for good; seed 2211 of the fault suite at
// REPLICATION_FACTOR 4.)
func ConfirmOnList(self string, own Position, up, over map[string]Position, list []string, rf int, gone func(id string) bool) (confirmed, stepDown bool, why string) {
	selfCounts := slices.Contains(list, self)
	confirmed, stepDown, why = confirmOnList(self, own, up, over, list, rf, selfCounts)
	if confirmed || stepDown {
		return confirmed, stepDown, why
	}
	if id, ok := waitedForGood(self, own, up, over, list, rf, selfCounts, gone); ok {
		return false, true, fmt.Sprintf("%s, whose lease is over, is ahead at %s, and without it too few copies of the list %v remain to confirm this node (at %s): it yields so that %s campaigns", id, over[id], list, own, id)
	}
	return confirmed, stepDown, why
}

// waitedForGood returns a copy of list whose lease is over, ahead of own,
// without which the list's other copies (this node included if
// selfCounts; none gone for good unless it answered, up) are too few
// ever to confirm this node: waiting for it is waiting for good, and this
// node, which took no write, yields so that that copy campaigns (the
// first such copy by id).
func waitedForGood(self string, own Position, up, over map[string]Position, list []string, rf int, selfCounts bool, gone func(id string) bool) (string, bool) {
	others := 0
	for _, id := range list {
		_, answered := up[id]
		if _, o := over[id]; !o && id != self && (answered || gone == nil || !gone(id)) {
			others++
		}
	}
	if selfCounts {
		others++
	}
	if others >= len(list)-rf/2 {
		return "", false
	}
	for _, id := range slices.Sorted(maps.Keys(over)) {
		if id != self && slices.Contains(list, id) && over[id].Compare(own) > 0 {
			return id, true
		}
	}
	return "", false
}

// confirmOnList is ConfirmOnList with this node counted as a copy of list
// only if selfCounts.
func confirmOnList(self string, own Position, up, over map[string]Position, list []string, rf int, selfCounts bool) (confirmed, stepDown bool, why string) {
	in := func(m map[string]Position) map[string]Position {
		out := map[string]Position{}
		for id, pos := range m {
			if slices.Contains(list, id) {
				out[id] = pos
			}
		}
		return out
	}
	return confirmTenure(self, own, in(up), in(over), len(list)-rf/2, selfCounts)
}

// ConfirmOnLists checks a tenure won by the promotion rule against every
// list of regular copies a write may have been counted on: the table's
// (table; with everyone, when the node cannot tell which copies count and
// asks every member, ConfirmTenure decides), as before the voters kept
// lists (a write counted on it while the voters' list was not yet taken
// is on a majority of it), and each list the voters keep of the previous
// tenure (lists). A copy ahead on any of them steps down; the tenure is
// confirmed only when every one confirms it. gone says which copies are
// gone for good, as for ConfirmOnList.
func ConfirmOnLists(self string, own Position, up, over map[string]Position, table []string, everyone bool, lists []*record.CopyList, rf int, gone func(id string) bool) (confirmed, stepDown bool, why string) {
	if everyone {
		confirmed, stepDown, why = ConfirmTenure(self, own, up, over, rf)
	} else {
		confirmed, stepDown, why = ConfirmOnList(self, own, up, over, table, rf, gone)
	}
	return onEveryList(confirmed, stepDown, why, lists, func(l *record.CopyList) (bool, bool, string) {
		return ConfirmOnList(self, own, up, over, l.Copies, countedOn(l, rf), gone)
	})
}

// countedOn is the count of copies the writes counted on l were
// acknowledged under (record.CopyList.Counted), or rf, the count now, for
// a list that does not say. A list recorded while a copy that joined the
// regular ones, the count having risen, did not hold the master's whole
// history yet says the lower count: a write acknowledged then is on a
// majority of that many of its copies, and a check asks enough of them to
// find it.
func countedOn(l *record.CopyList, rf int) int {
	if l.Counted > 0 {
		return min(l.Counted, rf)
	}
	return rf
}

// NamedAtIncarnation reports whether one of lists names id at
// incarnation. Such a list was recorded as its tenure's first while the
// partition held nothing (record.CopyList.Incarnations), so no write of
// the partition's history was acknowledged before; a copy whose process
// is still that one, and that has taken nothing of the partition since
// (its store new and its copy untouched, or nothing of the partition seen
// at all: the caller says so by passing the process's own incarnation,
// never one gossip reports), has acknowledged nothing: it holds all it
// acknowledged, which is nothing, and counts as a copy holding nothing on
// every list.
func NamedAtIncarnation(id string, incarnation int64, lists []*record.CopyList) bool {
	return slices.ContainsFunc(lists, func(l *record.CopyList) bool { return l.NamesAt(id, incarnation) })
}

// onEveryList adds the decision of each of the voters' lists (decide) to
// one already made: a list that steps down decides, one not confirmed
// keeps the tenure unconfirmed (the first such says why).
func onEveryList(confirmed, stepDown bool, why string, lists []*record.CopyList, decide func(l *record.CopyList) (bool, bool, string)) (bool, bool, string) {
	for _, l := range lists {
		if stepDown {
			break
		}
		ok, step, whyNot := decide(l)
		switch {
		case step:
			confirmed, stepDown, why = false, true, whyNot
		case !ok && confirmed:
			confirmed, why = false, fmt.Sprintf("the copies the voters keep for epoch %d (%v): %s", l.Epoch, l.Copies, whyNot)
		}
	}
	return confirmed, stepDown, why
}

// ConfirmHoldingNothing decides whether self may take writes in a tenure
// it won while it holds nothing of the partition that counts: it has seen
// no epoch of it, or its copy awaits a full copy (a new store, or one
// that threw its history away). Its copy may have been emptied (a data
// directory lost) after it acknowledged writes, so it counts as no copy
// of a list, even one that names it, unless the list names it at
// incarnation, the process it runs in now: that list was recorded before
// any write counted on it (record.CopyList.Incarnations), so this
// process, which holds nothing, acknowledged none of them. With lists
// (the voters' lists of the previous tenures, as for ConfirmOnLists),
// each decides as for ConfirmOnList: a copy up that holds anything steps
// it down, and it waits until enough copies of the list have answered.
// With none kept anywhere it heard of (a voter whose store was emptied
// keeps none), it is confirmed once every member of asked (every member
// not lost for good) has answered and none holds anything of the
// partition; a member up that does steps it down. Either way a copy
// whose lease is over that holds anything, and that this node must wait
// for, steps it down too: it could never be confirmed over that copy,
// and holding the lease would keep that copy from campaigning (a former
// master restarted). gone says which copies are gone for good, as for
// ConfirmOnList.
func ConfirmHoldingNothing(self string, incarnation int64, up, over map[string]Position, asked []string, lists []*record.CopyList, rf int, gone func(id string) bool) (confirmed, stepDown bool, why string) {
	var zero Position
	if len(lists) == 0 {
		for _, id := range slices.Sorted(maps.Keys(up)) {
			if up[id] != zero {
				return false, true, fmt.Sprintf("%s holds the partition at %s, this node holds nothing of it", id, up[id])
			}
		}
		for _, id := range asked {
			_, u := up[id]
			_, o := over[id]
			if !u && !o {
				return false, false, fmt.Sprintf("no list of copies kept, and %s has not answered yet", id)
			}
		}
		if id, ok := holdingAny(over); ok {
			return false, true, fmt.Sprintf("%s, whose lease is over, holds the partition at %s, and this node holds nothing of it that counts: it yields so that %s campaigns", id, over[id], id)
		}
		return true, false, ""
	}
	return onEveryList(true, false, "", lists, func(l *record.CopyList) (bool, bool, string) {
		selfCounts := NamedAtIncarnation(self, incarnation, lists) && slices.Contains(l.Copies, self)
		counted := countedOn(l, rf)
		ok, step, why := confirmOnList(self, zero, up, over, l.Copies, counted, selfCounts)
		if ok || step {
			return ok, step, why
		}
		// A copy holding anything is ahead of this node's nothing.
		if id, yields := waitedForGood(self, zero, up, over, l.Copies, counted, selfCounts, gone); yields {
			return false, true, fmt.Sprintf("%s, whose lease is over, holds the partition at %s, and without it too few copies of the list %v remain to confirm this node, which holds nothing of it that counts: it yields so that %s campaigns", id, over[id], l.Copies, id)
		}
		return ok, step, why
	})
}

// holdingAny returns the first copy (by id) of answers that holds
// anything of the partition.
func holdingAny(answers map[string]Position) (string, bool) {
	for _, id := range slices.Sorted(maps.Keys(answers)) {
		if answers[id] != (Position{}) {
			return id, true
		}
	}
	return "", false
}

// confirmTenure is the rule of ConfirmTenure with need answers, this node
// among them if selfCounts.
func confirmTenure(self string, own Position, up, over map[string]Position, need int, selfCounts bool) (confirmed, stepDown bool, why string) {
	mine := 0
	if selfCounts {
		mine = 1
	}
	for id, pos := range up {
		if id != self && pos.Compare(own) > 0 {
			return false, true, fmt.Sprintf("%s is ahead at %s, this node is at %s", id, pos, own)
		}
	}
	if len(up)+mine >= need {
		return true, false, ""
	}
	for id, pos := range over {
		if id != self && pos.Compare(own) > 0 {
			return false, false, fmt.Sprintf("%s, whose lease is over, is ahead at %s and the others are too few to decide", id, pos)
		}
	}
	if len(up)+len(over)+mine >= need {
		return true, false, ""
	}
	return false, false, fmt.Sprintf("heard from %d copies since winning, need %d", len(up)+len(over)+mine, need)
}

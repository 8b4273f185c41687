package placement

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
)

// MaxBehind is how many changes of its master's epoch a copy may still
// lack and count as nearly caught up (NearlyCaughtUp): enough for a
// handoff to start, the rest shipping while writes are paused.
const MaxBehind = 200

// TenureAssignment is what a node (self) restarted after its tenure of
// partition at epoch knows of it: it masters it, with listReplicas, the
// replicas of the list it recorded for that tenure or a later one
// (listEpoch; a later tenure of this node that had no write yet keeps the
// list it started from, and only drops a regular copy once its
// replacement caught up), or alone when the list is of an older tenure
// (which may name copies that lack this one's writes).
func TenureAssignment(self string, partition int, epoch, listEpoch uint64, listReplicas []string) shard.Assignment {
	a := shard.Assignment{Partition: partition, Master: self, Epoch: epoch, Responsible: []string{self}}
	if listEpoch >= epoch {
		for _, r := range listReplicas {
			if r != self && !slices.Contains(a.Responsible, r) {
				a.Responsible = append(a.Responsible, r)
			}
		}
	}
	return a
}

// KeepReplacedCopies orders the replicas chosen for a partition so that a
// replica replacing one of the regular copies (those write concerns and
// the promotion rule count, by shard.WriteQuorum) takes its slot only once
// it holds what the copy it replaces held (caughtUp). Until then the
// replaced copies keep their slots and the newcomers follow them as extra
// copies: an empty newcomer counted at once could promote itself (with
// RF 2 the promotion quorum is the candidate alone) while the copy that
// has every majority write stood aside.
//
// The current list has listCopies regular copies (the master included),
// as its master recorded it; the chosen one gets copies. When copies is
// the smaller (the peer list lost a node that could hold a copy), the
// regular copies left must each hold what every copy leaving the regular
// ones held, newcomers or not: a majority write acknowledged by the
// master and a copy leaving them is on a majority of the fewer copies
// only once those hold it, and before, the promotion of a copy left, by
// the smaller quorum, could lose it. (With the count unchanged, a copy
// leaving with no newcomer leaves the quorums as they were: it is
// dropped.) It returns the list and how many of its first replicas are
// regular copies: those of copies, or of listCopies while the replaced
// copies keep their slots.
func KeepReplacedCopies(current, chosen []string, listCopies, copies int, caughtUp func(mustHold, replaced []string) bool) ([]string, int) {
	oldRegular := shard.WriteQuorum(listCopies).Replicas(current)
	newRegular := shard.WriteQuorum(copies).Replicas(chosen)
	var newcomers, replaced []string
	for _, r := range newRegular {
		if !slices.Contains(oldRegular, r) {
			newcomers = append(newcomers, r)
		}
	}
	for _, r := range oldRegular {
		if !slices.Contains(newRegular, r) {
			replaced = append(replaced, r)
		}
	}
	mustHold, fell := newcomers, listCopies > copies
	if fell {
		mustHold = newRegular
	}
	if len(replaced) == 0 || !fell && len(newcomers) == 0 || caughtUp(mustHold, replaced) {
		return chosen, len(newRegular)
	}
	out := slices.Clone(oldRegular)
	for _, r := range chosen {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, len(oldRegular)
}

// ListCopies is how many regular copies (the master included) the
// current list of a partition mastered at epoch has, for
// KeepReplacedCopies: as this master recorded it in this tenure
// (recordedEpoch, recordedRegular); in a tenure that recorded none yet,
// as many as it lists, up to rf. The previous master may have counted
// writes on every one of them (under a count of copies the peer list
// has lowered since), and they keep their slots until the copies left
// hold what they held: else this master's loss could promote, by the
// lower count's quorum, a copy left without them.
func ListCopies(epoch, recordedEpoch uint64, recordedRegular, current []string, rf int) int {
	if recordedEpoch == epoch {
		return len(recordedRegular) + 1
	}
	return min(rf, len(current)+1)
}

// Ack is what a replica has acknowledged of a partition (Known false: not
// heard from yet).
type Ack struct {
	Pos   record.Position
	Known bool
}

// ReplaceStep is a decision of DecideReplacement.
type ReplaceStep int

const (
	// ReplaceKeep: the replaced copies keep their slots.
	ReplaceKeep ReplaceStep = iota
	// ReplaceNow: the newcomers take the slots.
	ReplaceNow
	// ReplacePaused: the newcomers are at most MaxBehind changes behind,
	// but not as far as every replaced copy; those copies take each new
	// change with them, so the newcomers are caught up with the
	// partition's writes paused (internal/node's replaceUnderPause).
	ReplacePaused
)

// DecideReplacement decides whether newcomers replace regular copies of a
// partition whose master is at last, in its tenure epoch. They do once
// every newcomer has acknowledged this tenure's history (epoch) at least
// as far as each replaced copy did: it then holds every majority write
// the replaced copies were counted for. Short of that, when every
// newcomer is nearly caught up, the master pauses writes to let them
// reach it (a copy that keeps taking live changes is a target they may
// never be found level with); otherwise the replaced copies stay.
func DecideReplacement(epoch uint64, last record.Position, newcomers, replaced []Ack) ReplaceStep {
	if last == (record.Position{}) {
		// The partition has no history: every copy holds all of it (and a
		// copy of a partition nobody wrote to may never be sent anything
		// to answer).
		return ReplaceNow
	}
	holds := true
	for _, nc := range newcomers {
		if !nc.Known || nc.Pos.Compare(last) < 0 && nc.Pos.Epoch != epoch {
			holds = false
			break
		}
		for _, r := range replaced {
			if r.Known && nc.Pos.Compare(r.Pos) < 0 {
				holds = false
			}
		}
	}
	switch {
	case holds:
		return ReplaceNow
	case NearlyCaughtUp(last, newcomers):
		return ReplacePaused
	}
	return ReplaceKeep
}

// NearlyCaughtUp reports whether every ack is at last, or in its epoch at
// most MaxBehind changes before it.
func NearlyCaughtUp(last record.Position, acks []Ack) bool {
	for _, a := range acks {
		if !a.Known || a.Pos.Compare(last) < 0 && (a.Pos.Epoch != last.Epoch || last.Seq-a.Pos.Seq > MaxBehind) {
			return false
		}
	}
	return true
}

// DecideJoined decides whether copies that joined a partition's regular
// ones when the count of copies rose (joined: their acknowledgements)
// hold its whole history, as its master at last knows it: every write the
// master acknowledged under the lower count, on fewer copies, is then on
// them too. Short of that, nearly there, the master pauses writes to let
// them reach it (as for a replacement: ReplacePaused).
func DecideJoined(last record.Position, joined []Ack) ReplaceStep {
	holds := last == (record.Position{}) // no history: nothing to hold
	if !holds {
		holds = true
		for _, a := range joined {
			if !a.Known || a.Pos.Compare(last) < 0 {
				holds = false
			}
		}
	}
	switch {
	case holds:
		return ReplaceNow
	case NearlyCaughtUp(last, joined):
		return ReplacePaused
	}
	return ReplaceKeep
}

// CountedFor is the count of copies the writes of a partition's list are
// counted under (record.CopyList.Counted), from the count before (prev:
// as this tenure last recorded it, or, in a tenure that recorded none,
// the copies its list held, up to rf) and the count now (copies): copies,
// unless it rose and the regular replicas that joined (those of regular
// past the first prev-1) do not hold the master's whole history yet
// (joined, as DecideJoined): then prev, and paused names them when the
// master should pause writes to let them reach it. A check of the list
// then asks as many of its copies as a write acknowledged under prev
// needs (lease.ConfirmOnList): a copy that joined stale, promoted alone
// by the higher count's quorum, would lose the writes the fewer copies
// held.
func CountedFor(prev, copies int, regular []string, joined func(ids []string) ReplaceStep) (counted int, paused []string) {
	if prev <= 0 || prev >= copies {
		return copies, nil
	}
	newly := regular[min(prev-1, len(regular)):]
	if len(newly) == 0 {
		return copies, nil
	}
	switch joined(newly) {
	case ReplaceNow:
		return copies, nil
	case ReplacePaused:
		return prev, newly
	}
	return prev, nil
}

// TieBreak gives candidates a per-partition order among about equal disks,
// so that the replicas of many partitions spread over them.
func TieBreak(cands []shard.Candidate, partition int) []shard.Candidate {
	out := slices.Clone(cands)
	for i := range out {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d\x00%s", partition, out[i].ID)
		out[i].Tie = h.Sum64()
	}
	return out
}

// PausedSwap is a partition whose newcomers are nearly caught up but still
// behind the regular copies they replace (ReplacePaused).
type PausedSwap struct {
	Partition int
	Newcomers []string
}

// SwapsDue is the paused swaps of due whose partition may be tried now:
// not before retryAt (whose past entries it removes).
func SwapsDue(due []PausedSwap, retryAt map[int]time.Time, now time.Time) []PausedSwap {
	var out []PausedSwap
	for _, s := range due {
		if at, ok := retryAt[s.Partition]; ok {
			if now.Before(at) {
				continue
			}
			delete(retryAt, s.Partition)
		}
		out = append(out, s)
	}
	return out
}

// ListToApply is the replica list a master applies this round to a
// partition it masters at epoch: chosen, unless chosen's regular copies
// (chosenRegular, those write concerns count) differ from the ones
// recorded for this tenure in the node's store (recordedEpoch,
// recordedRegular) and recording chosen's failed (recordedNow false):
// then current stays. A write counted on a regular copy no recorded list
// names could be lost to a full restart: the master, restarted, names the
// recorded list, and a copy of it without the write could be promoted.
// Extra copies come and go unrecorded: they count for nothing.
func ListToApply(current, chosen, chosenRegular []string, epoch, recordedEpoch uint64, recordedRegular []string, recordedNow bool) []string {
	if recordedNow || recordedEpoch == epoch && slices.Equal(chosenRegular, recordedRegular) {
		return chosen
	}
	return current
}

// LeavesFirst reports whether a master's table may take its regular
// replicas from current to next before the lease voters keep a list that
// names next: only when copies only leave (next is within current), no
// list newer than the one the voters keep is on its way to them
// (lastRecordedKept: the last list the master recorded before next is
// kept), and the list they keep names the master and every copy of next
// (keptCoversNext). Every list the voters may keep then (that one, or
// next's, sent only after the table takes it) names every copy the table
// counts writes on, and a node that takes the partition over asks the
// leaving copies too. A copy joining, or coming back while a list without
// it may be on its way to the voters, waits for them to keep a list that
// names it.
func LeavesFirst(current, next []string, lastRecordedKept, keptCoversNext bool) bool {
	if !lastRecordedKept || !keptCoversNext {
		return false
	}
	for _, r := range next {
		if !slices.Contains(current, r) {
			return false
		}
	}
	return true
}

// RecordedList is one list of a partition's regular replicas its master
// recorded in a tenure, numbered as the lease voters see it (Seq).
type RecordedList struct {
	Seq      uint64
	Replicas []string
}

// ListsVotersMayKeep is, of lists (a tenure's recorded lists, oldest
// first) and newest (the one just recorded, appended unless it is the
// last already), those the lease voters may keep: the one they were last
// known to keep (keptSeq; 0 when none of the tenure is known kept) and
// every one recorded after it; the newest always. A node that takes the
// partition over reads the newest two lists of a majority of the voters,
// which a list they do not all keep yet may be among.
func ListsVotersMayKeep(lists []RecordedList, newest RecordedList, keptSeq uint64) []RecordedList {
	if len(lists) == 0 || lists[len(lists)-1].Seq != newest.Seq {
		lists = append(slices.Clone(lists), newest)
	}
	for len(lists) > 1 && lists[0].Seq < keptSeq {
		lists = lists[1:]
	}
	return lists
}

// CountedReplicas is the replicas on every one of lists (see
// ListsVotersMayKeep): those whose acknowledgements may count towards a
// write concern. A write acknowledged by a copy one of those lists does
// not name could be on no copy of the list a node taking over reads.
func CountedReplicas(lists []RecordedList) []string {
	if len(lists) == 0 {
		return nil
	}
	out := slices.Clone(lists[len(lists)-1].Replicas)
	for _, l := range lists[:len(lists)-1] {
		out = slices.DeleteFunc(out, func(r string) bool { return !slices.Contains(l.Replicas, r) })
	}
	return out
}

package placement

import (
	"slices"

	"github.com/shoal-db/shoal/shard"
)

// ReplicaFacts is what the master of a partition knows of it when it
// chooses the partition's replicas: the input of PlanReplicas.
type ReplicaFacts struct {
	Partition int
	Self      string   // the master
	Current   []string // the replicas of the list now, regular copies first
	// Candidates are the peer list's nodes (PlanReplicas orders those
	// with about equal disks for this partition, see TieBreak).
	Candidates        []shard.Candidate
	ReplicationFactor int
	Copies            int             // copies write concerns count (shard.WriteQuorum)
	Draining          map[string]bool // nodes out of the peer list and UP: they drain
	Asking            []string        // nodes that asked to have their copy checked
	Owner             string          // the partition's preferred master
	OwnerUpListed     bool            // the owner is UP and in the peer list
	// ListCopies is how many regular copies Current has, the master
	// included, as this master recorded it (ListCopies; 0: Copies): more
	// than Copies when the peer list lowered the count since (see
	// KeepReplacedCopies).
	ListCopies int
}

// ReplicaProgress is what the master's shipper knows of the copies'
// progress, asked by PlanReplicas.
type ReplicaProgress struct {
	// Replacement decides whether newcomers take the regular slots of the
	// copies they replace (DecideReplacement over their acknowledgements).
	Replacement func(newcomers, replaced []string) ReplaceStep
	// CaughtUp: every one of replicas is nearly caught up (NearlyCaughtUp).
	CaughtUp func(replicas []string) bool
	// Heard: the replica answered a batch of this tenure (see
	// replicate.Shipper.Heard).
	Heard func(replica string) bool
}

// ReplicaPlan is what PlanReplicas decided for one partition.
type ReplicaPlan struct {
	// Replicas is the new list after the master, regular copies first,
	// without Incoming.
	Replicas []string
	// Regular is how many of Replicas at least are regular copies: more
	// than copies-1 while copies that left the regular ones keep their
	// slots (KeepReplacedCopies). See RegularReplicas.
	Regular int
	// Paused names the newcomers of a swap that waits for the partition's
	// writes to pause (ReplacePaused; nil: none).
	Paused []string
	// KeptDraining are the draining copies kept as extra copies, and why.
	KeptDraining []KeptDrain
	// Checked are the nodes whose copy check is over (WithCopiesToCheck).
	Checked []string
	// Incoming is the preferred master to add as an incoming copy if the
	// move budget allows (AdmitMoves); "" when none is to be added.
	Incoming string
	// Moving: the preferred master is an incoming copy already (it counts
	// against the move budget).
	Moving bool
}

// RegularReplicas are the regular copies among the plan's replicas, when
// copies is the count of copies now: its first copies-1, whatever placed
// them there (shard.WriteQuorum is positional: an incoming copy appended
// to a short list by AdmitMoves is one), or its first Regular while
// copies that left the regular ones keep their slots. The result shares
// Replicas' array.
func (p ReplicaPlan) RegularReplicas(copies int) []string {
	return p.Replicas[:max(p.Regular, len(shard.WriteQuorum(copies).Replicas(p.Replicas)))]
}

// KeptDrain is a draining copy kept in a partition's list: the replicas
// chosen instead have not all caught up, or the copy has not answered a
// batch of this tenure.
type KeptDrain struct {
	Replica  string
	CaughtUp bool // the replicas chosen instead are caught up
	Heard    bool // the draining copy answered a batch of this tenure
}

// PlanReplicas chooses the replicas of one partition its master keeps
// (f.Self), from what it knows (f) and asks of the copies' progress (pr):
//
//   - the replicas by most free disk among UP peers that hold replicas,
//     sticky once chosen (shard.ChooseReplicas);
//   - a replica replacing a regular copy takes its slot only once it holds
//     what that copy held (KeepReplacedCopies); when it nearly does, the
//     swap waits for a pause of the partition's writes (Paused);
//   - a copy on a node removed from the peer list (draining) stays, after
//     the others, until the replicas chosen instead have caught up and it
//     has answered a batch of this tenure: a former master cut off before
//     this tenure began may hold w=1 writes it acknowledged that this
//     tenure never had, and only that answer moves them to its rollback
//     collection (the fault suite's seed 6009: dropped at once, it
//     reported holding nothing and was stopped with them);
//   - a node that asked to have its copy checked is an extra copy until it
//     has answered a batch of this tenure (WithCopiesToCheck);
//   - a partition whose preferred master is another node moves there: that
//     node first becomes an extra copy (copied, then caught up), then a
//     handoff gives it the lease; AdmitMoves bounds how many are copied
//     at once.
func PlanReplicas(f ReplicaFacts, pr ReplicaProgress) ReplicaPlan {
	var plan ReplicaPlan
	chosen := shard.ChooseReplicas(f.Self, f.Current, TieBreak(f.Candidates, f.Partition), f.ReplicationFactor)
	listCopies := f.ListCopies
	if listCopies == 0 {
		listCopies = f.Copies
	}
	chosen, plan.Regular = KeepReplacedCopies(f.Current, chosen, listCopies, f.Copies, func(mustHold, replaced []string) bool {
		switch pr.Replacement(mustHold, replaced) {
		case ReplaceNow:
			return true
		case ReplacePaused:
			plan.Paused = mustHold
		}
		return false
	})
	replicas := chosen
	for _, r := range f.Current {
		if !f.Draining[r] || slices.Contains(replicas, r) {
			continue
		}
		// Checked against the list so far: drained copies kept before it
		// count too, as they have since this rule was written.
		caughtUp, heard := pr.CaughtUp(replicas), pr.Heard(r)
		if caughtUp && heard {
			continue
		}
		replicas = append(slices.Clip(replicas), r)
		plan.KeptDraining = append(plan.KeptDraining, KeptDrain{Replica: r, CaughtUp: caughtUp, Heard: heard})
	}
	replicas, plan.Checked = WithCopiesToCheck(replicas, f.Asking, f.Copies, pr.Heard)
	if o := f.Owner; o != f.Self && f.OwnerUpListed && !slices.Contains(replicas, o) {
		if slices.Contains(f.Current, o) {
			replicas = append(slices.Clip(replicas), o)
			plan.Moving = true
		} else {
			plan.Incoming = o
		}
	}
	plan.Replicas = keepShortListsIncoming(f, pr, chosen, replicas)
	return plan
}

// keepShortListsIncoming keeps in replicas (chosen, the regular copies,
// then the extra ones), in a regular slot, a copy that
// held one in f.Current only because the list was short: a node that holds
// no replicas (an incoming preferred master) appended to a list with fewer
// than copies-1 replicas lands among its first copies-1, the regular
// copies (shard.WriteQuorum), so its acknowledgements counted for majority
// writes. When its move is abandoned (it went DOWN, or the peer list made
// another node the owner) nothing replaces it, and dropped at once the
// writes that only it and the master held could be lost to the promotion
// of the copy left; and while its move goes on, an extra copy (draining,
// or checked) listed before it takes its slot. It stays in its slot until
// the regular copies left hold what it acknowledged (pr.Replacement, as
// for a replaced copy; a pause is not waited for: while it stays, it is
// one more copy, which may be for as long as writes keep it ahead).
func keepShortListsIncoming(f ReplicaFacts, pr ReplicaProgress, chosen, replicas []string) []string {
	q := shard.WriteQuorum(f.Copies)
	left := q.Replicas(chosen) // the regular copies chosen, before the extra ones
	for _, r := range q.Replicas(f.Current) {
		if slices.Contains(left, r) || f.Draining[r] || !holdsNoReplicas(f.Candidates, r) || len(left) >= f.Copies-1 {
			continue // (a full list's copy that left was replaced: KeepReplacedCopies)
		}
		if len(left) > 0 && pr.Replacement(slices.Clone(left), []string{r}) == ReplaceNow {
			continue
		}
		// Out of the list, or after an extra copy (the owner rule appends
		// it after a draining or checked copy): back in its slot.
		replicas = slices.Insert(slices.DeleteFunc(slices.Clone(replicas), func(id string) bool { return id == r }), len(left), r)
		left = q.Replicas(replicas[:len(left)+1])
	}
	return replicas
}

// holdsNoReplicas says whether id is a node of the peer list that does
// not hold replicas (replica: false).
func holdsNoReplicas(candidates []shard.Candidate, id string) bool {
	for _, c := range candidates {
		if c.ID == id {
			return c.Listed && !c.Replica
		}
	}
	return false
}

// AdmitMoves adds to plans, in order, the incoming preferred masters the
// move budget allows: at most max partitions copied to their preferred
// master at once, counting those already moving. It returns the indexes
// of the plans it added one to.
func AdmitMoves(plans []ReplicaPlan, max int) []int {
	moving := 0
	for _, p := range plans {
		if p.Moving {
			moving++
		}
	}
	var admitted []int
	for i := range plans {
		if p := &plans[i]; p.Incoming != "" && moving < max {
			p.Replicas = append(slices.Clip(p.Replicas), p.Incoming)
			moving++
			admitted = append(admitted, i)
		}
	}
	return admitted
}

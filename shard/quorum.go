package shard

// WriteQuorum is the write-concern rule of a partition that should have
// this many copies (REPLICATION_FACTOR capped by the nodes that can hold
// one; below 1 counts as 1): which members of its responsible list count
// as its copies, and how many of them a write concern majority write must
// be on. Write concerns, the majority-committed position, the promotion
// rule and replica choice all count the same members, so they all take
// them from here.
//
// The regular copies are the first rf members of the responsible list
// (master first, then replicas, as [Assignment] lists them). The members
// listed after them are extra copies: an incoming copy still being caught
// up (a replacement, or the preferred master before a handoff), a
// draining replica kept meanwhile, a node having its copy checked. They
// receive the partition's changes, but their acknowledgements do not
// count and the promotion rule does not ask them. The rule is positional
// only; the master keeps the regular members first (see
// [ChooseReplicas]).
//
// A majority write is on rf/2+1 regular copies, the master included. Any
// rf-rf/2 regular copies then include one that holds it, since
// (rf/2+1) + (rf-rf/2) = rf+1 > rf: the promotion rule (lease.MayCampaign)
// relies on that when the most current of rf-rf/2 regular copies that
// heard from each other campaigns. Both sides must count the same
// members: an acknowledgement from an extra copy would make a write
// majority-held on a member a promotion never asks, and a failover could
// roll it back.
type WriteQuorum int

// copies is how many copies the rule counts: at least 1, the master.
func (q WriteQuorum) copies() int { return max(int(q), 1) }

// Regular returns the regular copies in a responsible list (master
// first): its first rf members, fewer when it is shorter. The result
// shares responsible's array.
func (q WriteQuorum) Regular(responsible []string) []string {
	return responsible[:min(len(responsible), q.copies())]
}

// Replicas returns the regular copies among the replicas a master lists
// (the responsible list after the master, in order): the first rf-1,
// fewer when it is shorter. The result shares replicas' array.
func (q WriteQuorum) Replicas(replicas []string) []string {
	return replicas[:min(len(replicas), q.copies()-1)]
}

// ReplicaSlots is how many regular replicas the master has beside it
// when every copy is placed: rf-1. Write concern all waits for each.
func (q WriteQuorum) ReplicaSlots() int { return q.copies() - 1 }

// Majority is how many regular copies, the master included, a write
// concern majority write must be on: rf/2+1.
func (q WriteQuorum) Majority() int { return q.copies()/2 + 1 }

// MajorityReplicas is how many regular replicas, beyond the master, a
// write concern majority write must be on: Majority less the master.
func (q WriteQuorum) MajorityReplicas() int { return q.Majority() - 1 }

package placement

import (
	"slices"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
)

// A former master may hold, in its copy of a partition, w=1 writes it
// acknowledged while cut off that no later master ever had; the first
// batch of a later tenure it answers moves them to its rollback
// collection. A node whose copy is so (UnreconciledCopy) but that no
// responsible list names asks the partition's master to check it
// (ShouldAskCheck), and the master keeps it as an extra copy until it has
// answered a batch of its tenure (WithCopiesToCheck).

// UnreconciledCopy reports whether a node's copy of a partition holds
// writes of its own last tenure (tenure; last is the newest position
// stored) that no later master has checked: it does not hold the lease,
// and nothing of a later epoch than its tenure reached it (newest, the
// newest epoch it has seen). A later master's first batch moves what that
// master never had (w=1 writes it acknowledged while cut off) to the
// rollback collection; until then this copy may be their only place, so
// the node does not hold nothing even when no responsible list names it.
func UnreconciledCopy(holding bool, tenure uint64, last record.Position, newest uint64) bool {
	return !holding && tenure > 0 && last.Epoch == tenure && newest <= tenure
}

// ShouldAskCheck reports whether a node (self) whose copy of a partition
// is unreconciled (see UnreconciledCopy) after its own tenure should ask
// the partition's master in a (the partition table's entry) to check it:
// another node masters it at a later epoch, and is up (masterUp).
func ShouldAskCheck(self string, tenure uint64, a shard.Assignment, masterUp bool) bool {
	return a.Master != "" && a.Master != self && a.Epoch > tenure && masterUp
}

// WithCopiesToCheck adds to the replicas of a partition (regular copies
// first: the first copies-1, those write concerns and the promotion rule
// count) the nodes asking to have their copy checked that have not
// answered a batch of this tenure yet (heard), as extra copies: after
// every other replica, and only once the regular slots are all taken, so
// that an asker never counts as a regular copy (shard.ChooseReplicas fills an
// empty slot from the listed nodes itself; an asker out of the peer list
// waits until then). done lists the askers that answered: their check is
// over, and they stay only if chosen on their own merits.
func WithCopiesToCheck(replicas, asking []string, copies int, heard func(string) bool) (out, done []string) {
	out = replicas
	for _, r := range asking {
		switch {
		case heard(r):
			done = append(done, r)
		case slices.Contains(out, r), len(out) < shard.WriteQuorum(copies).ReplicaSlots():
		default:
			out = append(slices.Clone(out), r)
		}
	}
	return out, done
}

// Package applyrule holds the rules by which a replica takes a batch of
// its master's history: pure decisions over what the replica holds of the
// partition (Held) and what the batch says (Header), which the store's
// partition writer carries out (store.Writer.Apply). It does no I/O and
// imports only record.
//
// A batch goes through three decisions: First (refuse it, restore, check
// for changes the master never had, or take it), AfterCheck (what the
// check found decides a full copy, a rollback kept, a refusal, or going
// on), and Take (a full copy needed, a gap, or apply).
package applyrule

import "github.com/shoal-db/shoal/record"

// Held is what a replica holds of a partition when a batch arrives.
type Held struct {
	// Master: this node holds the partition's lease; it takes no batches.
	Master bool
	// Applied is the history it is sure to hold (a former master holds its
	// own tenure's up to its last position).
	Applied record.Position
	// Last is its newest stored position.
	Last record.Position
	// EpochSeen is the newest master's epoch it has heard of.
	EpochSeen uint64
	// Restoring is the epoch of a master whose restore of this copy's
	// rollback is under way (0: none).
	Restoring uint64
	// Recopy: it threw its copy away and takes only a full copy.
	Recopy bool
}

// Newest is the newest epoch the replica knows of: a batch of an older one
// comes from a master that was superseded.
func (h Held) Newest() uint64 { return max(h.Applied.Epoch, h.Last.Epoch, h.EpochSeen) }

// Stored is everything stored, its own writes from when it was master
// included: what a new master's history is compared with.
func (h Held) Stored() record.Position {
	if h.Last.Compare(h.Applied) > 0 {
		return h.Last
	}
	return h.Applied
}

// Restores says whether the master of epoch is restoring this copy's
// rollback (every batch of it is checked until the restore is done).
func (h Held) Restores(epoch uint64) bool { return h.Restoring != 0 && h.Restoring == epoch }

// Header is what the rules read of a batch.
type Header struct {
	Epoch   uint64          // the master's epoch
	From    record.Position // the batch follows on from here
	Restore bool            // it restores a rollback's documents
	Full    bool            // it is a chunk of a full copy
}

// HeaderOf is b's header.
func HeaderOf(b *record.Batch) Header {
	return Header{Epoch: b.Epoch, From: b.From, Restore: b.Restore, Full: b.Full}
}

// Step is what a replica does first with a batch.
type Step int

const (
	// RefuseIsMaster: the node holds the lease; it is no replica.
	RefuseIsMaster Step = iota + 1
	// RefuseStale: the batch's master was superseded.
	RefuseStale
	// RefuseLateRestore: a restore arriving after the rollback it answers
	// was done with (held up by a pause or the network) would write older
	// states over newer ones and move the partition back: answered as a
	// gap.
	RefuseLateRestore
	// Restore: the batch restores the rollback's documents.
	Restore
	// CheckDivergence: the first batch of a newer master, and every batch
	// of a master whose restore is not finished, is checked for changes
	// this node holds that the master never had (then AfterCheck).
	CheckDivergence
	// TakeBatch: nothing to check; Take decides.
	TakeBatch
)

// First decides what the replica does first with batch b.
func First(h Held, b Header) Step {
	switch {
	case h.Master:
		return RefuseIsMaster
	case b.Epoch < h.Newest():
		return RefuseStale
	case b.Restore && h.Restoring != b.Epoch:
		return RefuseLateRestore
	case b.Restore:
		return Restore
	}
	if (h.Restores(b.Epoch) || b.Epoch > h.Newest() && h.Stored().Epoch < b.Epoch) && !h.Recopy {
		return CheckDivergence
	}
	return TakeBatch
}

// Found is what the check for changes the master never had found.
type Found int

const (
	// FoundDiverged: such changes were kept in the rollback collection.
	FoundDiverged Found = iota + 1
	// FoundNothing: every change held is in the master's history.
	FoundNothing
	// CheckFailed: the check itself failed (the store refused a read or
	// write).
	CheckFailed
)

// Next is what follows the check.
type Next int

const (
	// StartRecopy: this node purged deletes the master never had (purged):
	// its copy cannot be repaired change by change; it asks for a full copy.
	StartRecopy Next = iota + 1
	// KeepDivergence: the divergence stands, durably, until the master has
	// restored every document; the answer asks for the restore.
	KeepDivergence
	// RefuseCheckFailed: refused; the next batch of this master checks
	// again (its epoch counts as seen).
	RefuseCheckFailed
	// RestoreDone: the master's restore is finished (nothing diverged is
	// left); the batch is then taken (Take).
	RestoreDone
	// GoOn: nothing diverged; the batch is taken (Take).
	GoOn
)

// AfterCheck decides what follows the check of a batch: found is what it
// found, purged whether this node purged deletes after where its history
// and the master's part, restoring whether the batch's master is restoring
// this copy's rollback.
func AfterCheck(found Found, purged, restoring bool) Next {
	switch {
	case purged && found != CheckFailed:
		return StartRecopy
	case found == FoundDiverged:
		return KeepDivergence
	case found == CheckFailed:
		return RefuseCheckFailed
	case restoring:
		return RestoreDone
	}
	return GoOn
}

// Action is how a replica takes a batch that passed First (and the check).
type Action int

const (
	// NeedFullCopy: the copy awaits a full copy; only its chunks are taken.
	NeedFullCopy Action = iota + 1
	// Gap: the batch starts after what this node holds; the master must
	// catch it up from its applied position first.
	Gap
	// Apply the batch.
	Apply
)

// Take decides how the replica takes batch b.
func Take(h Held, b Header) Action {
	switch {
	case h.Recopy && !b.Full:
		return NeedFullCopy
	case h.Applied.Compare(b.From) < 0:
		return Gap
	}
	return Apply
}

// Package applybatch is how a replica takes a batch of its master's
// history: the driver that carries out the decisions of
// replicate/applyrule (refuse, restore, check for changes the master never
// had, roll back, ask for a full copy, take the batch) over the primitives
// the partition's writer offers (Tx). The store runs it on the partition's
// writer goroutine (store.Writer.Apply); it does no I/O of its own (it
// logs what it kept for a rollback) and imports only record and
// applyrule (internal/purity checks), so the decisions and their order
// are read here, and the storage behind them in the store.
package applybatch

import (
	"errors"
	"log/slog"
	"slices"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applyrule"
)

// Errors of Run (the store names them too: store.ErrGap is ErrGap).
var (
	// ErrStaleEpoch: the batch comes from a master older than the newest
	// epoch this node has seen for the partition.
	ErrStaleEpoch = errors.New("the batch's epoch is older than one this node has seen")
	// ErrGap: the batch starts after what this node holds; the master must
	// catch it up from its applied position first.
	ErrGap = errors.New("the batch does not follow what this node holds")
	// ErrIsMaster: this node holds the partition's lease and takes no
	// batches for it.
	ErrIsMaster = errors.New("this node is the partition's master")
	// ErrDiverged: this node holds changes the new master never had; they
	// were moved to the rollback collection and the master must restore
	// the keys in Result.Diverged.
	ErrDiverged = errors.New("this node holds changes its new master never had")
	// ErrNeedsFullCopy: this node's copy of the partition must be replaced
	// by a full copy from the master before it takes anything else (see
	// startRecopy).
	ErrNeedsFullCopy = errors.New("this node needs a full copy of the partition")
)

// errNothingDiverged: rollBack found no change to keep; the batch applies
// as usual.
var errNothingDiverged = errors.New("nothing diverged")

// Result is the outcome of a batch: the position this node now holds the
// partition's history up to, and the newest epoch it has seen.
type Result struct {
	Applied  record.Position
	Epoch    uint64
	Err      error
	Diverged []string // with ErrDiverged: the keys to restore
}

// State is what a replica's copy of a partition holds when it is asked.
type State struct {
	// Held is the history it is sure to hold (a former master holds its
	// own tenure's up to its last position); Applied the position it
	// applied as a replica (its record's).
	Held, Applied record.Position
	// Last is its newest stored position.
	Last record.Position
	// EpochSeen is the newest master's epoch it has heard of.
	EpochSeen uint64
	// Restoring is the epoch of a master whose restore of this copy's
	// rollback is under way, or whose check failed (0: none).
	Restoring uint64
	// Recopy: it threw its copy away and takes only a full copy.
	Recopy bool
	// Chain is the epoch chain of the history it follows.
	Chain []record.EpochStart
	// Horizon is the highest position of a tombstone it purged.
	Horizon record.Position
	// Master: this node holds the partition's lease.
	Master bool
}

// Tx is what the partition's writer offers the driver: reads of the copy's
// state and the writes it may make, each on the partition's goroutine.
// Record changes (SeeEpoch, SetRestoring, SetChain, RecopyDone) are in
// memory until SaveRecord stages the record, which the caller makes
// durable (store.Writer.SyncApplied) before it answers.
type Tx interface {
	// Load reads the partition's positions and record on first use.
	Load() error
	// State is what the copy holds now.
	State() State
	// Stage lets reads see states up to pos from now on: a batch that
	// stores them has begun.
	Stage(pos record.Position)
	// SeeEpoch notes a master's epoch as seen (the newest stays).
	SeeEpoch(epoch uint64)
	// SetRestoring notes the epoch whose batches are each checked (0: none).
	SetRestoring(epoch uint64)
	// SetChain makes chain the one the copy follows.
	SetChain(chain []record.EpochStart)
	// RecopyDone notes the full copy the copy awaited is whole.
	RecopyDone()
	// CapCommitted lowers what the copy knows to be committed to pos.
	CapCommitted(pos record.Position)
	// SaveRecord stages the partition's record with applied and horizon,
	// and everything else as it is now.
	SaveRecord(applied, horizon record.Position)
	// ScanAfter reads up to limit documents and tombstones after a
	// position, in position order.
	ScanAfter(after record.Position, limit int) ([]*record.Doc, error)
	// SaveRollback keeps docs in the rollback collection, for the master
	// of epoch whose tenure started at start.
	SaveRollback(docs []*record.Doc, epoch uint64, start record.Position) error
	// ForgetHistory makes the copy one that holds nothing for sure and
	// awaits a full copy: applied and committed zero, the horizon given,
	// epochSeen, no tenure of its own, no chain; and stages its record.
	ForgetHistory(horizon record.Position, epochSeen uint64)
	// ApplyRun stores a run's documents newer than the copies held and
	// returns the newest position stored (from last).
	ApplyRun(docs []*record.Doc, last record.Position) (record.Position, error)
	// ApplyFull stores a chunk of a full copy (the keys it covers become
	// the master's) and returns the newest position stored (from last).
	ApplyFull(b *record.Batch, chain []record.EpochStart, last record.Position) (record.Position, error)
	// Overwrite writes docs as given and removes the absent keys.
	Overwrite(docs []*record.Doc, absent []string) error
	// LastPosition reads the newest position stored.
	LastPosition() (record.Position, error)
	// SyncRecord makes the staged records durable.
	SyncRecord() error
	// Advance notes the copy holds the history up to applied, its newest
	// stored position last and its horizon, and learns the committed
	// position the batch carried (capped at applied).
	Advance(applied, last, horizon, committed record.Position)
}

// Run takes batch b as a replica: idempotently (a document not newer than
// the copy held is skipped), refusing a batch from an older epoch than
// seen and one that leaves a gap, checking the first batch of a newer
// master for changes it never had, and staging the record of what is now
// held (durable at the caller's SyncApplied).
func Run(tx Tx, b *record.Batch, log *slog.Logger) Result {
	if err := tx.Load(); err != nil {
		return Result{Err: err}
	}
	// A node that just stepped down or handed the partition over wrote
	// everything up to its last position itself: the next master's
	// batches follow on without a catch-up.
	st := tx.State()
	applied, last := st.Held, st.Last
	// What the rules of replicate/applyrule decide from.
	held := applyrule.Held{Master: st.Master, Applied: applied, Last: last, EpochSeen: st.EpochSeen, Restoring: st.Restoring, Recopy: st.Recopy}
	header := applyrule.HeaderOf(b)
	newest := held.Newest()
	res := func(err error) Result { return Result{Applied: applied, Epoch: newest, Err: err} }
	step := applyrule.First(held, header)
	switch step {
	case applyrule.RefuseIsMaster:
		return res(ErrIsMaster)
	case applyrule.RefuseStale:
		return res(ErrStaleEpoch)
	case applyrule.RefuseLateRestore:
		return res(ErrGap)
	}
	// Whatever this batch stores (a run, a restore, a chunk of a full
	// copy), reads may see it from now on.
	staged := b.UpTo
	for _, d := range b.Docs {
		staged = applyrule.MaxPosition(staged, d.Pos)
	}
	tx.Stage(staged)
	if step == applyrule.Restore {
		return restore(tx, b)
	}
	// From here the batch's master is the newest this node has heard of:
	// whatever the answer (gap, diverged, full copy), older masters' late
	// batches are refused from now on, durably.
	seenBefore := st.EpochSeen
	tx.SeeEpoch(b.Epoch)
	refuse := func(r Result) Result {
		now := tx.State()
		if now.EpochSeen != seenBefore {
			tx.SaveRecord(now.Applied, now.Horizon)
		}
		r.Epoch = max(r.Epoch, now.EpochSeen)
		return r
	}
	// The first batch of a newer master is checked for changes this node
	// holds that the master never had, whatever epoch they are of (the
	// master's chain tells, see applyrule.Diverged), and so is every batch
	// of a master whose restore of them is not finished.
	chain := applyrule.BatchChain(b)
	if step == applyrule.CheckDivergence {
		restoring := held.Restores(b.Epoch)
		agreed := applyrule.Agreement(st.Chain, applied, chain)
		_, purged := applyrule.Diverged(chain, st.Horizon)
		r := rollBack(tx, b, chain, agreed, newest, log)
		found := applyrule.CheckFailed
		switch {
		case errors.Is(r.Err, ErrDiverged):
			found = applyrule.FoundDiverged
		case errors.Is(r.Err, errNothingDiverged):
			found = applyrule.FoundNothing
		}
		switch applyrule.AfterCheck(found, purged, restoring) {
		case applyrule.StartRecopy:
			tx.SetRestoring(0) // the full copy replaces every document
			return startRecopy(tx, b, applyrule.MinPosition(tx.State().Horizon, agreed), log)
		case applyrule.KeepDivergence:
			// The divergence stands, durably, until the master has
			// restored every document: a restore cut short is resumed by
			// the next batch's check. What this copy knows to be committed
			// is of the history it agrees with the master's on.
			tx.SetRestoring(b.Epoch)
			tx.CapCommitted(r.Applied)
			now := tx.State()
			tx.SaveRecord(now.Applied, now.Horizon)
			r.Epoch = now.EpochSeen
			return r
		case applyrule.RefuseCheckFailed:
			// The check itself failed: the next batch of this master
			// checks again (the epoch now counts as seen).
			tx.SetRestoring(b.Epoch)
			return refuse(r)
		case applyrule.RestoreDone:
			tx.SetRestoring(0) // restored: nothing diverged is left
			now := tx.State()
			tx.SaveRecord(now.Applied, now.Horizon)
		}
	}
	switch applyrule.Take(held, header) {
	case applyrule.NeedFullCopy:
		return refuse(Result{Err: ErrNeedsFullCopy})
	case applyrule.Gap:
		return refuse(res(ErrGap))
	}
	var newLast record.Position
	var err error
	if b.Full {
		// The chunk removes the documents whose deletes the master
		// purged. A chunk cut short by a failure must leave no document
		// gone without the horizon that says so (were this node to
		// become master, a copy behind it would be sent a full copy;
		// without it, that copy kept what this one had removed).
		if last, err = takeHorizon(tx, b.Horizon, last); err != nil {
			return refuse(res(err))
		}
		newLast, err = tx.ApplyFull(b, chain, last)
	} else {
		newLast, err = tx.ApplyRun(b.Docs, last)
	}
	if err != nil {
		return refuse(res(err))
	}
	// (A full copy's chunk took the master's horizon above, before it
	// removed anything.)
	now := tx.State()
	next := applyrule.MaxPosition(applied, b.UpTo)
	recopyDone := now.Recopy && b.Full && b.KeyTo == ""
	if recopyDone {
		tx.RecopyDone() // the last chunk of the full copy: the copy is whole again
	}
	// The copy follows the master's history now: its chain is this node's.
	adopt := !slices.Equal(chain, now.Chain)
	if adopt {
		tx.SetChain(chain)
	}
	if next != applied || now.EpochSeen != seenBefore || recopyDone || adopt {
		// Durable at the caller's SyncApplied, before it answers.
		tx.SaveRecord(next, now.Horizon)
	}
	tx.Advance(next, newLast, now.Horizon, b.Committed)
	return Result{Applied: next, Epoch: max(newest, b.Epoch)}
}

// takeHorizon makes the master's tombstone horizon this copy's, durably,
// when it is ahead, before a batch removes documents on the master's word
// (a full copy's chunk, a restore), and returns last raised to it (last:
// the copy's newest stored position). Nothing is learnt of the committed
// position here: the batch's end learns it.
func takeHorizon(tx Tx, horizon, last record.Position) (record.Position, error) {
	now := tx.State()
	if horizon.Compare(now.Horizon) <= 0 {
		return last, nil
	}
	tx.SaveRecord(now.Applied, horizon)
	if err := tx.SyncRecord(); err != nil {
		return last, err
	}
	last = applyrule.MaxPosition(now.Last, horizon)
	tx.Advance(now.Applied, last, horizon, record.Position{})
	return last, nil
}

// startRecopy is the answer of a node that returns as a replica after
// having purged tombstones of changes its new master never had (it was a
// master cut off, and stayed away longer than TOMBSTONE_RETENTION): the
// documents those deletes removed may exist on the master but not here, and
// no rollback can find them. Its changes after the epoch start were kept
// in the rollback collection; now it holds nothing for sure, asks for a
// full copy (which also replaces every document of the abandoned history),
// and takes nothing else until the copy's last chunk. The horizon is capped
// at horizon, where its history and the master's part: what it purged
// beyond belongs to the abandoned history.
func startRecopy(tx Tx, b *record.Batch, horizon record.Position, log *slog.Logger) Result {
	seen := max(tx.State().EpochSeen, b.Epoch)
	tx.ForgetHistory(horizon, seen)
	log.Warn("this node purged deletes its new master never had; asking for a full copy of the partition",
		"partition", b.Partition, "new_epoch", b.Epoch, "epoch_start", b.EpochStart, "agreed", horizon)
	return Result{Epoch: seen, Err: ErrNeedsFullCopy}
}

// RollbackScan is how many documents one read of rollBack's search takes.
const RollbackScan = 256

// rollBack keeps, in the rollback collection, every change this node holds
// that the new master never had (diverged by the master's chain, looked
// for after agreed, where the two histories are known to be the same), and
// asks the master to restore those documents. It answers the position up
// to which this node's history agrees with the master's: the restore
// leaves it there, and the catch-up that follows starts there (not at the
// master's epoch start: the master's history may hold changes of earlier
// tenures after the point where this node's history left it).
func rollBack(tx Tx, b *record.Batch, chain []record.EpochStart, agreed record.Position, newest uint64, log *slog.Logger) Result {
	var divergent []*record.Doc
	var keys []string
	// In pages: only the divergent documents are kept (the agreement point
	// of a copy whose chain names no epoch the master's does may be far
	// back).
	for from := agreed; ; {
		docs, err := tx.ScanAfter(from, RollbackScan)
		if err != nil {
			return Result{Err: err}
		}
		for _, d := range docs {
			if boundary, ok := applyrule.Diverged(chain, d.Pos); ok {
				divergent = append(divergent, d)
				keys = append(keys, d.Key)
				agreed = applyrule.MinPosition(agreed, boundary)
			}
		}
		if len(docs) < RollbackScan {
			break
		}
		from = docs[len(docs)-1].Pos
	}
	if len(divergent) == 0 {
		// Nothing held is outside the master's history (what went past
		// the agreement point, if anything, were tombstones purged since):
		// nothing is left to keep or restore.
		return Result{Err: errNothingDiverged}
	}
	if err := tx.SaveRollback(divergent, b.Epoch, b.EpochStart); err != nil {
		return Result{Err: err}
	}
	log.Warn("moved changes the new master never had to the rollback collection", "partition", b.Partition,
		"documents", len(divergent), "new_epoch", b.Epoch, "epoch_start", b.EpochStart, "agreed", agreed)
	return Result{Applied: agreed, Epoch: newest, Err: ErrDiverged, Diverged: keys}
}

// restore makes this replica's copies of a rollback's documents the
// master's: given states replace whatever is held, absent keys are
// removed (after the master's horizon is taken), and the replica then
// holds the history up to b.UpTo, the position it answered its history
// agrees with the master's up to. Its chain stays its own until a batch
// passes the check again (a restore may be cut short).
func restore(tx Tx, b *record.Batch) Result {
	// A key the master holds nothing of may be one whose tombstone it
	// purged. Without the horizon this copy would hold neither the
	// tombstone nor a horizon that says one is gone: promoted, it would
	// catch a copy behind the purge up change by change (which never
	// removes the key) and make the key again at version 1; and were the
	// master's history abandoned in turn, the next master's check
	// (Diverged on the horizon) would not see that this copy lost the
	// key's older state, which that history holds.
	if _, err := takeHorizon(tx, b.Horizon, record.Position{}); err != nil {
		return Result{Err: err}
	}
	if err := tx.Overwrite(b.Docs, b.Absent); err != nil {
		return Result{Err: err}
	}
	last, err := tx.LastPosition()
	if err != nil {
		return Result{Err: err}
	}
	tx.SeeEpoch(b.Epoch)
	horizon := tx.State().Horizon
	tx.SaveRecord(b.UpTo, horizon)
	if err := tx.SyncRecord(); err != nil {
		return Result{Err: err}
	}
	tx.Advance(b.UpTo, applyrule.MaxPosition(last, horizon), horizon, b.Committed)
	return Result{Applied: b.UpTo, Epoch: b.Epoch}
}

package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applyrule"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

const partitionsCollection = "partitions"

// appliedDoc is a node's durable record of a partition: how much of its
// history it holds as a replica, and its tombstone horizon. It is written
// whole, so every field is kept in the partition's in-memory state too.
type appliedDoc struct {
	Partition int    `bson:"_id"`
	Epoch     uint64 `bson:"e"`
	Seq       uint64 `bson:"s"`
	// Seen is the newest epoch seen in a batch: older ones stay refused
	// after a restart.
	Seen uint64 `bson:"seen"`
	// The horizon: the highest position of any tombstone purged here.
	HorizonEpoch uint64 `bson:"he"`
	HorizonSeq   uint64 `bson:"hs"`
	// Recopy: this node's copy must be replaced by a full copy before it
	// counts as holding anything (see startRecopy).
	Recopy bool `bson:"rc,omitempty"`
	// Restoring: the epoch of a master this node answered "diverged": it
	// holds changes that master never had, kept in the rollback
	// collection, and until that master has restored every one of them
	// each of its batches is checked for them again (see rollBack). Also
	// set when the check of a master's first batch failed.
	Restoring uint64 `bson:"rs,omitempty"`
	// The tenure: the epoch this node last mastered the partition at, and
	// the position its history was complete up to when that tenure began.
	// It is recorded before the tenure's first write is acknowledged, so
	// that after a restart the node still counts its own writes as held
	// (see partition.held).
	TenureEpoch uint64 `bson:"te,omitempty"`
	TenureFrom  uint64 `bson:"tfe,omitempty"`
	TenureSeq   uint64 `bson:"tfs,omitempty"`
	// Chain: the epoch chain of the history this node's copy follows (see
	// chain.go): its own tenure, appended when the tenure began, or the
	// chain of the last batch it applied.
	Chain []EpochStart `bson:"ch,omitempty"`
	// Carrying: the tenure's carry (see Writer.carryOver) is not finished:
	// this node's copy is complete only up to the tenure's start.
	Carrying bool `bson:"ca,omitempty"`
}

// same reports whether two records say the same.
func (d appliedDoc) same(o appliedDoc) bool { return reflect.DeepEqual(d, o) }

// record builds the partition's record with the given applied position
// and horizon, and everything else as the partition has it now.
func (p *partition) record(applied, horizon Position) appliedDoc {
	return appliedDoc{Partition: p.id, Epoch: applied.Epoch, Seq: applied.Seq, Seen: p.epochSeen,
		HorizonEpoch: horizon.Epoch, HorizonSeq: horizon.Seq, Recopy: p.recopy, Restoring: p.restoring,
		TenureEpoch: p.startEpoch, TenureFrom: p.startPos.Epoch, TenureSeq: p.startPos.Seq, Chain: p.chain, Carrying: p.carrying}
}

// Applied returns the position up to which this node holds a partition's
// history as a replica (zero if never recorded), and the newest epoch it has
// seen from a master.
func (s *Store) Applied(ctx context.Context, partition int) (Position, uint64, error) {
	d, err := s.partitionRecord(ctx, partition)
	return Position{Epoch: d.Epoch, Seq: d.Seq}, d.Seen, err
}

// partitionRecord reads the partition's record (zero if there is none).
func (s *Store) partitionRecord(ctx context.Context, partition int) (appliedDoc, error) {
	var recs map[int]appliedDoc
	err := s.timed("applied", func() error {
		var err error
		recs, err = s.loadRecords(ctx)
		return err
	})
	d, ok := recs[partition]
	if !ok {
		d.Partition = partition
	}
	return d, err
}

// CountAfter counts a partition's documents and tombstones whose position
// is after the given one (the zero position: all of them): how much a
// catch-up or a full copy has to send.
func (s *Store) CountAfter(ctx context.Context, partition int, after Position) (int64, error) {
	filter := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fEpoch, Value: bson.D{{Key: "$gt", Value: int64(after.Epoch)}}}},
		bson.D{{Key: fEpoch, Value: int64(after.Epoch)}, {Key: fSeq, Value: bson.D{{Key: "$gt", Value: int64(after.Seq)}}}},
	}}}
	if after == (Position{}) {
		filter = bson.D{}
	}
	var n int64
	err := s.timed("count_after", func() error {
		var err error
		n, err = s.db.Collection(CollectionName(partition)).CountDocuments(ctx, filter)
		if err != nil {
			return fmt.Errorf("%w: counting partition %d: %v", ErrUnavailable, partition, err)
		}
		return nil
	})
	return n, err
}

// ScanAfter returns up to limit (0: all) documents and tombstones of a
// partition whose position is after the given one, in position order: the
// log a lagging replica is caught up from.
func (s *Store) ScanAfter(ctx context.Context, partition int, after Position, limit int) ([]*Doc, error) {
	filter := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fEpoch, Value: bson.D{{Key: "$gt", Value: int64(after.Epoch)}}}},
		bson.D{{Key: fEpoch, Value: int64(after.Epoch)}, {Key: fSeq, Value: bson.D{{Key: "$gt", Value: int64(after.Seq)}}}},
	}}}
	opts := options.Find().SetSort(bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	docs, err := s.find(ctx, "scan_after", partition, filter, opts)
	if err != nil {
		return nil, err
	}
	// The embedded store's sort on two keys is checked here: catch-up
	// relies on position order.
	slices.SortFunc(docs, func(a, b *Doc) int { return a.Pos.Compare(b.Pos) })
	return docs, nil
}

// Batch is a run of a partition's history shipped from its master
// (record.Batch).
type Batch = record.Batch

// Errors of Apply.
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
	// the keys in ApplyResult.Diverged.
	ErrDiverged = errors.New("this node holds changes its new master never had")
)

// ApplyResult is the outcome of Apply: the position this node now holds
// the partition's history up to, and the newest epoch it has seen.
type ApplyResult struct {
	Applied  Position
	Epoch    uint64
	Err      error
	Diverged []string // with ErrDiverged: the keys to restore
}

// Apply takes a batch as a replica, through the partition's writer:
// idempotently (a document not newer than the copy held is skipped),
// refusing a batch from an older epoch than seen and one that leaves a
// gap, and records the applied position durably.
func (w *Writer) Apply(ctx context.Context, b Batch) ApplyResult {
	req := &request{apply: &b, done: make(chan struct{})}
	if err := w.submit(ctx, w.parts[b.Partition], req); err != nil {
		return ApplyResult{Err: err}
	}
	return req.applied
}

// Applied returns the position up to which this node is sure to hold a
// partition's history: as its master, its last committed position; as a
// replica, the position the last complete run or catch-up brought it to
// (documents of a catch-up in progress may be newer, but until it ends some
// intermediate states are missing, so they do not count).
//
// A node that was the partition's master in its current run (it stepped
// down, handed the partition over, or lost the lease) holds its own
// tenure's history up to its last position: it wrote all of it.
func (w *Writer) Applied(partition int) Position {
	p := w.parts[partition]
	master := true
	if w.opts.Lease != nil {
		_, master = w.opts.Lease(partition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if master && p.last.Compare(p.applied) > 0 {
		return p.last
	}
	return p.held()
}

// Committed returns the position of a partition's history this copy knows
// a majority of the partition's copies hold: the newest majority-committed
// position its masters shipped with their batches, capped at the position
// this copy has applied (never above it, also after a rollback). Zero when
// unknown: it is kept in memory only, so after a restart it is zero until
// the master's next batch (any batch, or its notice of a committed
// position that advanced). As a master this node learns nothing here (its
// shipper knows its own majority-committed position, see
// replicate.Shipper.MajorityHeld); what it learned as a replica stays
// true.
func (w *Writer) Committed(partition int) Position {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return minPosition(p.committed, p.applied)
}

// learnCommitted records the committed position a batch of the current
// master carried, once the batch is applied (and after any rollback it
// caused): what the master says a majority holds, capped at what this
// copy now holds of the master's history. Call with p.mu held, after
// p.applied is updated.
func (p *partition) learnCommitted(shipped Position) {
	p.committed = maxPosition(minPosition(p.committed, p.applied), minPosition(shipped, p.applied))
}

// held is how far this node is sure to hold the partition's history as a
// replica: its applied position, or, if it was the partition's master in
// this run and nothing newer came since, its own last position. Call with
// p.mu held.
func (p *partition) held() Position {
	if p.startEpoch != 0 && p.last.Epoch == p.startEpoch && p.last.Compare(p.applied) > 0 && !p.carrying {
		return p.last
	}
	return p.applied
}

// processApply runs one batch on the partition's goroutine.
func (w *Writer) processApply(p *partition, b *Batch) ApplyResult {
	if err := w.load(p); err != nil {
		return ApplyResult{Err: err}
	}
	p.mu.Lock()
	// A node that just stepped down or handed the partition over wrote
	// everything up to its last position itself: the next master's
	// batches follow on without a catch-up.
	applied, last := p.held(), p.last
	p.mu.Unlock()
	// What the rules of replicate/applyrule decide from.
	held := applyrule.Held{Applied: applied, Last: last, EpochSeen: p.epochSeen, Restoring: p.restoring, Recopy: p.recopy}
	if w.opts.Lease != nil {
		_, held.Master = w.opts.Lease(p.id)
	}
	header := applyrule.HeaderOf(b)
	newest := held.Newest()
	res := func(err error) ApplyResult { return ApplyResult{Applied: applied, Epoch: newest, Err: err} }
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
		staged = maxPosition(staged, d.Pos)
	}
	p.stage(staged)
	if step == applyrule.Restore {
		return w.restore(p, b)
	}
	// From here the batch's master is the newest this node has heard of:
	// whatever the answer (gap, diverged, full copy), older masters' late
	// batches are refused from now on, durably.
	seenBefore := p.epochSeen
	p.mu.Lock() // NewestEpoch reads it from other goroutines
	p.epochSeen = max(p.epochSeen, b.Epoch)
	p.mu.Unlock()
	refuse := func(r ApplyResult) ApplyResult {
		if p.epochSeen != seenBefore {
			w.setRecord(p.record(p.applied, p.horizon))
		}
		r.Epoch = max(r.Epoch, p.epochSeen)
		return r
	}
	// The first batch of a newer master is checked for changes this node
	// holds that the master never had, whatever epoch they are of (the
	// master's chain tells, see diverged), and so is every batch of a
	// master whose restore of them is not finished.
	chain := batchChain(b)
	if step == applyrule.CheckDivergence {
		restoring := held.Restores(b.Epoch)
		agreed := agreement(p.chain, applied, chain)
		_, purged := diverged(chain, p.horizon)
		r := w.rollBack(p, b, chain, agreed, newest)
		found := applyrule.CheckFailed
		switch {
		case errors.Is(r.Err, ErrDiverged):
			found = applyrule.FoundDiverged
		case errors.Is(r.Err, errNothingDiverged):
			found = applyrule.FoundNothing
		}
		switch applyrule.AfterCheck(found, purged, restoring) {
		case applyrule.StartRecopy:
			p.restoring = 0 // the full copy replaces every document
			return w.startRecopy(p, b, minPosition(p.horizon, agreed))
		case applyrule.KeepDivergence:
			// The divergence stands, durably, until the master has
			// restored every document: a restore cut short is resumed by
			// the next batch's check. What this copy knows to be committed
			// is of the history it agrees with the master's on.
			p.restoring = b.Epoch
			p.mu.Lock()
			p.committed = minPosition(p.committed, r.Applied)
			p.mu.Unlock()
			w.setRecord(p.record(p.applied, p.horizon))
			r.Epoch = p.epochSeen
			return r
		case applyrule.RefuseCheckFailed:
			// The check itself failed: the next batch of this master
			// checks again (the epoch now counts as seen).
			p.restoring = b.Epoch
			return refuse(r)
		case applyrule.RestoreDone:
			p.restoring = 0 // restored: nothing diverged is left
			w.setRecord(p.record(p.applied, p.horizon))
		}
	}
	switch applyrule.Take(held, header) {
	case applyrule.NeedFullCopy:
		return refuse(ApplyResult{Err: ErrNeedsFullCopy})
	case applyrule.Gap:
		return refuse(res(ErrGap))
	}
	var newLast Position
	var err error
	if b.Full {
		newLast, err = w.applyFull(p, b, chain, last)
	} else {
		newLast, err = w.applyRun(p, b.Docs, last)
	}
	if err != nil {
		return refuse(res(err))
	}
	horizon := p.horizon
	if b.Full {
		// The copy lacks the deletes the master purged: this node's
		// history now has the master's horizon.
		horizon = maxPosition(horizon, b.Horizon)
		newLast = maxPosition(newLast, horizon)
	}
	next := maxPosition(applied, b.UpTo)
	recopyDone := p.recopy && b.Full && b.KeyTo == ""
	if recopyDone {
		p.recopy = false // the last chunk of the full copy: the copy is whole again
	}
	// The copy follows the master's history now: its chain is this node's.
	adopt := !slices.Equal(chain, p.chain)
	if adopt {
		p.mu.Lock()
		p.chain = chain
		p.mu.Unlock()
	}
	if next != applied || p.epochSeen != seenBefore || horizon != p.horizon || recopyDone || adopt {
		// Durable at the caller's SyncApplied, before it answers.
		w.setRecord(p.record(next, horizon))
	}
	p.mu.Lock()
	p.applied, p.last, p.horizon = next, newLast, horizon
	p.learnCommitted(b.Committed)
	p.mu.Unlock()
	return ApplyResult{Applied: next, Epoch: max(newest, b.Epoch)}
}

// applyRun stores a run's documents that are newer than the copies held,
// and returns the newest position stored.
func (w *Writer) applyRun(p *partition, docs []*Doc, last Position) (Position, error) {
	newLast := last
	// Documents this node has no cached state of are first inserted,
	// without a lookup (a lookup costs the embedded store a scan): most are
	// new here (new documents, a replica being filled). One already stored
	// shows up as a duplicate and goes the slow way, compared by position.
	var created, rest []*Doc
	for _, d := range docs {
		if d.Deleted {
			p.tombstones.Store(true)
		}
		if _, cached := w.cache.get(d.Key); !cached {
			created = append(created, d)
		} else {
			rest = append(rest, d)
		}
	}
	if len(created) > 0 {
		p.commits.Add(1)
		dups, err := w.store.insertNew(w.ctx, p.id, created)
		if err != nil {
			// Some of them may be stored, some not: nothing is cached, so
			// the retry looks each one up instead of taking it as held.
			for _, d := range created {
				w.cache.forget(d.Key)
			}
			p.commits.Add(1)
			return newLast, err
		}
		for _, d := range created {
			if !dups[d.Key] {
				w.cache.put(d.Key, d)
				newLast = maxPosition(newLast, d.Pos)
			}
		}
		p.commits.Add(1)
		for _, d := range created {
			if dups[d.Key] {
				rest = append(rest, d)
			}
		}
	}
	var writes []write
	for _, d := range rest {
		cur, err := w.current(p, d.Key, false)
		if err != nil {
			return newLast, err
		}
		if cur != nil && d.Pos.Compare(cur.Pos) <= 0 {
			continue // already held, or something newer is
		}
		writes = append(writes, write{doc: d})
		newLast = maxPosition(newLast, d.Pos)
	}
	return newLast, w.commitApplied(p, writes)
}

// commitApplied writes replicated document states and keeps the cache in
// step.
func (w *Writer) commitApplied(p *partition, writes []write) error {
	if len(writes) == 0 {
		return nil
	}
	p.commits.Add(1)
	defer p.commits.Add(1)
	err := w.store.commit(w.ctx, p.id, writes)
	for _, wr := range writes {
		if err != nil {
			w.cache.forget(wr.doc.Key)
		} else {
			w.cache.put(wr.doc.Key, wr.doc)
		}
	}
	return err
}

// ErrNeedsFullCopy: this node's copy of the partition must be replaced by a
// full copy from the master before it takes anything else (see
// startRecopy).
var ErrNeedsFullCopy = errors.New("this node needs a full copy of the partition")

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
func (w *Writer) startRecopy(p *partition, b *Batch, horizon Position) ApplyResult {
	seen := max(p.epochSeen, b.Epoch)
	p.mu.Lock()
	p.applied, p.horizon, p.epochSeen, p.startEpoch, p.recopy, p.chain = Position{}, horizon, seen, 0, true, nil
	p.committed = Position{}
	p.mu.Unlock()
	w.setRecord(p.record(Position{}, horizon))
	w.log.Warn("this node purged deletes its new master never had; asking for a full copy of the partition",
		"partition", p.id, "new_epoch", b.Epoch, "epoch_start", b.EpochStart, "agreed", horizon)
	return ApplyResult{Epoch: seen, Err: ErrNeedsFullCopy}
}

// rollbackScan is how many documents one read of rollBack's search takes.
const rollbackScan = 256

// errNothingDiverged: rollBack found no change to keep; the batch applies
// as usual.
var errNothingDiverged = errors.New("nothing diverged")

// rollBack keeps, in the rollback collection, every change this node holds
// that the new master never had (diverged by the master's chain, looked
// for after agreed, where the two histories are known to be the same), and
// asks the master to restore those documents. It answers the position up
// to which this node's history agrees with the master's: the restore
// leaves it there, and the catch-up that follows starts there (not at the
// master's epoch start: the master's history may hold changes of earlier
// tenures after the point where this node's history left it).
func (w *Writer) rollBack(p *partition, b *Batch, chain []EpochStart, agreed Position, newest uint64) ApplyResult {
	var divergent []*Doc
	var keys []string
	// In pages: only the divergent documents are kept (the agreement point
	// of a copy whose chain names no epoch the master's does may be far
	// back).
	for from := agreed; ; {
		docs, err := w.store.ScanAfter(w.ctx, p.id, from, rollbackScan)
		if err != nil {
			return ApplyResult{Err: err}
		}
		for _, d := range docs {
			if boundary, ok := diverged(chain, d.Pos); ok {
				divergent = append(divergent, d)
				keys = append(keys, d.Key)
				agreed = minPosition(agreed, boundary)
			}
		}
		if len(docs) < rollbackScan {
			break
		}
		from = docs[len(docs)-1].Pos
	}
	if len(divergent) == 0 {
		// Nothing held is outside the master's history (what went past
		// the agreement point, if anything, were tombstones purged since):
		// nothing is left to keep or restore.
		return ApplyResult{Err: errNothingDiverged}
	}
	if err := w.store.saveRollback(w.ctx, p.id, divergent, b.Epoch, b.EpochStart); err != nil {
		return ApplyResult{Err: err}
	}
	w.log.Warn("moved changes the new master never had to the rollback collection", "partition", p.id,
		"documents", len(divergent), "new_epoch", b.Epoch, "epoch_start", b.EpochStart, "agreed", agreed)
	return ApplyResult{Applied: agreed, Epoch: newest, Err: ErrDiverged, Diverged: keys}
}

// restore makes this replica's copies of a rollback's documents the
// master's: given states replace whatever is held, absent keys are
// removed, and the replica then holds the history up to b.UpTo, the
// position it answered its history agrees with the master's up to. Its
// chain stays its own until a batch passes the check again (a restore
// may be cut short).
func (w *Writer) restore(p *partition, b *Batch) ApplyResult {
	writes := make([]write, len(b.Docs))
	for i, d := range b.Docs {
		writes[i] = write{doc: d}
	}
	p.commits.Add(1)
	var err error
	if len(writes) > 0 {
		err = w.store.commit(w.ctx, p.id, writes)
	}
	if err == nil {
		err = w.store.remove(w.ctx, p.id, b.Absent)
	}
	for _, d := range b.Docs {
		w.cache.forget(d.Key)
	}
	for _, k := range b.Absent {
		w.cache.forget(k)
	}
	p.commits.Add(1)
	if err != nil {
		return ApplyResult{Err: err}
	}
	last, err := w.store.LastPosition(w.ctx, p.id)
	if err != nil {
		return ApplyResult{Err: err}
	}
	seen := max(p.epochSeen, b.Epoch)
	p.mu.Lock()
	p.epochSeen = seen
	p.mu.Unlock()
	w.setRecord(p.record(b.UpTo, p.horizon))
	if err := w.SyncApplied(w.ctx); err != nil {
		return ApplyResult{Err: err}
	}
	for _, d := range b.Docs {
		if d.Deleted {
			p.tombstones.Store(true)
		}
	}
	p.mu.Lock()
	p.applied, p.last, p.epochSeen = b.UpTo, maxPosition(last, p.horizon), seen
	p.learnCommitted(b.Committed)
	p.mu.Unlock()
	return ApplyResult{Applied: b.UpTo, Epoch: b.Epoch}
}

// LoadAll reads, before the node serves anything, every partition's newest
// stored position and applied position, so that no question about a
// partition (its position, where an epoch started) is answered from a
// writer that has not looked at the store yet.
func (w *Writer) LoadAll(ctx context.Context) error {
	names, err := w.store.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("%w: listing collections: %v", ErrUnavailable, err)
	}
	exists := map[string]bool{}
	for _, n := range names {
		exists[n] = true
	}
	applied, err := w.store.loadRecords(ctx)
	if err != nil {
		return err
	}
	w.noteAllLoaded(applied)
	for _, p := range w.parts {
		var last Position
		if exists[CollectionName(p.id)] {
			if last, err = w.store.LastPosition(ctx, p.id); err != nil {
				return err
			}
		}
		p.setLoaded(last, applied[p.id])
		p.tombstones.Store(exists[CollectionName(p.id)])
	}
	return nil
}

// insertNew inserts documents that should be new here, in one unordered
// write; it returns the keys that were already stored (left untouched).
func (s *Store) insertNew(ctx context.Context, partition int, docs []*Doc) (map[string]bool, error) {
	if err := s.acquireWrite(ctx); err != nil {
		return nil, err
	}
	defer s.releaseWrite()
	recs := make([]any, len(docs))
	for i, d := range docs {
		recs[i] = docToBSON(d)
	}
	dups := map[string]bool{}
	err := s.timed("insert_new", func() error {
		_, err := s.db.Collection(CollectionName(partition)).InsertMany(ctx, recs, options.InsertMany().SetOrdered(false))
		if err == nil {
			return nil
		}
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
			return fmt.Errorf("%w: inserting %d documents: %v", ErrUnavailable, len(docs), err)
		}
		for _, we := range bwe.WriteErrors {
			if we.Code != 11000 || we.Index < 0 || we.Index >= len(docs) {
				return fmt.Errorf("%w: inserting %d documents: %v", ErrUnavailable, len(docs), err)
			}
			dups[docs[we.Index].Key] = true
		}
		return nil
	})
	return dups, err
}

package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applybatch"
	"github.com/shoal-db/shoal/store/engine"
)

// appliedDoc is a node's durable record of a partition
// (engine.PartitionRecord).
type appliedDoc = engine.PartitionRecord

// sameRecord reports whether two records say the same.
func sameRecord(a, b appliedDoc) bool { return reflect.DeepEqual(a, b) }

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
		recs, err = s.records.LoadRecords(ctx)
		return err
	})
	d, ok := recs[partition]
	if !ok {
		d.Partition = partition
	}
	return d, err
}

// Batch is a run of a partition's history shipped from its master
// (record.Batch).
type Batch = record.Batch

// Errors of Apply (replicate/applybatch, which decides them).
var (
	// ErrStaleEpoch: the batch comes from a master older than the newest
	// epoch this node has seen for the partition.
	ErrStaleEpoch = applybatch.ErrStaleEpoch
	// ErrGap: the batch starts after what this node holds; the master must
	// catch it up from its applied position first.
	ErrGap = applybatch.ErrGap
	// ErrIsMaster: this node holds the partition's lease and takes no
	// batches for it.
	ErrIsMaster = applybatch.ErrIsMaster
	// ErrDiverged: this node holds changes the new master never had; they
	// were moved to the rollback collection and the master must restore
	// the keys in ApplyResult.Diverged.
	ErrDiverged = applybatch.ErrDiverged
	// ErrNeedsFullCopy: this node's copy of the partition must be replaced
	// by a full copy from the master before it takes anything else.
	ErrNeedsFullCopy = applybatch.ErrNeedsFullCopy
)

// ApplyResult is the outcome of Apply: the position this node now holds
// the partition's history up to, and the newest epoch it has seen.
type ApplyResult = applybatch.Result

// Apply takes a batch as a replica, through the partition's writer:
// idempotently (a document not newer than the copy held is skipped),
// refusing a batch from an older epoch than seen and one that leaves a
// gap. The documents are written without waiting for the disk where the
// engine can (engine.Deferring); the applied position they reach, and
// they with it, are durable once SyncApplied returns: the caller answers
// after it (replicate.Apply).
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

// processApply runs one batch on the partition's goroutine: the driver in
// replicate/applybatch decides, over the primitives of applyTx.
func (w *Writer) processApply(p *partition, b *Batch) ApplyResult {
	r := applybatch.Run(applyTx{w, p}, b, w.log)
	if r.Err != nil && !refusal(r.Err) {
		// It failed part way (a run, a chunk of a full copy, a restore):
		// it may have stored documents above the newest position this
		// copy knows of, which the next load reads from the store.
		p.mu.Lock()
		p.unsure = true
		p.mu.Unlock()
	}
	return r
}

// refusal reports whether err is an answer of the apply's rules, given
// before anything is stored or once all of it is, rather than a failure.
func refusal(err error) bool {
	for _, answer := range []error{ErrStaleEpoch, ErrGap, ErrIsMaster, ErrDiverged, ErrNeedsFullCopy} {
		if errors.Is(err, answer) {
			return true
		}
	}
	return false
}

// applyRun stores a run's documents that are newer than the copies held,
// and returns the newest position stored.
func (w *Writer) applyRun(p *partition, docs []*Doc, last Position) (Position, error) {
	newLast := last
	// Documents this node has no cached state of are first inserted: most
	// are new here (new documents, a replica being filled). One already
	// stored shows up as a duplicate and goes the slow way, compared by
	// position. One known to be new here (newHere) is inserted without a
	// lookup (it cost the embedded engine about 4% of the nodes' CPU under
	// majority writes, docs/benchmarks.md).
	p.mu.Lock()
	follows := !p.unsure && p.restoring == 0 && !p.recopy
	p.mu.Unlock()
	var created []write
	var rest []*Doc
	for _, d := range docs {
		if d.Deleted {
			p.tombstones.Store(true)
		}
		if _, cached := w.cache.get(p.id, d.Key); !cached {
			created = append(created, write{doc: d, insert: follows && newHere(d, last) && !p.tombstones.Load()})
		} else {
			rest = append(rest, d)
		}
	}
	if len(created) > 0 {
		p.commits.Add(1)
		dups, err := w.store.insertNewDeferred(w.ctx, p.id, created)
		if err != nil {
			// Some of them may be stored, some not: nothing is cached, so
			// the retry looks each one up instead of taking it as held.
			for _, c := range created {
				w.cache.forget(p.id, c.doc.Key)
			}
			p.commits.Add(1)
			return newLast, err
		}
		if len(dups) < len(created) { // something was stored
			w.oweSync()
		}
		for _, c := range created {
			if !dups[c.doc.Key] {
				w.cache.put(p.id, c.doc.Key, c.doc)
				newLast = maxPosition(newLast, c.doc.Pos)
			}
		}
		p.commits.Add(1)
		for _, c := range created {
			if dups[c.doc.Key] {
				rest = append(rest, c.doc)
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
	return newLast, w.commitApplied(p, writes, true)
}

// newHere reports whether d, of a run of the partition's master, can have
// no state here to replace, on a copy that holds no tombstone of the
// partition, is not being restored or replaced by a full copy, and has
// no document stored above last that it may not know of (partition.unsure):
// its master held no state of the key before d in its history (d.New),
// which this copy follows, and d is above everything this copy stored, so
// it is not a document sent again. (A tombstone the master purged could
// be of its key; a copy being restored may hold states of a history the
// master never had.)
func newHere(d *Doc, last Position) bool {
	return d.New && !d.Deleted && d.Pos.Compare(last) > 0
}

// commitApplied writes replicated document states and keeps the cache in
// step. Deferred, they are durable at the writer's next synced write, as
// SyncApplied (engine.Deferring).
func (w *Writer) commitApplied(p *partition, writes []write, deferred bool) error {
	if len(writes) == 0 {
		return nil
	}
	p.commits.Add(1)
	defer p.commits.Add(1)
	commit := w.store.commit
	if deferred {
		commit = w.store.commitDeferred
	}
	err := commit(w.ctx, p.id, writes)
	if err == nil && deferred {
		w.oweSync()
	}
	for _, wr := range writes {
		if err != nil {
			w.cache.forget(p.id, wr.doc.Key)
		} else {
			w.cache.put(p.id, wr.doc.Key, wr.doc)
		}
	}
	return err
}

// LoadAll reads, before the node serves anything, every partition's newest
// stored position and applied position, so that no question about a
// partition (its position, where an epoch started) is answered from a
// writer that has not looked at the store yet.
func (w *Writer) LoadAll(ctx context.Context) error {
	exists, err := w.store.docs.Partitions(ctx)
	if err != nil {
		return err
	}
	applied, err := w.store.records.LoadRecords(ctx)
	if err != nil {
		return err
	}
	w.noteAllLoaded(applied)
	for _, p := range w.parts {
		var last Position
		if exists[p.id] {
			if last, err = w.store.LastPosition(ctx, p.id); err != nil {
				return err
			}
		}
		p.setLoaded(last, applied[p.id])
		// Whether the copy holds a tombstone, read (one index lookup),
		// not assumed: a replica that may hold one looks up every new
		// document it is sent (applyRun).
		holds := false
		if exists[p.id] {
			if holds, err = w.holdsTombstones(ctx, p); err != nil {
				return err
			}
		}
		p.tombstones.Store(holds)
	}
	return nil
}

// MarkNew records that this node's store was created empty at this start
// (Store.PartitionCount said 0): each partition's copy awaits a full copy
// before it counts as holding anything, as a copy that threw its history
// away does (ForgetHistory). The node may have held a partition, and
// acknowledged writes of it, in a data directory that was lost: a copy
// caught up only part of the way, or not at all, must not count as the
// copy that acknowledged them (Recopying). A tenure of the partition
// clears the mark (beginTenure): it was confirmed before it writes. Call
// it after LoadAll.
func (w *Writer) MarkNew(ctx context.Context) error {
	for _, p := range w.parts {
		p.mu.Lock()
		p.recopy, p.untouched = true, true
		rec := p.record(p.applied, p.horizon)
		p.mu.Unlock()
		w.setRecord(rec)
	}
	if err := w.SyncApplied(ctx); err != nil {
		return fmt.Errorf("recording that this new store's copies await full copies: %w", err)
	}
	return nil
}

// Whole is told that this node's tenure of partition may write (its check
// confirmed it, or it needed none): its copy holds every write a majority
// acknowledged. A copy that awaited a full copy and holds nothing no
// longer awaits one: it answers its position again. One that holds
// documents of no history (a full copy cut short) keeps the mark.
//
// Whole does not wait: it is called from the lease's callbacks, which
// must not block on the partition's writer. Whether the copy holds
// anything is decided on the writer, after what was queued before the
// call (a full copy's chunk in flight stores documents, and takes its
// master's horizon, before Whole looks), and the record it stages is
// built there from the writer's own state, as every record is. Until
// then the copy still counts as awaiting a full copy, which only asks
// more of a tenure's check; the tenure's first write ends the wait
// anyway (beginTenure).
func (w *Writer) Whole(partition int) {
	p := w.parts[partition]
	p.mu.Lock()
	p.untouched = false
	p.mu.Unlock()
	w.post(p, &request{whole: true, done: make(chan struct{})})
}

// whole carries out Whole on the partition's writer.
func (w *Writer) whole(p *partition) {
	if err := w.load(p); err != nil {
		w.log.Warn("could not tell whether this node's copy holds anything; it awaits a full copy until its tenure's first write",
			"partition", p.id, "err", err)
		return
	}
	p.mu.Lock()
	changed := p.recopy && p.last == (Position{}) && p.applied == (Position{})
	if changed {
		p.recopy = false
	}
	p.mu.Unlock()
	if changed {
		w.setRecord(p.record(p.applied, p.horizon))
	}
}

// Recopying reports whether this node's copy of partition awaits a full
// copy (MarkNew, ForgetHistory) and no tenure of this node has begun on
// it since: it may lack writes this node acknowledged, so it counts as no
// copy in a tenure's check until then. (A tenure begins only once
// confirmed to hold every write a majority acknowledged.)
func (w *Writer) Recopying(partition int) bool {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recopy && p.startEpoch == 0
}

// Untouched reports whether partition's copy was marked new in this run
// (MarkNew) and has taken nothing since: no full copy finished, no
// tenure, no history thrown away. This process has acknowledged nothing
// of the partition.
func (w *Writer) Untouched(partition int) bool {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.untouched
}

// rollbackScan is how many documents one read of a rollback's search
// takes (applybatch.RollbackScan).
const rollbackScan = applybatch.RollbackScan

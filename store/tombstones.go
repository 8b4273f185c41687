package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Tombstones are kept for TOMBSTONE_RETENTION, long enough for a lagging
// replica to be caught up in position order, deletes included. A purge
// removes older ones and raises the partition's horizon; a replica whose
// acknowledged position is behind it gets a full copy instead (Batch.Full).

// purge is a request to purge a chunk of a partition's tombstones.
type purge struct {
	from   time.Time // the chunk starts at this time (where the last one ended)
	before time.Time // tombstones last changed before this go
	purged int
	more   bool      // the chunk was full and removed something: more may be due
	next   time.Time // where the next chunk starts
	err    error
}

// purgeChunk is how many tombstones one request of a purge reads and
// removes: the partition's writes wait for one chunk at a time, and a
// purge holds one chunk in memory, however many tombstones the partition
// keeps.
const purgeChunk = 1000

// purgePlan is what a purge removes, decided from the tombstones read.
type purgePlan struct {
	gone    []*Doc   // the tombstones to remove
	horizon Position // the horizon once they are gone
}

// planPurge picks the tombstones last changed before cutoff (compared in
// milliseconds, as stored, and as the engine selected them) and the
// horizon that follows.
func planPurge(tombstones []*Doc, cutoff time.Time, horizon Position) purgePlan {
	plan := purgePlan{horizon: horizon}
	for _, d := range tombstones {
		if d.Updated.UnixMilli() >= cutoff.UnixMilli() {
			continue
		}
		plan.gone = append(plan.gone, d)
		plan.horizon = maxPosition(plan.horizon, d.Pos)
	}
	return plan
}

// PurgeTombstones removes, from every partition that may hold tombstones,
// those last changed before the given time, each through its partition's
// writer, a chunk at a time (purgeChunk). It returns how many it removed.
func (w *Writer) PurgeTombstones(ctx context.Context, before time.Time) (int, error) {
	total := 0
	var errs []error
	for _, p := range w.parts {
		var from time.Time
		for more := p.tombstones.Load(); more; {
			req := &request{purge: &purge{from: from, before: before}, done: make(chan struct{})}
			if err := w.submit(ctx, p, req); err != nil {
				return total, err
			}
			total += req.purge.purged
			more, from = req.purge.more, req.purge.next
			if req.purge.err != nil {
				errs = append(errs, fmt.Errorf("partition %d: %w", p.id, req.purge.err))
			}
		}
	}
	return total, errors.Join(errs...)
}

// Horizon returns the highest position of any tombstone purged from a
// partition here (zero if none): a replica acknowledged before it needs a
// full copy.
func (w *Writer) Horizon(partition int) Position {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.horizon
}

// processPurge runs one chunk of a purge on the partition's goroutine: it
// reads up to purgeChunk of the oldest tombstones due, from r.from on (a
// chunk starting at the time the last one ended does not step again over
// what that one removed), and removes them. The horizon is recorded
// before they go: a crash in between costs at most a needless full copy,
// never a replica that misses a delete.
func (w *Writer) processPurge(p *partition, r *purge) error {
	if err := w.load(p); err != nil {
		return err
	}
	tombs, err := w.store.tombstones(w.ctx, p.id, r.from, r.before, purgeChunk)
	if err != nil {
		return err
	}
	plan := planPurge(tombs, r.before, p.horizon)
	if len(plan.gone) > 0 {
		if plan.horizon != p.horizon {
			w.setRecord(p.record(p.applied, plan.horizon))
			if err := w.SyncApplied(w.ctx); err != nil {
				return err
			}
			p.mu.Lock()
			p.horizon, p.last = plan.horizon, maxPosition(p.last, plan.horizon)
			p.mu.Unlock()
		}
		p.commits.Add(1)
		removed, err := w.store.deleteTombstones(w.ctx, p.id, plan.gone)
		for _, d := range plan.gone {
			w.cache.forget(p.id, d.Key)
		}
		p.commits.Add(1)
		if err != nil {
			return err
		}
		r.purged = removed
		w.log.Debug("purged tombstones", "partition", p.id, "purged", removed, "horizon", plan.horizon)
	}
	if len(plan.gone) == purgeChunk && r.purged > 0 {
		r.more, r.next = true, plan.gone[len(plan.gone)-1].Updated
		return nil
	}
	left, err := w.holdsTombstones(w.ctx, p)
	if err != nil {
		return err
	}
	p.tombstones.Store(left)
	return nil
}

// holdsTombstones reads whether the partition's copy here holds a
// tombstone (one index lookup).
func (w *Writer) holdsTombstones(ctx context.Context, p *partition) (bool, error) {
	one, err := w.store.tombstones(ctx, p.id, time.Time{}, time.Time{}, 1)
	return len(one) > 0, err
}

func compareKeys(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// inKeyRange reports whether key is in (after, upTo], "" being unbounded.
func inKeyRange(key, after, upTo string) bool {
	return (after == "" || key > after) && (upTo == "" || key <= upTo)
}

// planFullChunk decides what a replica does with one chunk of a full copy,
// given what it holds in the chunk's key range and the master's epoch
// chain: the keys to remove (held, but not in the chunk), the chunk's
// documents newer than the copies held (insert marks those not held at
// all), and the keys held in a state the master's history does not
// contain (diverged by its chain: an abandoned history), which the
// master's state replaces whatever its position.
func planFullChunk(held []*Doc, chunk []*Doc, chain []EpochStart) (gone []string, writes []write, abandoned []string) {
	have := make(map[string]Position, len(held))
	for _, d := range held {
		if _, ok := diverged(chain, d.Pos); ok {
			have[d.Key] = Position{}
			abandoned = append(abandoned, d.Key)
			continue
		}
		have[d.Key] = d.Pos
	}
	for _, d := range chunk {
		pos, ok := have[d.Key]
		delete(have, d.Key)
		if ok && d.Pos.Compare(pos) <= 0 {
			continue // already held, or something newer is
		}
		writes = append(writes, write{doc: d, insert: !ok})
	}
	for k := range have {
		gone = append(gone, k)
	}
	slices.Sort(gone)
	slices.Sort(abandoned)
	return gone, writes, abandoned
}

// applyFull applies one chunk of a full copy on the partition's goroutine
// and returns the newest position stored.
func (w *Writer) applyFull(p *partition, b *Batch, chain []EpochStart, last Position) (Position, error) {
	held, err := w.store.keyRange(w.ctx, p.id, b.KeyFrom, b.KeyTo)
	if err != nil {
		return last, err
	}
	gone, writes, abandoned := planFullChunk(held, b.Docs, chain)
	if err := w.keepAbandoned(p, b, abandoned); err != nil {
		return last, err
	}
	if len(gone) > 0 {
		p.commits.Add(1)
		err := w.store.remove(w.ctx, p.id, gone)
		for _, k := range gone {
			w.cache.forget(p.id, k)
		}
		p.commits.Add(1)
		if err != nil {
			return last, err
		}
	}
	for _, wr := range writes {
		if wr.doc.Deleted {
			p.tombstones.Store(true)
		}
		last = maxPosition(last, wr.doc.Pos)
	}
	if len(gone) > 0 || len(writes) > 0 {
		w.log.Debug("applied a chunk of a full copy", "partition", p.id, "from_key", b.KeyFrom, "to_key", b.KeyTo,
			"removed", len(gone), "written", len(writes))
	}
	return last, w.commitApplied(p, writes, false)
}

// keepAbandoned keeps, in the rollback collection, the states a full copy
// is about to replace that the master's history does not contain. The
// check of the master's first batch normally kept them already (the
// records are idempotent); this is so that no path drops one unlisted.
func (w *Writer) keepAbandoned(p *partition, b *Batch, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	docs := make([]*Doc, 0, len(keys))
	for _, k := range keys {
		d, err := w.store.Get(w.ctx, p.id, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		docs = append(docs, d)
	}
	return w.store.saveRollback(w.ctx, p.id, docs, b.Epoch, b.EpochStart)
}

package store

import (
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applybatch"
)

// applyTx is what a partition's writer offers the apply driver
// (replicate/applybatch): its state and the writes a batch may make. Every
// method runs on the partition's goroutine; fields other goroutines read
// are changed under p.mu.
type applyTx struct {
	w *Writer
	p *partition
}

var _ applybatch.Tx = applyTx{}

func (t applyTx) Load() error { return t.w.load(t.p) }

func (t applyTx) State() applybatch.State {
	p := t.p
	st := applybatch.State{Restoring: p.restoring, Recopy: p.recopy, Horizon: p.horizon}
	if t.w.opts.Lease != nil {
		_, st.Master = t.w.opts.Lease(p.id)
	}
	p.mu.Lock()
	st.Held, st.Applied, st.Last, st.EpochSeen, st.Chain = p.held(), p.applied, p.last, p.epochSeen, p.chain
	p.mu.Unlock()
	return st
}

func (t applyTx) Stage(pos Position) { t.p.stage(pos) }

func (t applyTx) SeeEpoch(epoch uint64) {
	t.p.mu.Lock() // NewestEpoch reads it from other goroutines
	t.p.epochSeen = max(t.p.epochSeen, epoch)
	t.p.mu.Unlock()
}

func (t applyTx) SetRestoring(epoch uint64) { t.p.restoring = epoch }

func (t applyTx) SetChain(chain []EpochStart) {
	t.p.mu.Lock()
	t.p.chain = chain
	t.p.mu.Unlock()
}

func (t applyTx) RecopyDone() {
	t.p.mu.Lock() // toCarry reads it under p.mu, from a tenure's start
	t.p.recopy, t.p.untouched = false, false
	t.p.mu.Unlock()
}

func (t applyTx) CapCommitted(pos Position) {
	t.p.mu.Lock()
	t.p.committed = minPosition(t.p.committed, pos)
	t.p.mu.Unlock()
}

func (t applyTx) SaveRecord(applied, horizon Position) { t.w.setRecord(t.p.record(applied, horizon)) }

func (t applyTx) ScanAfter(after Position, limit int) ([]*Doc, error) {
	return t.w.store.ScanAfter(t.w.ctx, t.p.id, after, limit)
}

func (t applyTx) SaveRollback(docs []*Doc, epoch uint64, start Position) error {
	return t.w.store.saveRollback(t.w.ctx, t.p.id, docs, epoch, start)
}

func (t applyTx) ForgetHistory(horizon Position, epochSeen uint64) {
	p := t.p
	p.mu.Lock()
	p.applied, p.horizon, p.epochSeen, p.startEpoch, p.recopy, p.chain = Position{}, horizon, epochSeen, 0, true, nil
	p.untouched = false // it may have acknowledged what it threw away
	p.committed = Position{}
	p.mu.Unlock()
	t.w.setRecord(p.record(Position{}, horizon))
}

func (t applyTx) ApplyRun(docs []*Doc, last Position) (Position, error) {
	return t.w.applyRun(t.p, docs, last)
}

func (t applyTx) ApplyFull(b *Batch, chain []EpochStart, last Position) (Position, error) {
	return t.w.applyFull(t.p, b, chain, last)
}

// Overwrite writes docs as given and removes the absent keys (a restore);
// the cache forgets them all.
func (t applyTx) Overwrite(docs []*Doc, absent []string) error {
	w, p := t.w, t.p
	writes := make([]write, len(docs))
	for i, d := range docs {
		writes[i] = write{doc: d}
	}
	p.commits.Add(1)
	var err error
	if len(writes) > 0 {
		err = w.store.commit(w.ctx, p.id, writes)
	}
	if err == nil {
		err = w.store.remove(w.ctx, p.id, absent)
	}
	for _, d := range docs {
		w.cache.forget(p.id, d.Key)
	}
	for _, k := range absent {
		w.cache.forget(p.id, k)
	}
	p.commits.Add(1)
	for _, d := range docs {
		if d.Deleted {
			p.tombstones.Store(true)
		}
	}
	return err
}

func (t applyTx) LastPosition() (Position, error) { return t.w.store.LastPosition(t.w.ctx, t.p.id) }

func (t applyTx) SyncRecord() error { return t.w.SyncApplied(t.w.ctx) }

func (t applyTx) Advance(applied, last, horizon, committed record.Position) {
	p := t.p
	p.mu.Lock()
	p.applied, p.last, p.horizon = applied, last, horizon
	p.learnCommitted(committed)
	p.mu.Unlock()
}

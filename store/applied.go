package store

import (
	"context"
	"sync"
)

// records is the writer's view of every partition's record, and what of it
// is durable.
type records struct {
	mu    sync.Mutex
	read  bool // byID holds what the store held at the first read
	byID  map[int]appliedDoc
	dirty map[int]bool // changed since the last entry
	gen   uint64       // grows at every change
	saved uint64       // the gen the store holds
	sync  sync.Mutex   // one SyncApplied writes at a time
}

// setRecord changes a partition's record in memory; SyncApplied makes it
// durable.
func (w *Writer) setRecord(rec appliedDoc) {
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	if w.recs.byID == nil {
		w.recs.byID, w.recs.dirty = map[int]appliedDoc{}, map[int]bool{}
	}
	if old, ok := w.recs.byID[rec.Partition]; ok && sameRecord(old, rec) {
		return
	}
	w.recs.byID[rec.Partition] = rec
	w.recs.dirty[rec.Partition] = true
	w.recs.gen++
}

// oweSync notes that a change was stored without a sync of its own
// (Writer.Apply's documents, on an engine that defers): the next
// SyncApplied makes it durable even if no record changed (a catch-up's
// chunk, or a piece of a run, leaves the applied position where it was,
// yet is answered after SyncApplied). Call it after the change returned.
func (w *Writer) oweSync() {
	if w.store.deferring == nil {
		return // every change was durable when it returned
	}
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	w.recs.gen++
}

// noteLoaded remembers a record read from the store (already durable).
func (w *Writer) noteLoaded(rec appliedDoc) {
	if sameRecord(rec, appliedDoc{Partition: rec.Partition}) {
		return
	}
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	if w.recs.byID == nil {
		w.recs.byID, w.recs.dirty = map[int]appliedDoc{}, map[int]bool{}
	}
	if _, ok := w.recs.byID[rec.Partition]; !ok {
		w.recs.byID[rec.Partition] = rec
	}
}

// recordOf is a partition's record, the store's records being read once
// (they are all in a few documents).
func (w *Writer) recordOf(partition int) (appliedDoc, error) {
	w.recs.mu.Lock()
	read := w.recs.read
	w.recs.mu.Unlock()
	if !read {
		recs, err := w.store.records.LoadRecords(w.ctx)
		if err != nil {
			return appliedDoc{}, err
		}
		w.noteAllLoaded(recs)
	}
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	rec, ok := w.recs.byID[partition]
	if !ok {
		rec.Partition = partition
	}
	return rec, nil
}

// noteAllLoaded remembers every record read from the store.
func (w *Writer) noteAllLoaded(recs map[int]appliedDoc) {
	for _, rec := range recs {
		w.noteLoaded(rec)
	}
	w.recs.mu.Lock()
	w.recs.read = true
	w.recs.mu.Unlock()
}

// SyncApplied makes every record changed so far durable, and every
// document applied so far without a sync (Writer.Apply, oweSync), in one
// engine write shared by all the callers waiting at the same time (group
// commit). A replica answers a replication request only after it: the
// write is synced, so the documents applied before it are durable with
// it; when no record changed, the engine's log is synced alone. The
// write runs on the writer's own context: it is shared, and one caller
// giving up must not fail it for the others; ctx is checked before
// waiting.
func (w *Writer) SyncApplied(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.recs.mu.Lock()
	want := w.recs.gen
	w.recs.mu.Unlock()
	w.recs.sync.Lock()
	defer w.recs.sync.Unlock()
	w.recs.mu.Lock()
	if w.recs.saved >= want {
		w.recs.mu.Unlock()
		return nil
	}
	gen := w.recs.gen
	changed := make([]appliedDoc, 0, len(w.recs.dirty))
	for id := range w.recs.dirty {
		changed = append(changed, w.recs.byID[id])
	}
	dirty := w.recs.dirty
	w.recs.dirty = map[int]bool{}
	w.recs.mu.Unlock()
	all := func() []appliedDoc {
		w.recs.mu.Lock()
		defer w.recs.mu.Unlock()
		out := make([]appliedDoc, 0, len(w.recs.byID))
		for _, r := range w.recs.byID {
			out = append(out, r)
		}
		return out
	}
	var err error
	if len(changed) > 0 {
		err = w.store.records.SaveRecords(w.ctx, changed, all) // synced: what was deferred before it is durable too
	} else {
		err = w.store.syncDeferred(w.ctx) // only deferred documents are owed
	}
	if err != nil {
		w.recs.mu.Lock()
		for id := range dirty {
			w.recs.dirty[id] = true // not recorded: the next write carries them
		}
		w.recs.mu.Unlock()
		return err
	}
	w.recs.mu.Lock()
	w.recs.saved = max(w.recs.saved, gen)
	w.recs.mu.Unlock()
	return nil
}

package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The records of the partitions (applied position, newest epoch seen,
// horizon) are kept as a log: every SyncApplied inserts one document
// holding the records changed since the previous one, and every
// appliedCompactEvery entries a full snapshot starts the log again in the
// other of two collections, and the first is dropped (dropping a table is
// cheap; deleting hundreds of documents stalled replication for ~50 ms). A replica
// applying a request that spans many partitions so records them all in one
// insert (on the embedded store an insert costs about a millisecond, while
// replacing a document costs a scan). Older data directories hold one
// document per partition in the partitions collection; they are read
// first, and the log overrides them.
const appliedCompactEvery = 512

// appliedCollections are the two collections the log alternates between.
var appliedCollections = [2]string{"applied_log_0", "applied_log_1"}

type appliedEntry struct {
	Seq   int64        `bson:"_id"`
	Parts []appliedDoc `bson:"parts"`
}

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
	seq   int64        // the last entry's _id
	since int          // entries since the last snapshot
	cur   int          // the collection the log is written to
}

// setRecord changes a partition's record in memory; SyncApplied makes it
// durable.
func (w *Writer) setRecord(rec appliedDoc) {
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	if w.recs.byID == nil {
		w.recs.byID, w.recs.dirty = map[int]appliedDoc{}, map[int]bool{}
	}
	if old, ok := w.recs.byID[rec.Partition]; ok && old.same(rec) {
		return
	}
	w.recs.byID[rec.Partition] = rec
	w.recs.dirty[rec.Partition] = true
	w.recs.gen++
}

// noteLoaded remembers a record read from the store (already durable).
func (w *Writer) noteLoaded(rec appliedDoc) {
	if rec.same(appliedDoc{Partition: rec.Partition}) {
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
		recs, err := w.store.loadRecords(w.ctx)
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

// SyncApplied makes every record changed so far durable, in one insert
// shared by all the callers waiting at the same time (group commit). A
// replica answers a replication request only after it. The write runs on
// the writer's own context: it is shared, and one caller giving up must
// not fail it for the others; ctx is checked before waiting.
func (w *Writer) SyncApplied(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.recs.mu.Lock()
	want := w.recs.gen
	w.recs.mu.Unlock()
	w.recs.sync.Lock()
	defer w.recs.sync.Unlock()
	if err := w.loadSeq(w.ctx); err != nil {
		return err
	}
	w.recs.mu.Lock()
	if w.recs.saved >= want {
		w.recs.mu.Unlock()
		return nil
	}
	gen := w.recs.gen
	snapshot := w.recs.since >= appliedCompactEvery
	entry := appliedEntry{Seq: w.recs.seq + 1}
	for id, r := range w.recs.byID {
		if snapshot || w.recs.dirty[id] {
			entry.Parts = append(entry.Parts, r)
		}
	}
	dirty := w.recs.dirty
	w.recs.dirty = map[int]bool{}
	w.recs.mu.Unlock()
	into := w.recs.cur
	if snapshot {
		into = 1 - into
	}
	coll := w.store.db.Collection(appliedCollections[into])
	// The write is shared by every caller waiting: it runs on the writer's
	// context, not on one caller's (a cancelled request must not fail the
	// others, nor leave an insert half-known).
	err := w.store.timed("applied_save", func() error {
		if _, err := coll.InsertOne(w.ctx, entry); err != nil {
			return fmt.Errorf("%w: recording the applied positions: %v", ErrUnavailable, err)
		}
		return nil
	})
	if err != nil {
		w.recs.mu.Lock()
		for id := range dirty {
			w.recs.dirty[id] = true // not recorded: the next entry carries them
		}
		w.recs.mu.Unlock()
		// The insert may have landed after all: learn the log's last _id
		// again rather than collide with it for ever.
		w.recs.seq = 0
		return err
	}
	w.recs.seq++
	w.recs.since++
	if snapshot {
		// The snapshot holds every record: the other collection can go. If
		// dropping it fails, it is merely read again (and overridden by
		// the snapshot's higher _id) at the next start.
		w.recs.since, w.recs.cur = 0, into
		_ = w.store.timed("applied_compact", func() error {
			return w.store.db.Collection(appliedCollections[1-into]).Drop(w.ctx)
		})
	}
	w.recs.mu.Lock()
	w.recs.saved = max(w.recs.saved, gen)
	w.recs.mu.Unlock()
	return nil
}

// loadSeq learns, once, the _id of the log's last entry and how many
// entries follow the last snapshot.
func (w *Writer) loadSeq(ctx context.Context) error {
	if w.recs.seq != 0 {
		return nil
	}
	for i, name := range appliedCollections {
		var last appliedEntry
		err := w.store.db.Collection(name).FindOne(ctx, bson.D{},
			options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}}).SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&last)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return fmt.Errorf("%w: reading the applied log: %v", ErrUnavailable, err)
		}
		if last.Seq > w.recs.seq {
			w.recs.seq, w.recs.cur = last.Seq, i
		}
	}
	// Unknown how many entries follow the last snapshot: write one soon.
	w.recs.since = appliedCompactEvery
	return nil
}

// loadRecords reads every partition's record: the per-partition documents
// of older data directories, overridden by the log, in order.
func (s *Store) loadRecords(ctx context.Context) (map[int]appliedDoc, error) {
	out := map[int]appliedDoc{}
	cur, err := s.db.Collection(partitionsCollection).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("%w: reading applied positions: %v", ErrUnavailable, err)
	}
	for cur.Next(ctx) {
		var d appliedDoc
		if err := cur.Decode(&d); err != nil {
			cur.Close(ctx)
			return nil, err
		}
		out[d.Partition] = d
	}
	cur.Close(ctx)
	var entries []appliedEntry
	for _, name := range appliedCollections {
		cur, err := s.db.Collection(name).Find(ctx, bson.D{})
		if err != nil {
			return nil, fmt.Errorf("%w: reading the applied log: %v", ErrUnavailable, err)
		}
		for cur.Next(ctx) {
			var e appliedEntry
			if err := cur.Decode(&e); err != nil {
				cur.Close(ctx)
				return nil, err
			}
			entries = append(entries, e)
		}
		cur.Close(ctx)
	}
	// Oldest first, across both collections.
	slices.SortFunc(entries, func(a, b appliedEntry) int { return int(a.Seq - b.Seq) })
	for _, e := range entries {
		for _, d := range e.Parts {
			out[d.Partition] = d
		}
	}
	return out, nil
}

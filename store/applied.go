package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The records of every partition (applied position, newest epoch seen,
// horizon) are kept in one document, written whole: a replica applying a
// request that spans many partitions records them all in one store write
// (on the embedded store a write costs milliseconds, and one per partition
// per request was most of a replica's work). Older data directories hold
// one document per partition in the partitions collection; they are still
// read, and the single document overrides them.
const (
	appliedCollection = "applied"
	appliedAllID      = "all"
)

type appliedAll struct {
	ID    string       `bson:"_id"`
	Parts []appliedDoc `bson:"parts"`
}

// records is the writer's view of every partition's record, and what of it
// is durable.
type records struct {
	mu    sync.Mutex
	byID  map[int]appliedDoc
	gen   uint64 // grows at every change
	saved uint64 // the gen the store holds
	sync  sync.Mutex
}

// setRecord changes a partition's record in memory; SyncApplied makes it
// durable.
func (w *Writer) setRecord(rec appliedDoc) {
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	if w.recs.byID == nil {
		w.recs.byID = map[int]appliedDoc{}
	}
	if w.recs.byID[rec.Partition] == rec {
		return
	}
	w.recs.byID[rec.Partition] = rec
	w.recs.gen++
}

// noteLoaded remembers a record read from the store (already durable).
func (w *Writer) noteLoaded(rec appliedDoc) {
	if rec == (appliedDoc{Partition: rec.Partition}) {
		return
	}
	w.recs.mu.Lock()
	defer w.recs.mu.Unlock()
	if w.recs.byID == nil {
		w.recs.byID = map[int]appliedDoc{}
	}
	if _, ok := w.recs.byID[rec.Partition]; !ok {
		w.recs.byID[rec.Partition] = rec
	}
}

// SyncApplied makes every record changed so far durable, in one write
// shared by all the callers waiting at the same time (group commit). A
// replica answers a replication request only after it.
func (w *Writer) SyncApplied(ctx context.Context) error {
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
	all := appliedAll{ID: appliedAllID, Parts: make([]appliedDoc, 0, len(w.recs.byID))}
	for _, r := range w.recs.byID {
		all.Parts = append(all.Parts, r)
	}
	w.recs.mu.Unlock()
	err := w.store.timed("applied_save", func() error {
		_, err := w.store.db.Collection(appliedCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: appliedAllID}}, all,
			options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording the applied positions: %v", ErrUnavailable, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.recs.mu.Lock()
	w.recs.saved = max(w.recs.saved, gen)
	w.recs.mu.Unlock()
	return nil
}

// loadRecords reads every partition's record: the per-partition documents
// of older data directories, overridden by the single document.
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
	var all appliedAll
	err = s.db.Collection(appliedCollection).FindOne(ctx, bson.D{{Key: "_id", Value: appliedAllID}}).Decode(&all)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
	case err != nil:
		return nil, fmt.Errorf("%w: reading applied positions: %v", ErrUnavailable, err)
	}
	for _, d := range all.Parts {
		out[d.Partition] = d
	}
	return out, nil
}

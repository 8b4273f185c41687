package store

import (
	"context"
	"time"

	"github.com/shoal-db/shoal/store/engine"
)

const rollbackCollection = "rollback"

// RolledBack is a document state this node held that the partition's new
// master never had (engine.RolledBack).
type RolledBack = engine.RolledBack

// saveRollback keeps divergent document states (idempotent: one record per
// document state).
func (s *Store) saveRollback(ctx context.Context, partition int, docs []*Doc, newEpoch uint64, start Position) error {
	states := make([]RolledBack, len(docs))
	now := time.Now().UTC()
	for i, d := range docs {
		states[i] = RolledBack{Partition: partition, User: d.User, Coll: d.Coll, ID: d.ID, Version: d.Version, Position: d.Pos,
			Deleted: d.Deleted, Body: d.Body, NewEpoch: newEpoch, EpochStart: start, At: now}
	}
	return s.records.SaveRollback(ctx, states)
}

// Rollbacks lists the rolled back document states this node keeps, oldest
// first, at most limit.
func (s *Store) Rollbacks(ctx context.Context, limit int) ([]RolledBack, error) {
	return s.records.Rollbacks(ctx, limit)
}

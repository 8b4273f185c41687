package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shoal-db/shoal/store/engine"
)

// ErrPartitionCountMismatch is returned when a store created with one
// partition count is opened with another.
var ErrPartitionCountMismatch = errors.New("partition count mismatch")

// CheckPartitionCount records count on the first start of a store and
// refuses any other count afterwards: the partition of every document
// depends on it. A store without one is new (PartitionCount says 0): a
// new node's, or one whose data was lost.
func (s *Store) CheckPartitionCount(ctx context.Context, nodeID string, count int) error {
	got, ok, err := s.records.Meta(ctx)
	if err != nil {
		return err
	}
	if !ok {
		created, err := s.records.CreateMeta(ctx, engine.Meta{PartitionCount: count, NodeID: nodeID, Created: time.Now().UTC()})
		if err != nil || created {
			return err
		}
		// Another start recorded it first: check against that.
		return s.CheckPartitionCount(ctx, nodeID, count)
	}
	if got.PartitionCount != count {
		return fmt.Errorf("%w: this store was created on %s with PARTITION_COUNT=%d and the node was started with PARTITION_COUNT=%d; "+
			"the count is fixed for the life of the data: start with PARTITION_COUNT=%d, or point DATA_DIR/MONGO_DB at a new, empty store",
			ErrPartitionCountMismatch, got.Created.Format(time.RFC3339), got.PartitionCount, count, got.PartitionCount)
	}
	return nil
}

// PartitionCount returns the partition count this store was created with
// and the node that created it (0 and "" for a store no node has started
// on yet).
func (s *Store) PartitionCount(ctx context.Context) (count int, nodeID string, err error) {
	got, _, err := s.records.Meta(ctx)
	return got.PartitionCount, got.NodeID, err
}

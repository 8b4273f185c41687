package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

const metaCollection = "meta"

// ErrPartitionCountMismatch is returned when a store created with one
// partition count is opened with another.
var ErrPartitionCountMismatch = errors.New("partition count mismatch")

type clusterMeta struct {
	ID             string    `bson:"_id"`
	PartitionCount int       `bson:"partition_count"`
	NodeID         string    `bson:"node_id"`
	Created        time.Time `bson:"created"`
}

// CheckPartitionCount records count on the first start of a store and
// refuses any other count afterwards: the partition of every document
// depends on it.
func (s *Store) CheckPartitionCount(ctx context.Context, nodeID string, count int) error {
	c := s.db.Collection(metaCollection)
	var got clusterMeta
	err := c.FindOne(ctx, bson.D{{Key: "_id", Value: "cluster"}}).Decode(&got)
	if errors.Is(err, mongo.ErrNoDocuments) {
		_, err = c.InsertOne(ctx, clusterMeta{ID: "cluster", PartitionCount: count, NodeID: nodeID, Created: time.Now().UTC()})
		if mongo.IsDuplicateKeyError(err) {
			return s.CheckPartitionCount(ctx, nodeID, count)
		}
		if err != nil {
			return fmt.Errorf("%w: recording the partition count: %v", ErrUnavailable, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: reading the partition count: %v", ErrUnavailable, err)
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
	var got clusterMeta
	err = s.db.Collection(metaCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "cluster"}}).Decode(&got)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("%w: reading the partition count: %v", ErrUnavailable, err)
	}
	return got.PartitionCount, got.NodeID, nil
}

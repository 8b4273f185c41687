package store

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// partitionIndexes are the indexes a partition's collection needs on a
// MongoDB for its access paths to read what they return rather than the
// partition (besides _id, which serves a point lookup by key, and the key
// ranges of full copies and moves):
//   - position: the history in position order (ScanAfter, CountAfter:
//     catch-up and rollback search) and its newest position
//     (LastPosition, a backward scan of one entry);
//   - collection: a user's collection, live documents in key order
//     (ScanEach, Scan, ScanUser, Collections' match on user and deleted);
//   - tombstones: the tombstones, by the time they were written (the
//     purge).
//
// The field names are those of docToBSON. The embedded store gets none:
// FerretDB 1.24 on SQLite pushes no filter but an exact _id down to SQLite,
// so these indexes would cost every write and serve no read.
var partitionIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}}, Options: options.Index().SetName("position")},
	{Keys: bson.D{{Key: fUser, Value: 1}, {Key: fColl, Value: 1}, {Key: fDeleted, Value: 1}, {Key: "_id", Value: 1}},
		Options: options.Index().SetName("collection")},
	{Keys: bson.D{{Key: fDeleted, Value: 1}, {Key: fUpdated, Value: 1}}, Options: options.Index().SetName("tombstones")},
}

// namespaceNotFound is MongoDB's error code for a collection that does
// not exist.
const namespaceNotFound = 26

// rollbackIndexes serve the rollback listing, oldest first (Rollbacks).
var rollbackIndexes = []mongo.IndexModel{
	{Keys: bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("at")},
}

// ensureIndexes creates partition's indexes, once per process: before its
// first write (commit, insertNew: the write creates the collection) and at
// start for a collection that exists (Writer.LoadAll). Creating an index
// that exists is a no-op, so a restart asks again and changes nothing.
// Without indexes (the embedded store) it does nothing.
func (s *Store) ensureIndexes(ctx context.Context, partition int) error {
	if !s.indexes {
		return nil
	}
	if _, done := s.indexed.Load(partition); done {
		return nil
	}
	if err := s.createIndexes(ctx, CollectionName(partition), partitionIndexes); err != nil {
		return err
	}
	s.indexed.Store(partition, true)
	return nil
}

// createIndexes creates the indexes of one collection that it lacks (and
// the collection, if it does not exist yet), one at a time: FerretDB 1.24
// drops the connection when one createIndexes command names several
// indexes that all exist already.
func (s *Store) createIndexes(ctx context.Context, coll string, models []mongo.IndexModel) error {
	return s.timed("create_indexes", func() error {
		have := map[string]bool{}
		var specs []struct {
			Name string `bson:"name"`
		}
		cur, err := s.db.Collection(coll).Indexes().List(ctx)
		if err == nil {
			err = cur.All(ctx, &specs)
		}
		// MongoDB answers NamespaceNotFound (26) for a collection that
		// does not exist yet; FerretDB lists nothing.
		if ce := (mongo.CommandError{}); err != nil && !(errors.As(err, &ce) && ce.Code == namespaceNotFound) {
			return fmt.Errorf("%w: listing the indexes of %s: %v", ErrUnavailable, coll, err)
		}
		for _, spec := range specs {
			have[spec.Name] = true
		}
		for _, m := range models {
			var o options.IndexOptions
			for _, set := range m.Options.List() {
				if err := set(&o); err != nil {
					return err
				}
			}
			if o.Name != nil && have[*o.Name] {
				continue
			}
			if _, err := s.db.Collection(coll).Indexes().CreateOne(ctx, m); err != nil {
				return fmt.Errorf("%w: creating the indexes of %s: %v", ErrUnavailable, coll, err)
			}
		}
		return nil
	})
}

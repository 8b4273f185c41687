package store

import (
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
//
// Each call builds them anew: the driver writes to a model's options as
// it creates the index, so models shared by partitions whose first
// writes run at once were a data race.
func partitionIndexes() []mongo.IndexModel {
	return []mongo.IndexModel{
		{Keys: bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}}, Options: options.Index().SetName("position")},
		{Keys: bson.D{{Key: fUser, Value: 1}, {Key: fColl, Value: 1}, {Key: fDeleted, Value: 1}, {Key: "_id", Value: 1}},
			Options: options.Index().SetName("collection")},
		{Keys: bson.D{{Key: fDeleted, Value: 1}, {Key: fUpdated, Value: 1}}, Options: options.Index().SetName("tombstones")},
	}
}

// namespaceNotFound is MongoDB's error code for a collection that does
// not exist.
const namespaceNotFound = 26

// rollbackIndexes serve the rollback listing, oldest first (Rollbacks);
// built anew each call, as partitionIndexes are.
func rollbackIndexes() []mongo.IndexModel {
	return []mongo.IndexModel{
		{Keys: bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName("at")},
	}
}

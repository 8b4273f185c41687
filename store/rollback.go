package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

const rollbackCollection = "rollback"

// RolledBack is a document state this node held that the partition's new
// master never had: a write acknowledged with write concern 1 by this node
// as master, not yet replicated when it lost the lease. It is kept and
// listed, never silently dropped.
type RolledBack struct {
	Partition  int            `bson:"p" json:"partition"`
	User       string         `bson:"u" json:"user"`
	Coll       string         `bson:"c" json:"collection"`
	ID         string         `bson:"d" json:"id"`
	Version    int64          `bson:"v" json:"version"`
	Position   Position       `bson:"pos" json:"position"`
	Deleted    bool           `bson:"x" json:"deleted"`
	Body       map[string]any `bson:"b,omitempty" json:"body,omitempty"`
	NewEpoch   uint64         `bson:"ne" json:"new_epoch"`
	EpochStart Position       `bson:"es" json:"new_epoch_start"`
	At         time.Time      `bson:"at" json:"rolled_back_at"`
}

// saveRollback keeps divergent document states (idempotent: one record per
// document state).
func (s *Store) saveRollback(ctx context.Context, partition int, docs []*Doc, newEpoch uint64, start Position) error {
	if len(docs) == 0 {
		return nil
	}
	recs := make([]any, len(docs))
	now := time.Now().UTC()
	for i, d := range docs {
		rec := RolledBack{Partition: partition, User: d.User, Coll: d.Coll, ID: d.ID, Version: d.Version, Position: d.Pos,
			Deleted: d.Deleted, Body: d.Body, NewEpoch: newEpoch, EpochStart: start, At: now}
		recs[i] = append(bson.D{{Key: "_id", Value: fmt.Sprintf("%s@%s", d.Key, d.Pos)}}, toD(rec)...)
	}
	// Inserts, not upserts: a record is keyed by document and position, so
	// one kept by an earlier attempt is a duplicate to skip, and inserts
	// cost the embedded store no scan.
	return s.timed("rollback_save", func() error {
		_, err := s.db.Collection(rollbackCollection).InsertMany(ctx, recs, options.InsertMany().SetOrdered(false))
		if err != nil && !onlyDuplicates(err) {
			return fmt.Errorf("%w: keeping %d rolled back documents: %v", ErrUnavailable, len(docs), err)
		}
		return nil
	})
}

func toD(v any) bson.D {
	raw, err := bson.Marshal(v)
	if err != nil {
		panic(err)
	}
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		panic(err)
	}
	return d
}

// Rollbacks lists the rolled back document states this node keeps, oldest
// first, at most limit.
func (s *Store) Rollbacks(ctx context.Context, limit int) ([]RolledBack, error) {
	var out []RolledBack
	err := s.timed("rollbacks", func() error {
		cur, err := s.db.Collection(rollbackCollection).Find(ctx, bson.D{},
			options.Find().SetSort(bson.D{{Key: "at", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer cur.Close(ctx)
		for cur.Next(ctx) {
			var r RolledBack
			if err := cur.Decode(&r); err != nil {
				return err
			}
			if r.Body != nil {
				r.Body = normalizeBSON(r.Body)
			}
			out = append(out, r)
		}
		return cur.Err()
	})
	return out, err
}

// normalizeBSON turns nested bson.D/bson.M and int32 from decoding into the
// plain values documents hold.
func normalizeBSON(m map[string]any) map[string]any {
	raw, err := bson.Marshal(m)
	if err != nil {
		return m
	}
	out, err := rawToMap(raw)
	if err != nil {
		return m
	}
	return out
}

// remove deletes the records of keys from a partition (a replica dropping
// documents its master has no record of).
func (s *Store) remove(ctx context.Context, partition int, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := s.acquireWrite(ctx); err != nil {
		return err
	}
	defer s.releaseWrite()
	return s.timed("remove", func() error {
		if _, err := s.db.Collection(CollectionName(partition)).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}); err != nil {
			return fmt.Errorf("%w: removing %d documents: %v", ErrUnavailable, len(keys), err)
		}
		return nil
	})
}

// onlyDuplicates reports whether every error of a bulk insert is a
// duplicate key.
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return false
		}
	}
	return true
}

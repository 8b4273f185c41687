package store

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

const leaseCollection = "leases"

// LeaseVote is what a lease voter keeps durably for one partition: the
// highest epoch it has granted and to whom. The grant's expiry is not kept:
// a voter that restarts grants nothing for one lease TTL, by which time
// every lease it granted before has expired.
type LeaseVote struct {
	Partition int    `bson:"_id"`
	Holder    string `bson:"holder"`
	Epoch     uint64 `bson:"epoch"`
}

// LeaseVotes loads every vote this node has recorded as a lease voter.
func (s *Store) LeaseVotes(ctx context.Context) (map[int]LeaseVote, error) {
	out := map[int]LeaseVote{}
	err := s.timed("lease_votes", func() error {
		cur, err := s.db.Collection(leaseCollection).Find(ctx, bson.D{})
		if err != nil {
			return fmt.Errorf("%w: reading lease votes: %v", ErrUnavailable, err)
		}
		defer cur.Close(ctx)
		for cur.Next(ctx) {
			var v LeaseVote
			if err := cur.Decode(&v); err != nil {
				return fmt.Errorf("a stored lease vote is unreadable: %w", err)
			}
			out[v.Partition] = v
		}
		return cur.Err()
	})
	return out, err
}

// SaveLeaseVote records a vote durably before the voter answers. The caller
// serialises votes per partition.
func (s *Store) SaveLeaseVote(ctx context.Context, v LeaseVote) error {
	return s.timed("lease_vote", func() error {
		_, err := s.db.Collection(leaseCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: v.Partition}}, v, options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording a lease vote: %v", ErrUnavailable, err)
		}
		return nil
	})
}

package store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

const leaseCollection = "leases"

// LeaseVote is what a lease voter keeps durably for one partition: the
// highest epoch it has granted and to whom. The grant's expiry is not kept:
// a voter that restarts grants nothing for one lease TTL, by which time
// every lease it granted before has expired.
type LeaseVote struct {
	Partition int    `bson:"p"`
	Holder    string `bson:"h"`
	Epoch     uint64 `bson:"e"`
}

// All votes live in one document, so recording any number of them is one
// small write (a collection of one record per partition would cost the
// embedded store a scan per record).
type leaseVotesDoc struct {
	ID    string      `bson:"_id"`
	Votes []LeaseVote `bson:"votes"`
}

// LeaseVotes loads every vote this node has recorded as a lease voter.
func (s *Store) LeaseVotes(ctx context.Context) (map[int]LeaseVote, error) {
	out := map[int]LeaseVote{}
	err := s.timed("lease_votes", func() error {
		var doc leaseVotesDoc
		err := s.db.Collection(leaseCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "votes"}}).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading lease votes: %v", ErrUnavailable, err)
		}
		for _, v := range doc.Votes {
			out[v.Partition] = v
		}
		return nil
	})
	return out, err
}

// SaveLeaseVotes replaces the recorded votes with votes (every partition's),
// durably, before the voter answers. The caller serialises calls.
func (s *Store) SaveLeaseVotes(ctx context.Context, votes map[int]LeaseVote) error {
	doc := leaseVotesDoc{ID: "votes", Votes: make([]LeaseVote, 0, len(votes))}
	for _, v := range votes {
		doc.Votes = append(doc.Votes, v)
	}
	sort.Slice(doc.Votes, func(i, j int) bool { return doc.Votes[i].Partition < doc.Votes[j].Partition })
	return s.timed("lease_votes_save", func() error {
		_, err := s.db.Collection(leaseCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: "votes"}}, doc, options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording lease votes: %v", ErrUnavailable, err)
		}
		return nil
	})
}

package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shoal-db/shoal/record"
)

const leaseCollection = "leases"

// LeaseVote is what a lease voter keeps durably for one partition. It lives
// in the leaf package record, so that the lease manager uses it without
// building the store; this alias keeps store.LeaseVote for every caller.
type LeaseVote = record.LeaseVote

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

// voterSetDoc is the lease voter set this node last applied, and when: a
// change of the voter set goes one member at a time, and a restarted node
// must resume from where it was rather than jump to the peer list's set.
type voterSetDoc struct {
	ID      string    `bson:"_id"`
	Voters  []string  `bson:"voters"`
	Changed time.Time `bson:"changed"`
}

// VoterSet returns the voter set this node last applied (nil if none).
func (s *Store) VoterSet(ctx context.Context) ([]string, time.Time, error) {
	var doc voterSetDoc
	err := s.timed("voter_set", func() error {
		err := s.db.Collection(leaseCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "voter-set"}}).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the voter set: %v", ErrUnavailable, err)
		}
		return nil
	})
	return doc.Voters, doc.Changed, err
}

// SaveVoterSet records the voter set this node applies from now on.
func (s *Store) SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error {
	return s.timed("voter_set_save", func() error {
		_, err := s.db.Collection(leaseCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: "voter-set"}},
			voterSetDoc{ID: "voter-set", Voters: voters, Changed: changed.UTC()}, options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording the voter set: %v", ErrUnavailable, err)
		}
		return nil
	})
}

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
	var doc leaseVotesDoc
	if err := s.readLeaseDoc(ctx, "lease_votes", "votes", "lease votes", &doc); err != nil {
		return map[int]LeaseVote{}, err
	}
	out := make(map[int]LeaseVote, len(doc.Votes))
	for _, v := range doc.Votes {
		out[v.Partition] = v
	}
	return out, nil
}

// SaveLeaseVotes replaces the recorded votes with votes (every partition's),
// durably, before the voter answers. The caller serialises calls.
func (s *Store) SaveLeaseVotes(ctx context.Context, votes map[int]LeaseVote) error {
	doc := leaseVotesDoc{ID: "votes", Votes: make([]LeaseVote, 0, len(votes))}
	for _, v := range votes {
		doc.Votes = append(doc.Votes, v)
	}
	sort.Slice(doc.Votes, func(i, j int) bool { return doc.Votes[i].Partition < doc.Votes[j].Partition })
	return s.writeLeaseDoc(ctx, "lease_votes_save", "votes", "lease votes", doc)
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
	err := s.readLeaseDoc(ctx, "voter_set", "voter-set", "the voter set", &doc)
	return doc.Voters, doc.Changed, err
}

// SaveVoterSet records the voter set this node applies from now on.
func (s *Store) SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error {
	return s.writeLeaseDoc(ctx, "voter_set_save", "voter-set", "the voter set",
		voterSetDoc{ID: "voter-set", Voters: voters, Changed: changed.UTC()})
}

// readLeaseDoc reads the document id of the lease collection (what a node
// keeps of its own lease business, one document per kind) into doc, timed
// as op; a missing document leaves doc as it is. what names it in errors.
func (s *Store) readLeaseDoc(ctx context.Context, op, id, what string, doc any) error {
	return s.timed(op, func() error {
		err := s.db.Collection(leaseCollection).FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading %s: %v", ErrUnavailable, what, err)
		}
		return nil
	})
}

// writeLeaseDoc replaces (or creates) the document id of the lease
// collection with doc, durably, timed as op.
func (s *Store) writeLeaseDoc(ctx context.Context, op, id, what string, doc any) error {
	return s.timed(op, func() error {
		if _, err := s.db.Collection(leaseCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: id}}, doc,
			options.Replace().SetUpsert(true)); err != nil {
			return fmt.Errorf("%w: recording %s: %v", ErrUnavailable, what, err)
		}
		return nil
	})
}

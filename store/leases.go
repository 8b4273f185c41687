package store

import (
	"context"
	"time"

	"github.com/shoal-db/shoal/record"
)

// LeaseVote is what a lease voter keeps durably for one partition. It lives
// in the leaf package record, so that the lease manager uses it without
// building the store; this alias keeps store.LeaseVote for every caller.
type LeaseVote = record.LeaseVote

// LeaseVotes loads every vote this node has recorded as a lease voter.
func (s *Store) LeaseVotes(ctx context.Context) (map[int]LeaseVote, error) {
	return s.records.LeaseVotes(ctx)
}

// SaveLeaseVotes replaces the recorded votes with votes (every partition's),
// durably, before the voter answers. The caller serialises calls.
func (s *Store) SaveLeaseVotes(ctx context.Context, votes map[int]LeaseVote) error {
	return s.records.SaveLeaseVotes(ctx, votes)
}

// VoterSet returns the voter set this node last applied (nil if none).
func (s *Store) VoterSet(ctx context.Context) ([]string, time.Time, error) {
	return s.records.VoterSet(ctx)
}

// SaveVoterSet records the voter set this node applies from now on.
func (s *Store) SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error {
	return s.records.SaveVoterSet(ctx, voters, changed)
}

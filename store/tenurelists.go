package store

import (
	"context"

	"github.com/shoal-db/shoal/store/engine"
)

// TenureList is the replica list this node last gave a partition it
// mastered (engine.TenureList).
type TenureList = engine.TenureList

// TenureReplicas loads the replica list this node last gave each
// partition it mastered. A node restarted after a tenure names these
// replicas again rather than itself alone: a copy that holds majority
// writes must keep its slot until the replicas chosen after it hold them
// too.
func (s *Store) TenureReplicas(ctx context.Context) (map[int]TenureList, error) {
	return s.records.TenureLists(ctx)
}

// SaveTenureReplicas replaces the recorded replica lists with lists, durably.
func (s *Store) SaveTenureReplicas(ctx context.Context, lists map[int]TenureList) error {
	return s.records.SaveTenureLists(ctx, lists)
}

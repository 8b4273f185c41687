package store

import (
	"context"
	"slices"
)

// TenureList is the replica list this node last gave a partition it
// mastered (regular copies first) and the epoch of that tenure.
type TenureList struct {
	Epoch    uint64
	Replicas []string
	// Seq numbers the lists recorded for one tenure (from 1): the lease
	// voters keep the newest (record.CopyList).
	Seq uint64
}

// tenureList is one partition's TenureList as stored.
type tenureList struct {
	Partition int      `bson:"p"`
	Epoch     uint64   `bson:"e"`
	Replicas  []string `bson:"r"`
	Seq       uint64   `bson:"s,omitempty"`
}

// All lists live in one document, like the lease votes: one small write
// records any number of them.
type tenureListsDoc struct {
	ID    string       `bson:"_id"`
	Lists []tenureList `bson:"lists"`
}

// TenureReplicas loads the replica list this node last gave each
// partition it mastered. A node restarted after a tenure names these
// replicas again rather than itself alone: a copy that holds majority
// writes must keep its slot until the replicas chosen after it hold them
// too.
func (s *Store) TenureReplicas(ctx context.Context) (map[int]TenureList, error) {
	var doc tenureListsDoc
	if err := s.readLeaseDoc(ctx, "tenure_replicas", "tenure-replicas", "the replica lists of this node's tenures", &doc); err != nil {
		return map[int]TenureList{}, err
	}
	out := make(map[int]TenureList, len(doc.Lists))
	for _, l := range doc.Lists {
		out[l.Partition] = TenureList{Epoch: l.Epoch, Replicas: l.Replicas, Seq: l.Seq}
	}
	return out, nil
}

// SaveTenureReplicas replaces the recorded replica lists with lists, durably.
func (s *Store) SaveTenureReplicas(ctx context.Context, lists map[int]TenureList) error {
	doc := tenureListsDoc{ID: "tenure-replicas", Lists: make([]tenureList, 0, len(lists))}
	for p, l := range lists {
		doc.Lists = append(doc.Lists, tenureList{Partition: p, Epoch: l.Epoch, Replicas: l.Replicas, Seq: l.Seq})
	}
	slices.SortFunc(doc.Lists, func(a, b tenureList) int { return a.Partition - b.Partition })
	return s.writeLeaseDoc(ctx, "tenure_replicas_save", "tenure-replicas", "the replica lists of this node's tenures", doc)
}

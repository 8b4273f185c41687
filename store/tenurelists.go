package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// tenureList is the replica list this node last gave a partition it
// mastered, regular copies first.
type tenureList struct {
	Partition int      `bson:"p"`
	Epoch     uint64   `bson:"e"`
	Replicas  []string `bson:"r"`
}

// All lists live in one document, like the lease votes: one small write
// records any number of them.
type tenureListsDoc struct {
	ID    string       `bson:"_id"`
	Lists []tenureList `bson:"lists"`
}

// TenureReplicas loads the replica list this node last gave each
// partition it mastered, and the epoch of that tenure. A node restarted
// after a tenure names these replicas again rather than itself alone: a
// copy that holds majority writes must keep its slot until the replicas
// chosen after it hold them too.
func (s *Store) TenureReplicas(ctx context.Context) (map[int][]string, map[int]uint64, error) {
	lists, epochs := map[int][]string{}, map[int]uint64{}
	err := s.timed("tenure_replicas", func() error {
		var doc tenureListsDoc
		err := s.db.Collection(leaseCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "tenure-replicas"}}).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the replica lists of this node's tenures: %v", ErrUnavailable, err)
		}
		for _, l := range doc.Lists {
			lists[l.Partition], epochs[l.Partition] = l.Replicas, l.Epoch
		}
		return nil
	})
	return lists, epochs, err
}

// SaveTenureReplicas replaces the recorded replica lists (every partition
// this node masters, with the epoch of its tenure), durably.
func (s *Store) SaveTenureReplicas(ctx context.Context, lists map[int][]string, epochs map[int]uint64) error {
	doc := tenureListsDoc{ID: "tenure-replicas", Lists: make([]tenureList, 0, len(lists))}
	for p, r := range lists {
		doc.Lists = append(doc.Lists, tenureList{Partition: p, Epoch: epochs[p], Replicas: r})
	}
	slices.SortFunc(doc.Lists, func(a, b tenureList) int { return a.Partition - b.Partition })
	return s.timed("tenure_replicas_save", func() error {
		_, err := s.db.Collection(leaseCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: "tenure-replicas"}}, doc,
			options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording the replica lists of this node's tenures: %v", ErrUnavailable, err)
		}
		return nil
	})
}

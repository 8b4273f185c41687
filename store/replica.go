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

const partitionsCollection = "partitions"

// appliedDoc is a replica's durable record of how much of a partition's
// history it holds.
type appliedDoc struct {
	Partition int    `bson:"_id"`
	Epoch     uint64 `bson:"e"`
	Seq       uint64 `bson:"s"`
}

// Applied returns the position up to which this node holds a partition's
// history as a replica (zero if never recorded).
func (s *Store) Applied(ctx context.Context, partition int) (Position, error) {
	var d appliedDoc
	err := s.timed("applied", func() error {
		err := s.db.Collection(partitionsCollection).FindOne(ctx, bson.D{{Key: "_id", Value: partition}}).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading the applied position of partition %d: %v", ErrUnavailable, partition, err)
		}
		return nil
	})
	return Position{Epoch: d.Epoch, Seq: d.Seq}, err
}

func (s *Store) saveApplied(ctx context.Context, partition int, pos Position) error {
	return s.timed("applied_save", func() error {
		_, err := s.db.Collection(partitionsCollection).ReplaceOne(ctx, bson.D{{Key: "_id", Value: partition}},
			appliedDoc{Partition: partition, Epoch: pos.Epoch, Seq: pos.Seq}, options.Replace().SetUpsert(true))
		if err != nil {
			return fmt.Errorf("%w: recording the applied position of partition %d: %v", ErrUnavailable, partition, err)
		}
		return nil
	})
}

// ScanAfter returns up to limit documents and tombstones of a partition
// whose position is after the given one, in position order: the log a
// lagging replica is caught up from.
func (s *Store) ScanAfter(ctx context.Context, partition int, after Position, limit int) ([]*Doc, error) {
	filter := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fEpoch, Value: bson.D{{Key: "$gt", Value: int64(after.Epoch)}}}},
		bson.D{{Key: fEpoch, Value: int64(after.Epoch)}, {Key: fSeq, Value: bson.D{{Key: "$gt", Value: int64(after.Seq)}}}},
	}}}
	docs, err := s.find(ctx, "scan_after", partition, filter,
		options.Find().SetSort(bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	// The embedded store's sort on two keys is checked here: catch-up
	// relies on position order.
	slices.SortFunc(docs, func(a, b *Doc) int { return a.Pos.Compare(b.Pos) })
	return docs, nil
}

// Batch is a run of a partition's history shipped from its master: the
// latest state of every document changed in (From, UpTo], in position order.
type Batch struct {
	Partition int
	Epoch     uint64 // the master's epoch
	From      Position
	UpTo      Position
	Docs      []*Doc
}

// Errors of Apply.
var (
	// ErrStaleEpoch: the batch comes from a master older than the newest
	// epoch this node has seen for the partition.
	ErrStaleEpoch = errors.New("the batch's epoch is older than one this node has seen")
	// ErrGap: the batch starts after what this node holds; the master must
	// catch it up from its applied position first.
	ErrGap = errors.New("the batch does not follow what this node holds")
	// ErrIsMaster: this node holds the partition's lease and takes no
	// batches for it.
	ErrIsMaster = errors.New("this node is the partition's master")
)

// ApplyResult is the outcome of Apply: the position this node now holds
// the partition's history up to, and the newest epoch it has seen.
type ApplyResult struct {
	Applied Position
	Epoch   uint64
	Err     error
}

// Apply takes a batch as a replica, through the partition's writer:
// idempotently (a document not newer than the copy held is skipped),
// refusing a batch from an older epoch than seen and one that leaves a
// gap, and records the applied position durably.
func (w *Writer) Apply(ctx context.Context, b Batch) ApplyResult {
	req := &request{apply: &b, done: make(chan struct{})}
	w.closeMu.RLock()
	if w.closed {
		w.closeMu.RUnlock()
		return ApplyResult{Err: ErrClosed}
	}
	p := w.parts[b.Partition]
	p.start.Do(func() {
		w.wg.Add(1)
		go w.run(p)
	})
	select {
	case p.queue <- req:
	case <-ctx.Done():
		w.closeMu.RUnlock()
		return ApplyResult{Err: ctx.Err()}
	}
	w.closeMu.RUnlock()
	select {
	case <-req.done:
		return req.applied
	case <-ctx.Done():
		return ApplyResult{Err: ctx.Err()}
	}
}

// Applied returns the position up to which this node holds a partition's
// history: as master, its last committed position; as a replica, the last
// position a batch or catch-up brought it to.
func (w *Writer) Applied(partition int) Position {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.applied.Compare(p.last) > 0 {
		return p.applied
	}
	return p.last
}

// processApply runs one batch on the partition's goroutine.
func (w *Writer) processApply(p *partition, b *Batch) ApplyResult {
	if err := w.load(p); err != nil {
		return ApplyResult{Err: err}
	}
	p.mu.Lock()
	applied, last := p.applied, p.last
	p.mu.Unlock()
	held := applied
	if last.Compare(held) > 0 {
		held = last
	}
	newest := max(applied.Epoch, last.Epoch, p.epochSeen)
	res := func(err error) ApplyResult { return ApplyResult{Applied: held, Epoch: newest, Err: err} }
	if w.opts.Lease != nil {
		if _, ok := w.opts.Lease(p.id); ok {
			return res(ErrIsMaster)
		}
	}
	if b.Epoch < newest {
		return res(ErrStaleEpoch)
	}
	if held.Compare(b.From) < 0 {
		return res(ErrGap)
	}
	p.epochSeen = max(p.epochSeen, b.Epoch)
	var writes []write
	newLast := last
	for _, d := range b.Docs {
		cur, err := w.current(p, d.Key, false)
		if err != nil {
			return res(err)
		}
		if cur != nil && d.Pos.Compare(cur.Pos) <= 0 {
			continue // already held, or something newer is
		}
		writes = append(writes, write{doc: d})
		if d.Pos.Compare(newLast) > 0 {
			newLast = d.Pos
		}
	}
	if len(writes) > 0 {
		p.commits.Add(1)
		err := w.store.commit(w.ctx, p.id, writes)
		for _, wr := range writes {
			if err != nil {
				w.cache.forget(wr.doc.Key)
			} else {
				w.cache.put(wr.doc.Key, wr.doc)
			}
		}
		p.commits.Add(1)
		if err != nil {
			return res(err)
		}
	}
	next := applied
	if b.UpTo.Compare(next) > 0 {
		next = b.UpTo
	}
	if next != applied {
		if err := w.store.saveApplied(w.ctx, p.id, next); err != nil {
			return res(err)
		}
	}
	p.mu.Lock()
	p.applied, p.last = next, newLast
	p.mu.Unlock()
	held = next
	if newLast.Compare(held) > 0 {
		held = newLast
	}
	return ApplyResult{Applied: held, Epoch: max(newest, b.Epoch)}
}

package store

import (
	"context"
	"time"

	"github.com/shoal-db/shoal/store/engine"
)

// The store's reads and writes of document states, each through the
// engine (engine.Documents); the partition writers call the unexported
// ones.

// CollectionCount is one collection of a user and its live documents.
type CollectionCount = engine.CollectionCount

// Get reads one document (or tombstone) by key. It returns ErrNotFound when
// the store has no record of it.
func (s *Store) Get(ctx context.Context, partition int, key string) (*Doc, error) {
	return s.docs.Get(ctx, partition, key)
}

// Scan returns the live documents of one collection of a user, all in
// memory at once: for tests and checks of small collections; a request
// reads with ScanEach.
func (s *Store) Scan(ctx context.Context, partition int, user, coll string) ([]*Doc, error) {
	return s.collect(ctx, partition, engine.Scope{User: user, Coll: coll})
}

// ScanUser returns the live documents of every collection of a user, all
// in memory at once, as Scan.
func (s *Store) ScanUser(ctx context.Context, partition int, user string) ([]*Doc, error) {
	return s.collect(ctx, partition, engine.Scope{User: user})
}

func (s *Store) collect(ctx context.Context, partition int, scope engine.Scope) ([]*Doc, error) {
	var out []*Doc
	err := s.docs.Each(ctx, partition, scope, func(d *Doc) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// ScanEach calls fn with each live document of one collection of a user
// whose id sorts after afterID ("": every one), in id order (byte order),
// as it reads them, so that the caller holds only the documents it keeps
// and may stop early. It stops at the first error fn returns and returns
// it.
func (s *Store) ScanEach(ctx context.Context, partition int, user, coll, afterID string, fn func(*Doc) error) error {
	return s.docs.Each(ctx, partition, engine.Scope{User: user, Coll: coll, AfterID: afterID}, fn)
}

// Collections lists a user's collections with their live document counts,
// sorted by name.
func (s *Store) Collections(ctx context.Context, partition int, user string) ([]CollectionCount, error) {
	return s.docs.Collections(ctx, partition, user)
}

// LastPosition returns the newest position stored in a partition (zero if
// it is empty). The documents are the log, so this is where the partition's
// history ends.
func (s *Store) LastPosition(ctx context.Context, partition int) (Position, error) {
	return s.docs.Last(ctx, partition)
}

// CountAfter counts a partition's documents and tombstones whose position
// is after the given one (the zero position: all of them): how much a
// catch-up or a full copy has to send.
func (s *Store) CountAfter(ctx context.Context, partition int, after Position) (int64, error) {
	return s.docs.CountAfter(ctx, partition, after)
}

// ScanAfter returns up to limit (0: all) documents and tombstones of a
// partition whose position is after the given one, in position order: the
// log a lagging replica is caught up from.
func (s *Store) ScanAfter(ctx context.Context, partition int, after Position, limit int) ([]*Doc, error) {
	return s.docs.ScanAfter(ctx, partition, after, limit)
}

// ScanKeys returns up to limit (0: all) documents and tombstones of a
// partition whose key is after afterKey ("" = from the first), in key
// order: the chunks of a full copy.
func (s *Store) ScanKeys(ctx context.Context, partition int, afterKey string, limit int) ([]*Doc, error) {
	return s.docs.ScanKeys(ctx, partition, afterKey, limit)
}

// write is one document state to commit. Insert is true when the store is
// known to hold no record of the key (an insert is cheaper than a replace).
type write struct {
	doc    *Doc
	insert bool
}

// commit writes a batch of document states in order (engine.Commit).
func (s *Store) commit(ctx context.Context, partition int, writes []write) error {
	return s.docs.Commit(ctx, partition, engineWrites(writes))
}

func engineWrites(writes []write) []engine.Write {
	out := make([]engine.Write, len(writes))
	for i, w := range writes {
		out[i] = engine.Write{Doc: w.doc, Insert: w.insert}
	}
	return out
}

// commitDeferred is commit without waiting for the disk, on an engine
// that can (engine.Deferring): durable at the engine's next synced write.
// A replica's applied documents are written so; SyncApplied, before it
// answers, is that synced write.
func (s *Store) commitDeferred(ctx context.Context, partition int, writes []write) error {
	if s.deferring == nil {
		return s.commit(ctx, partition, writes)
	}
	return s.deferring.CommitDeferred(ctx, partition, engineWrites(writes))
}

// syncDeferred makes the changes commitDeferred and insertNewDeferred
// stored so far durable (nothing to do on an engine that does not defer).
func (s *Store) syncDeferred(ctx context.Context) error {
	if s.deferring == nil {
		return nil
	}
	return s.deferring.Sync(ctx)
}

// insertNewDeferred inserts documents that should be new here, without
// waiting for the disk where the engine can, as commitDeferred; it returns
// the keys that were already stored (left untouched). A write marked
// insert is known to be new here: the embedded engine does not look its
// key up.
func (s *Store) insertNewDeferred(ctx context.Context, partition int, writes []write) (map[string]bool, error) {
	if s.deferring == nil {
		docs := make([]*Doc, len(writes))
		for i, w := range writes {
			docs[i] = w.doc
		}
		return s.docs.InsertNew(ctx, partition, docs)
	}
	return s.deferring.InsertNewDeferred(ctx, partition, engineWrites(writes))
}

// remove deletes the records of keys from a partition (a replica dropping
// documents its master has no record of).
func (s *Store) remove(ctx context.Context, partition int, keys []string) error {
	return s.docs.Remove(ctx, partition, keys)
}

// tombstones reads up to limit (0: all) of a partition's tombstones last
// changed at or after from and before before (the zero time: unbounded),
// oldest first, without bodies (they have none).
func (s *Store) tombstones(ctx context.Context, partition int, from, before time.Time, limit int) ([]*Doc, error) {
	return s.docs.Tombstones(ctx, partition, from, before, limit)
}

// deleteTombstones removes tombstones that tombstones returned, of the
// keys whose state they still are, and returns how many entries went.
func (s *Store) deleteTombstones(ctx context.Context, partition int, tombstones []*Doc) (int, error) {
	return s.docs.PurgeTombstones(ctx, partition, tombstones)
}

// keyRange returns the keys and positions of what a partition holds with
// a key in (after, upTo] ("" = unbounded).
func (s *Store) keyRange(ctx context.Context, partition int, after, upTo string) ([]*Doc, error) {
	return s.docs.KeyRange(ctx, partition, after, upTo)
}

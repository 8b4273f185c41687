package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/store/engine"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongoEngine is the engine over MongoDB's driver (engine.Documents): a
// real MongoDB given by MONGO_URI, or the embedded FerretDB. One
// collection per partition (CollectionName) holds a document per key
// (docToBSON). It shares the Store's connection, write slots, metrics
// and indexes.
type mongoEngine struct {
	s *Store
	// logMu serialises SaveRecords (each Writer serialises its own; tests
	// run two Writers on one Store); log is where it writes.
	logMu sync.Mutex
	log   appliedLog
}

var (
	_ engine.Documents = (*mongoEngine)(nil)
	_ engine.Records   = (*mongoEngine)(nil)
)

// Each calls fn with every live document of scope, in batches of about
// scanBatchBytes (see ScanEach). A collection's are read in id order, from
// the index "collection" (user, collection, deleted, _id): equal on the
// first three, a range of keys (user/collection/id, compared as bytes) on
// the last, which the sort follows.
func (m *mongoEngine) Each(ctx context.Context, partition int, scope engine.Scope, fn func(*record.Doc) error) error {
	if scope.Coll == "" {
		filter := bson.D{{Key: fUser, Value: scope.User}, {Key: fDeleted, Value: false}}
		return m.each(ctx, "scan_user", partition, filter, options.Find().SetBatchSize(scanFirstBatch), scanBatchBytes, fn)
	}
	// A collection's keys sort from its prefix up to, not including, the
	// prefix with its last byte, '/', raised by one: '0'.
	prefix := record.DocKey(scope.User, scope.Coll, "")
	key := bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: strings.TrimSuffix(prefix, "/") + "0"}}
	if scope.AfterID != "" {
		key[0] = bson.E{Key: "$gt", Value: prefix + scope.AfterID}
	}
	filter := bson.D{{Key: fUser, Value: scope.User}, {Key: fColl, Value: scope.Coll}, {Key: fDeleted, Value: false}, {Key: "_id", Value: key}}
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(scanFirstBatch)
	return m.each(ctx, "scan_each", partition, filter, opts, scanBatchBytes, fn)
}

// cursorCloseTimeout bounds closing a cursor, in place of the caller's
// context (see closeCursor).
const cursorCloseTimeout = 5 * time.Second

// closeCursor closes cur on the server, even when ctx has ended (a caller
// that went away, a timeout): the driver sends no killCursors with a
// context that has ended, and the cursor stayed open on the server, on
// MongoDB until its idle timeout (10 minutes), on FerretDB 1.24 holding
// one of its 100 pooled SQLite connections for as long as the node's
// connection lived. Enough of those left the store unable to take a
// write.
func closeCursor(ctx context.Context, cur *mongo.Cursor) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cursorCloseTimeout)
	defer cancel()
	cur.Close(ctx)
}

// ensureAllIndexes creates the rollback collection's indexes; a
// partition's are created before it is first read at start (Last, which
// Writer.LoadAll asks of every partition that exists) or written.
func (m *mongoEngine) ensureAllIndexes(ctx context.Context) error {
	return m.createIndexes(ctx, rollbackCollection, rollbackIndexes())
}

// Partitions lists the partitions whose collection exists.
func (m *mongoEngine) Partitions(ctx context.Context) (map[int]bool, error) {
	names, err := m.s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("%w: listing collections: %v", ErrUnavailable, err)
	}
	out := map[int]bool{}
	for _, n := range names {
		digits, ok := strings.CutPrefix(n, "p")
		if p, err := strconv.Atoi(digits); ok && err == nil && p >= 0 && CollectionName(p) == n {
			out[p] = true
		}
	}
	return out, nil
}

// Get reads one document (or tombstone) by key. It returns ErrNotFound when
// the store has no record of it.
func (m *mongoEngine) Get(ctx context.Context, partition int, key string) (*Doc, error) {
	var d *Doc
	err := m.s.timed("get", func() error {
		raw, err := m.s.db.Collection(CollectionName(partition)).FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Raw()
		if errors.Is(err, mongo.ErrNoDocuments) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("%w: reading %s: %v", ErrUnavailable, key, err)
		}
		d, err = docFromRaw(raw)
		return err
	})
	return d, err
}

func (m *mongoEngine) find(ctx context.Context, op string, partition int, filter bson.D, opts *options.FindOptionsBuilder) ([]*Doc, error) {
	var out []*Doc
	err := m.each(ctx, op, partition, filter, opts, 0, func(d *Doc) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// each calls fn with every document filter selects. An error of fn ends
// the scan and is returned as it is (and not observed as the store's).
// batchBytes, when positive, sizes the batches after the first (see
// ScanEach); 0 leaves them to the store.
func (m *mongoEngine) each(ctx context.Context, op string, partition int, filter bson.D, opts *options.FindOptionsBuilder, batchBytes int64, fn func(*Doc) error) error {
	var fnErr error
	err := m.s.timed(op, func() error {
		var o []options.Lister[options.FindOptions]
		if opts != nil {
			o = append(o, opts)
		}
		cur, err := m.s.db.Collection(CollectionName(partition)).Find(ctx, filter, o...)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer closeCursor(ctx, cur)
		var n, size int64
		for cur.Next(ctx) {
			if batchBytes > 0 {
				n, size = n+1, size+int64(len(cur.Current))
				cur.SetBatchSize(batchFor(size/n, batchBytes))
			}
			d, err := docFromRaw(cur.Current)
			if err != nil {
				return err
			}
			if fnErr = fn(d); fnErr != nil {
				return nil
			}
		}
		if err := cur.Err(); err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// Collections lists a user's collections with their live document counts,
// sorted by name.
func (m *mongoEngine) Collections(ctx context.Context, partition int, user string) ([]engine.CollectionCount, error) {
	out := []engine.CollectionCount{}
	err := m.s.timed("collections", func() error {
		cur, err := m.s.db.Collection(CollectionName(partition)).Aggregate(ctx, mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: fUser, Value: user}, {Key: fDeleted, Value: false}}}},
			{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$" + fColl}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
			{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer closeCursor(ctx, cur)
		for cur.Next(ctx) {
			name, _ := cur.Current.Lookup("_id").StringValueOK()
			out = append(out, engine.CollectionCount{Name: name, Count: rawInt(cur.Current.Lookup("n"))})
		}
		return cur.Err()
	})
	return out, err
}

// LastPosition returns the newest position stored in a partition (zero if
// it is empty). The documents are the log, so this is where the partition's
// history ends.
func (m *mongoEngine) Last(ctx context.Context, partition int) (record.Position, error) {
	if err := m.ensureIndexes(ctx, partition); err != nil {
		return record.Position{}, err
	}
	docs, err := m.find(ctx, "last_position", partition, bson.D{},
		options.Find().SetSort(bson.D{{Key: fEpoch, Value: -1}, {Key: fSeq, Value: -1}}).SetLimit(1).
			SetProjection(bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}, {Key: fDeleted, Value: 1}}))
	if err != nil || len(docs) == 0 {
		return Position{}, err
	}
	return docs[0].Pos, nil
}

// maxBulkStatements is the most writes Commit sends in one bulk write,
// and the most statements of write commands in flight at once, all
// partitions together (see there).
const maxBulkStatements = 64

// commit writes a batch of document states in ordered bulk writes,
// retrying while the store is busy. Retries turn inserts into upserts, so a
// batch that was partly applied before a failure is applied exactly once.
func (m *mongoEngine) Commit(ctx context.Context, partition int, writes []engine.Write) error {
	if err := m.ensureIndexes(ctx, partition); err != nil {
		return err
	}
	if err := m.s.acquireWrite(ctx); err != nil {
		return err
	}
	defer m.s.releaseWrite()
	coll := m.s.db.Collection(CollectionName(partition))
	return m.s.retryBusy(ctx, "commit", partition, func(attempt int) error {
		models := make([]mongo.WriteModel, len(writes))
		for i, w := range writes {
			rec := docToBSON(w.Doc)
			if w.Insert && attempt == 0 {
				models[i] = mongo.NewInsertOneModel().SetDocument(rec)
			} else {
				models[i] = mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: w.Doc.Key}}).SetReplacement(rec).SetUpsert(true)
			}
		}
		err := m.s.timed("commit", func() error {
			// In pieces, and no more statements in flight than one
			// piece holds, across partitions: FerretDB 1.24 holds one
			// pooled SQLite connection per statement of an update
			// command until the command ends, and an update of 100
			// statements or more (its pool's size), or twelve updates
			// at once of 40, waited for connections for good, and every
			// other operation on that database behind them. A bulk write
			// is not atomic on MongoDB either; pieces in order are the
			// same write.
			for len(models) > 0 {
				n := min(len(models), maxBulkStatements)
				if err := m.s.statements.Acquire(ctx, int64(n)); err != nil {
					return err
				}
				_, err := coll.BulkWrite(ctx, models[:n], options.BulkWrite().SetOrdered(true))
				m.s.statements.Release(int64(n))
				if err != nil {
					return err
				}
				models = models[n:]
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: committing %d changes to partition %d: %w", ErrUnavailable, len(writes), partition, err)
		}
		return nil
	})
}

// CountAfter counts a partition's documents and tombstones whose position
// is after the given one (the zero position: all of them): how much a
// catch-up or a full copy has to send.
func (m *mongoEngine) CountAfter(ctx context.Context, partition int, after Position) (int64, error) {
	filter := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fEpoch, Value: bson.D{{Key: "$gt", Value: int64(after.Epoch)}}}},
		bson.D{{Key: fEpoch, Value: int64(after.Epoch)}, {Key: fSeq, Value: bson.D{{Key: "$gt", Value: int64(after.Seq)}}}},
	}}}
	if after == (Position{}) {
		filter = bson.D{}
	}
	var n int64
	err := m.s.timed("count_after", func() error {
		var err error
		n, err = m.s.db.Collection(CollectionName(partition)).CountDocuments(ctx, filter)
		if err != nil {
			return fmt.Errorf("%w: counting partition %d: %v", ErrUnavailable, partition, err)
		}
		return nil
	})
	return n, err
}

// ScanAfter returns up to limit (0: all) documents and tombstones of a
// partition whose position is after the given one, in position order: the
// log a lagging replica is caught up from.
func (m *mongoEngine) ScanAfter(ctx context.Context, partition int, after Position, limit int) ([]*Doc, error) {
	filter := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: fEpoch, Value: bson.D{{Key: "$gt", Value: int64(after.Epoch)}}}},
		bson.D{{Key: fEpoch, Value: int64(after.Epoch)}, {Key: fSeq, Value: bson.D{{Key: "$gt", Value: int64(after.Seq)}}}},
	}}}
	opts := options.Find().SetSort(bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	docs, err := m.find(ctx, "scan_after", partition, filter, opts)
	if err != nil {
		return nil, err
	}
	// The embedded store's sort on two keys is checked here: catch-up
	// relies on position order.
	slices.SortFunc(docs, func(a, b *Doc) int { return a.Pos.Compare(b.Pos) })
	return docs, nil
}

// insertNew inserts documents that should be new here, in one unordered
// write; it returns the keys that were already stored (left untouched).
func (m *mongoEngine) InsertNew(ctx context.Context, partition int, docs []*Doc) (map[string]bool, error) {
	if err := m.ensureIndexes(ctx, partition); err != nil {
		return nil, err
	}
	if err := m.s.acquireWrite(ctx); err != nil {
		return nil, err
	}
	defer m.s.releaseWrite()
	recs := make([]any, len(docs))
	for i, d := range docs {
		recs[i] = docToBSON(d)
	}
	dups := map[string]bool{}
	err := m.s.timed("insert_new", func() error {
		_, err := m.s.db.Collection(CollectionName(partition)).InsertMany(ctx, recs, options.InsertMany().SetOrdered(false))
		if err == nil {
			return nil
		}
		var bwe mongo.BulkWriteException
		if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
			return fmt.Errorf("%w: inserting %d documents: %v", ErrUnavailable, len(docs), err)
		}
		for _, we := range bwe.WriteErrors {
			if we.Code != 11000 || we.Index < 0 || we.Index >= len(docs) {
				return fmt.Errorf("%w: inserting %d documents: %v", ErrUnavailable, len(docs), err)
			}
			dups[docs[we.Index].Key] = true
		}
		return nil
	})
	return dups, err
}

// remove deletes the records of keys from a partition (a replica dropping
// documents its master has no record of).
func (m *mongoEngine) Remove(ctx context.Context, partition int, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := m.s.acquireWrite(ctx); err != nil {
		return err
	}
	defer m.s.releaseWrite()
	return m.s.timed("remove", func() error {
		if _, err := m.s.db.Collection(CollectionName(partition)).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}}); err != nil {
			return fmt.Errorf("%w: removing %d documents: %v", ErrUnavailable, len(keys), err)
		}
		return nil
	})
}

// Tombstones reads up to limit (0: all) of a partition's tombstones
// (without bodies: they have none) last changed at or after from and
// before before (the zero time: unbounded), oldest first, through the
// tombstones index.
func (m *mongoEngine) Tombstones(ctx context.Context, partition int, from, before time.Time, limit int) ([]*Doc, error) {
	when := bson.D{}
	if !from.IsZero() {
		when = append(when, bson.E{Key: "$gte", Value: from.UnixMilli()})
	}
	if !before.IsZero() {
		when = append(when, bson.E{Key: "$lt", Value: before.UnixMilli()})
	}
	filter := bson.D{{Key: fDeleted, Value: true}}
	if len(when) > 0 {
		filter = append(filter, bson.E{Key: fUpdated, Value: when})
	}
	opts := options.Find().SetSort(bson.D{{Key: fDeleted, Value: 1}, {Key: fUpdated, Value: 1}}).
		SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1},
			{Key: fDeleted, Value: 1}, {Key: fUpdated, Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	return m.find(ctx, "tombstones", partition, filter, opts)
}

// PurgeTombstones deletes the given tombstones of the keys whose state
// they still are: a key written again since is kept. The keys' $in lets
// the server find them by _id; the $or keeps only the states read.
func (m *mongoEngine) PurgeTombstones(ctx context.Context, partition int, tombstones []*Doc) (int, error) {
	if len(tombstones) == 0 {
		return 0, nil
	}
	if err := m.s.acquireWrite(ctx); err != nil {
		return 0, err
	}
	defer m.s.releaseWrite()
	var n int64
	err := m.s.timed("purge", func() error {
		keys := make(bson.A, len(tombstones))
		states := make(bson.A, len(tombstones))
		for i, t := range tombstones {
			keys[i] = t.Key
			states[i] = bson.D{{Key: "_id", Value: t.Key}, {Key: fEpoch, Value: int64(t.Pos.Epoch)}, {Key: fSeq, Value: int64(t.Pos.Seq)}}
		}
		res, err := m.s.db.Collection(CollectionName(partition)).DeleteMany(ctx,
			bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}, {Key: fDeleted, Value: true}, {Key: "$or", Value: states}})
		if err != nil {
			return fmt.Errorf("%w: purging %d tombstones of partition %d: %v", ErrUnavailable, len(tombstones), partition, err)
		}
		n = res.DeletedCount
		return nil
	})
	return int(n), err
}

// ScanKeys returns up to limit (0: all) documents and tombstones of a
// partition whose key is after afterKey ("" = from the first), in key
// order: the chunks of a full copy.
func (m *mongoEngine) ScanKeys(ctx context.Context, partition int, afterKey string, limit int) ([]*Doc, error) {
	opts := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}})
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	return m.scanRange(ctx, "scan_keys", partition, afterKey, "", opts)
}

// keyRange returns the keys and positions of what a partition holds with
// a key in (after, upTo] ("" = unbounded).
func (m *mongoEngine) KeyRange(ctx context.Context, partition int, after, upTo string) ([]*Doc, error) {
	return m.scanRange(ctx, "key_range", partition, after, upTo,
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}}))
}

func (m *mongoEngine) scanRange(ctx context.Context, op string, partition int, after, upTo string, opts *options.FindOptionsBuilder) ([]*Doc, error) {
	bounds := bson.D{}
	if after != "" {
		bounds = append(bounds, bson.E{Key: "$gt", Value: after})
	}
	if upTo != "" {
		bounds = append(bounds, bson.E{Key: "$lte", Value: upTo})
	}
	filter := bson.D{}
	if len(bounds) > 0 {
		filter = bson.D{{Key: "_id", Value: bounds}}
	}
	docs, err := m.find(ctx, op, partition, filter, opts)
	if err != nil {
		return nil, err
	}
	// The embedded store's comparisons and sort are checked here: a full
	// copy relies on key order.
	docs = slices.DeleteFunc(docs, func(d *Doc) bool { return !inKeyRange(d.Key, after, upTo) })
	slices.SortFunc(docs, func(a, b *Doc) int { return compareKeys(a.Key, b.Key) })
	return docs, nil
}

// ensureIndexes creates partition's indexes, once per process: before its
// first write (commit, insertNew: the write creates the collection) and at
// start for a collection that exists (Writer.LoadAll). Creating an index
// that exists is a no-op, so a restart asks again and changes nothing.
func (m *mongoEngine) ensureIndexes(ctx context.Context, partition int) error {
	if _, done := m.s.indexed.Load(partition); done {
		return nil
	}
	if err := m.createIndexes(ctx, CollectionName(partition), partitionIndexes()); err != nil {
		return err
	}
	m.s.indexed.Store(partition, true)
	return nil
}

// createIndexes creates the indexes of one collection that it lacks (and
// the collection, if it does not exist yet), one at a time: FerretDB 1.24
// drops the connection when one createIndexes command names several
// indexes that all exist already.
func (m *mongoEngine) createIndexes(ctx context.Context, coll string, models []mongo.IndexModel) error {
	m.s.indexing.Lock()
	defer m.s.indexing.Unlock()
	return m.s.retryBusy(ctx, "create_indexes", -1, func(int) error { return m.createIndexesOnce(ctx, coll, models) })
}

func (m *mongoEngine) createIndexesOnce(ctx context.Context, coll string, models []mongo.IndexModel) error {
	return m.s.timed("create_indexes", func() error {
		have := map[string]bool{}
		var specs []struct {
			Name string `bson:"name"`
		}
		cur, err := m.s.db.Collection(coll).Indexes().List(ctx)
		if err == nil {
			err = cur.All(ctx, &specs)
		}
		// MongoDB answers NamespaceNotFound (26) for a collection that
		// does not exist yet; FerretDB lists nothing.
		if ce := (mongo.CommandError{}); err != nil && !(errors.As(err, &ce) && ce.Code == namespaceNotFound) {
			return fmt.Errorf("%w: listing the indexes of %s: %w", ErrUnavailable, coll, err)
		}
		for _, spec := range specs {
			have[spec.Name] = true
		}
		for _, model := range models {
			var o options.IndexOptions
			for _, set := range model.Options.List() {
				if err := set(&o); err != nil {
					return err
				}
			}
			if o.Name != nil && have[*o.Name] {
				continue
			}
			if _, err := m.s.db.Collection(coll).Indexes().CreateOne(ctx, model); err != nil {
				return fmt.Errorf("%w: creating the indexes of %s: %w", ErrUnavailable, coll, err)
			}
		}
		return nil
	})
}

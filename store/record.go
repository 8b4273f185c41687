package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shoal-db/shoal/record"
)

// Position is where a change sits in its partition's history. It lives in
// the leaf package record, so that decision code (lease) uses it without
// building the store; this alias keeps store.Position for every caller.
type Position = record.Position

// Doc is one stored document version, or the tombstone of a deleted one
// (record.Doc: the leaf package holds it, as it does Position).
type Doc = record.Doc

// The tenure marker and document keys are record's (record.TenureUser,
// record.DocKey); the store names them too.
const (
	TenureUser = record.TenureUser
	TenureColl = record.TenureColl
	TenureID   = record.TenureID
)

// IsTenureMarker reports whether user, coll and id name a tenure marker.
func IsTenureMarker(user, coll, id string) bool { return record.IsTenureMarker(user, coll, id) }

// DocKey builds the store _id of a document (record.DocKey).
func DocKey(user, coll, id string) string { return record.DocKey(user, coll, id) }

// CollectionName is the store collection holding one partition's documents.
func CollectionName(partition int) string { return fmt.Sprintf("p%04d", partition) }

// Field names of a stored document. Short, because every document carries them.
const (
	fUser    = "u"
	fColl    = "c"
	fID      = "d"
	fVersion = "v"
	fEpoch   = "e"
	fSeq     = "s"
	fDeleted = "x"
	fUpdated = "t"
	fBody    = "b"
)

// docToBSON is d as the store keeps it.
func docToBSON(d *Doc) bson.D {
	out := bson.D{
		{Key: "_id", Value: d.Key},
		{Key: fUser, Value: d.User},
		{Key: fColl, Value: d.Coll},
		{Key: fID, Value: d.ID},
		{Key: fVersion, Value: d.Version},
		{Key: fEpoch, Value: int64(d.Pos.Epoch)},
		{Key: fSeq, Value: int64(d.Pos.Seq)},
		{Key: fDeleted, Value: d.Deleted},
		{Key: fUpdated, Value: d.Updated.UnixMilli()},
	}
	if !d.Deleted {
		body := d.Body
		if body == nil {
			body = map[string]any{}
		}
		out = append(out, bson.E{Key: fBody, Value: body})
	}
	return out
}

func docFromRaw(raw bson.Raw) (*Doc, error) {
	d := &Doc{Size: len(raw)}
	elems, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	for _, e := range elems {
		v := e.Value()
		switch e.Key() {
		case "_id":
			d.Key, _ = v.StringValueOK()
		case fUser:
			d.User, _ = v.StringValueOK()
		case fColl:
			d.Coll, _ = v.StringValueOK()
		case fID:
			d.ID, _ = v.StringValueOK()
		case fVersion:
			d.Version = rawInt(v)
		case fEpoch:
			d.Pos.Epoch = uint64(rawInt(v))
		case fSeq:
			d.Pos.Seq = uint64(rawInt(v))
		case fDeleted:
			d.Deleted, _ = v.BooleanOK()
		case fUpdated:
			d.Updated = time.UnixMilli(rawInt(v)).UTC()
		case fBody:
			doc, ok := v.DocumentOK()
			if !ok {
				return nil, fmt.Errorf("document %s: body is %s, not a document", d.Key, v.Type)
			}
			body, err := rawToMap(doc)
			if err != nil {
				return nil, fmt.Errorf("document %s: %w", d.Key, err)
			}
			d.Body = body
		}
	}
	if d.Key == "" {
		return nil, errors.New("stored document without _id")
	}
	if d.Body == nil && !d.Deleted {
		d.Body = map[string]any{}
	}
	return d, nil
}

func rawInt(v bson.RawValue) int64 {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32())
	case bson.TypeInt64:
		return v.Int64()
	case bson.TypeDouble:
		return int64(v.Double())
	}
	return 0
}

// rawToMap converts a stored body into plain Go values: nil, bool, int64,
// float64, string, []any and map[string]any.
func rawToMap(raw bson.Raw) (map[string]any, error) {
	elems, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, len(elems))
	for _, e := range elems {
		v, err := rawToValue(e.Value())
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", e.Key(), err)
		}
		m[e.Key()] = v
	}
	return m, nil
}

func rawToValue(v bson.RawValue) (any, error) {
	switch v.Type {
	case bson.TypeNull, bson.TypeUndefined:
		return nil, nil
	case bson.TypeBoolean:
		return v.Boolean(), nil
	case bson.TypeInt32:
		return int64(v.Int32()), nil
	case bson.TypeInt64:
		return v.Int64(), nil
	case bson.TypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, nil
		}
		return f, nil
	case bson.TypeString:
		return v.StringValue(), nil
	case bson.TypeEmbeddedDocument:
		return rawToMap(v.Document())
	case bson.TypeArray:
		vals, err := v.Array().Values()
		if err != nil {
			return nil, err
		}
		out := make([]any, len(vals))
		for i, ev := range vals {
			if out[i], err = rawToValue(ev); err != nil {
				return nil, err
			}
		}
		return out, nil
	case bson.TypeDateTime:
		return v.Time().UTC().Format(time.RFC3339Nano), nil
	case bson.TypeObjectID:
		return v.ObjectID().Hex(), nil
	}
	// Shoal only writes JSON types; anything else was written by someone
	// else. Show it as text rather than fail the read.
	return v.String(), nil
}

// Get reads one document (or tombstone) by key. It returns ErrNotFound when
// the store has no record of it.
func (s *Store) Get(ctx context.Context, partition int, key string) (*Doc, error) {
	var d *Doc
	err := s.timed("get", func() error {
		raw, err := s.db.Collection(CollectionName(partition)).FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Raw()
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

// ErrNotFound means the store holds no record of the key (record.ErrNotFound).
var ErrNotFound = record.ErrNotFound

// Scan returns the live documents of one collection of a user.
func (s *Store) Scan(ctx context.Context, partition int, user, coll string) ([]*Doc, error) {
	return s.find(ctx, "scan", partition, bson.D{{Key: fUser, Value: user}, {Key: fColl, Value: coll}, {Key: fDeleted, Value: false}}, nil)
}

// ScanUser returns the live documents of every collection of a user.
func (s *Store) ScanUser(ctx context.Context, partition int, user string) ([]*Doc, error) {
	return s.find(ctx, "scan_user", partition, bson.D{{Key: fUser, Value: user}, {Key: fDeleted, Value: false}}, nil)
}

// ScanEach reads documents in batches of about scanBatchBytes, so that
// neither the store nor this side holds more than a few of them at once
// however large they are, and small documents still come many at a time.
// The first batch is of scanFirstBatch documents; the next ones are sized
// by the average document read so far.
const (
	scanBatchBytes = 4 << 20
	scanFirstBatch = 8
)

// batchFor is how many documents averaging avg bytes make a batch of about
// target bytes, from 4 to 1024.
func batchFor(avg, target int64) int32 {
	return int32(min(max(target/max(avg, 1), 4), 1024))
}

// ScanEach calls fn with each live document of one collection of a user, in
// no particular order, as it reads them, so that the caller holds only the
// documents it keeps. It stops at the first error fn returns and returns
// it. The duration observed for its operation (scan_each) includes fn's.
func (s *Store) ScanEach(ctx context.Context, partition int, user, coll string, fn func(*Doc) error) error {
	return s.each(ctx, "scan_each", partition, bson.D{{Key: fUser, Value: user}, {Key: fColl, Value: coll}, {Key: fDeleted, Value: false}},
		options.Find().SetBatchSize(scanFirstBatch), scanBatchBytes, fn)
}

func (s *Store) find(ctx context.Context, op string, partition int, filter bson.D, opts *options.FindOptionsBuilder) ([]*Doc, error) {
	var out []*Doc
	err := s.each(ctx, op, partition, filter, opts, 0, func(d *Doc) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// each calls fn with every document filter selects. An error of fn ends
// the scan and is returned as it is (and not observed as the store's).
// batchBytes, when positive, sizes the batches after the first (see
// ScanEach); 0 leaves them to the store.
func (s *Store) each(ctx context.Context, op string, partition int, filter bson.D, opts *options.FindOptionsBuilder, batchBytes int64, fn func(*Doc) error) error {
	var fnErr error
	err := s.timed(op, func() error {
		var o []options.Lister[options.FindOptions]
		if opts != nil {
			o = append(o, opts)
		}
		cur, err := s.db.Collection(CollectionName(partition)).Find(ctx, filter, o...)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer cur.Close(ctx)
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

// CollectionCount is one collection of a user and its live documents.
type CollectionCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Collections lists a user's collections with their live document counts,
// sorted by name.
func (s *Store) Collections(ctx context.Context, partition int, user string) ([]CollectionCount, error) {
	out := []CollectionCount{}
	err := s.timed("collections", func() error {
		cur, err := s.db.Collection(CollectionName(partition)).Aggregate(ctx, mongo.Pipeline{
			{{Key: "$match", Value: bson.D{{Key: fUser, Value: user}, {Key: fDeleted, Value: false}}}},
			{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$" + fColl}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
			{{Key: "$sort", Value: bson.D{{Key: "_id", Value: 1}}}},
		})
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		defer cur.Close(ctx)
		for cur.Next(ctx) {
			name, _ := cur.Current.Lookup("_id").StringValueOK()
			out = append(out, CollectionCount{Name: name, Count: rawInt(cur.Current.Lookup("n"))})
		}
		return cur.Err()
	})
	return out, err
}

// LastPosition returns the newest position stored in a partition (zero if
// it is empty). The documents are the log, so this is where the partition's
// history ends.
func (s *Store) LastPosition(ctx context.Context, partition int) (Position, error) {
	docs, err := s.find(ctx, "last_position", partition, bson.D{},
		options.Find().SetSort(bson.D{{Key: fEpoch, Value: -1}, {Key: fSeq, Value: -1}}).SetLimit(1).
			SetProjection(bson.D{{Key: fEpoch, Value: 1}, {Key: fSeq, Value: 1}, {Key: fDeleted, Value: 1}}))
	if err != nil || len(docs) == 0 {
		return Position{}, err
	}
	return docs[0].Pos, nil
}

// write is one document state to commit. Insert is true when the store is
// known to hold no record of the key (an insert is cheaper than a replace).
type write struct {
	doc    *Doc
	insert bool
}

// commit writes a batch of document states in one ordered bulk write,
// retrying while the store is busy. Retries turn inserts into upserts, so a
// batch that was partly applied before a failure is applied exactly once.
func (s *Store) commit(ctx context.Context, partition int, writes []write) error {
	if err := s.ensureIndexes(ctx, partition); err != nil {
		return err
	}
	if err := s.acquireWrite(ctx); err != nil {
		return err
	}
	defer s.releaseWrite()
	coll := s.db.Collection(CollectionName(partition))
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		models := make([]mongo.WriteModel, len(writes))
		for i, w := range writes {
			rec := docToBSON(w.doc)
			if w.insert && attempt == 0 {
				models[i] = mongo.NewInsertOneModel().SetDocument(rec)
			} else {
				models[i] = mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "_id", Value: w.doc.Key}}).SetReplacement(rec).SetUpsert(true)
			}
		}
		err := s.timed("commit", func() error {
			_, err := coll.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(true))
			return err
		})
		if err == nil {
			return nil
		}
		if !transient(err) || attempt >= 8 {
			return fmt.Errorf("%w: committing %d changes to partition %d: %v", ErrUnavailable, len(writes), partition, err)
		}
		s.log.Warn("store busy, retrying commit", "partition", partition, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(backoff*2, time.Second)
	}
}

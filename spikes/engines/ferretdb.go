package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shoal-db/shoal/store"
)

// ferretEngine is today's embedded store, FerretDB 1.24 on SQLite, opened
// through Shoal's own store package (store.Open, synchronous FULL: the
// default STORE_SYNC). Reads go through the store's own methods (Get,
// ScanKeys, ScanAfter, LastPosition); writes are the bulk write the store's
// commit sends (ReplaceOne upserts by _id, ordered, one per partition
// collection), sent through store.Database() because commit is not
// exported. FerretDB has no transactions: a commit across partitions is
// one bulk write per partition, one after the other, as Shoal does today.
type ferretEngine struct {
	s *store.Store
}

func openFerret(ctx context.Context, dir string) (*ferretEngine, error) {
	s, err := store.Open(ctx, store.Options{
		Database: "shoal",
		DataDir:  dir,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, err
	}
	return &ferretEngine{s: s}, nil
}

func (e *ferretEngine) name() string { return "ferretdb" }

// ferretBSON is d in the shape the store writes (store.Doc's toBSON: the
// same field names).
func ferretBSON(d doc) (bson.D, error) {
	out := bson.D{
		{Key: "_id", Value: d.key},
		{Key: "u", Value: ""}, {Key: "c", Value: ""}, {Key: "d", Value: ""},
		{Key: "v", Value: d.version},
		{Key: "e", Value: int64(d.pos.epoch)},
		{Key: "s", Value: int64(d.pos.seq)},
		{Key: "x", Value: d.deleted},
		{Key: "t", Value: d.updated},
	}
	// The key is user/collection/id; none of the three holds a '/'.
	parts := splitKey(d.key)
	out[1].Value, out[2].Value, out[3].Value = parts[0], parts[1], parts[2]
	if !d.deleted {
		var body bson.D
		if err := bson.UnmarshalExtJSON(d.body, false, &body); err != nil {
			return nil, fmt.Errorf("body of %s: %w", d.key, err)
		}
		out = append(out, bson.E{Key: "b", Value: body})
	}
	return out, nil
}

func splitKey(k string) [3]string {
	var out [3]string
	i := 0
	start := 0
	for j := 0; j < len(k) && i < 2; j++ {
		if k[j] == '/' {
			out[i] = k[start:j]
			i, start = i+1, j+1
		}
	}
	out[i] = k[start:]
	return out
}

func (e *ferretEngine) load(docs []doc) error {
	ctx := context.Background()
	byPart := map[int][]any{}
	for _, d := range docs {
		b, err := ferretBSON(d)
		if err != nil {
			return err
		}
		byPart[d.part] = append(byPart[d.part], b)
	}
	for part, recs := range byPart {
		coll := e.s.Database().Collection(store.CollectionName(part))
		for i := 0; i < len(recs); i += 500 {
			if _, err := coll.InsertMany(ctx, recs[i:min(i+500, len(recs))]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *ferretEngine) commit(docs []doc) error {
	ctx := context.Background()
	var order []int
	models := map[int][]mongo.WriteModel{}
	for _, d := range docs {
		b, err := ferretBSON(d)
		if err != nil {
			return err
		}
		if _, ok := models[d.part]; !ok {
			order = append(order, d.part)
		}
		models[d.part] = append(models[d.part], mongo.NewReplaceOneModel().
			SetFilter(bson.D{{Key: "_id", Value: d.key}}).SetReplacement(b).SetUpsert(true))
	}
	for _, part := range order {
		if _, err := e.s.Database().Collection(store.CollectionName(part)).
			BulkWrite(ctx, models[part], options.BulkWrite().SetOrdered(true)); err != nil {
			return err
		}
	}
	return nil
}

func fromStore(part int, d *store.Doc) (doc, error) {
	out := doc{part: part, key: d.Key, version: d.Version, pos: pos{d.Pos.Epoch, d.Pos.Seq},
		deleted: d.Deleted, updated: d.Updated.UnixMilli()}
	// The body stays the map the store decoded (its BSON decoding is in
	// the figure); the native engines return their JSON bytes undecoded.
	return out, nil
}

func fromStoreAll(part int, ds []*store.Doc) ([]doc, error) {
	out := make([]doc, 0, len(ds))
	for _, d := range ds {
		x, err := fromStore(part, d)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func (e *ferretEngine) get(part int, key string) (doc, bool, error) {
	d, err := e.s.Get(context.Background(), part, key)
	if err == store.ErrNotFound {
		return doc{}, false, nil
	}
	if err != nil {
		return doc{}, false, err
	}
	x, err := fromStore(part, d)
	return x, err == nil, err
}

func (e *ferretEngine) keyRange(part int, afterKey string, n int) ([]doc, error) {
	ds, err := e.s.ScanKeys(context.Background(), part, afterKey, n)
	if err != nil {
		return nil, err
	}
	return fromStoreAll(part, ds)
}

func (e *ferretEngine) scanAfter(part int, after pos, n int) ([]doc, error) {
	ds, err := e.s.ScanAfter(context.Background(), part, store.Position{Epoch: after.epoch, Seq: after.seq}, n)
	if err != nil {
		return nil, err
	}
	return fromStoreAll(part, ds)
}

func (e *ferretEngine) last(part int) (pos, error) {
	p, err := e.s.LastPosition(context.Background(), part)
	return pos{p.Epoch, p.Seq}, err
}

func (e *ferretEngine) close() error { return e.s.Close(context.Background()) }

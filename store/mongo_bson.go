package store

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// How the mongo engine keeps a document state as BSON, and reads it back
// as the plain values documents hold.

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

func toD(v any) bson.D {
	raw, err := bson.Marshal(v)
	if err != nil {
		panic(err)
	}
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		panic(err)
	}
	return d
}

// normalizeBSON turns nested bson.D/bson.M and int32 from decoding into the
// plain values documents hold.
func normalizeBSON(m map[string]any) map[string]any {
	raw, err := bson.Marshal(m)
	if err != nil {
		return m
	}
	out, err := rawToMap(raw)
	if err != nil {
		return m
	}
	return out
}

// onlyDuplicates reports whether every error of a bulk insert is a
// duplicate key.
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return false
		}
	}
	return true
}

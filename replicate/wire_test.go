package replicate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// Bodies cross the wire as JSON; integers must come back as exact int64s
// (not float64) and everything else unchanged.
func TestWireRoundTripKeepsValuesExact(t *testing.T) {
	body := map[string]any{
		"big":   int64(9007199254740993), // not representable as float64
		"neg":   int64(-7),
		"f":     1.5,
		"s":     "x",
		"b":     true,
		"null":  nil,
		"arr":   []any{int64(1), 2.25, "y", []any{int64(3)}},
		"inner": map[string]any{"n": int64(42)},
	}
	in := store.Batch{Partition: 3, Epoch: 2, From: store.Position{Epoch: 1, Seq: 9}, UpTo: store.Position{Epoch: 2, Seq: 11},
		EpochStart: store.Position{Epoch: 1, Seq: 9}, Committed: store.Position{Epoch: 2, Seq: 10},
		Epochs: []store.EpochStart{{Epoch: 1, Start: store.Position{Seq: 3}}, {Epoch: 2, Start: store.Position{Epoch: 1, Seq: 9}}},
		Docs: []*store.Doc{
			{Key: store.DocKey("u", "c", "a"), User: "u", Coll: "c", ID: "a", Version: 4, Pos: store.Position{Epoch: 2, Seq: 10},
				Updated: time.Unix(5, 0).UTC(), Body: body},
			{Key: store.DocKey("u", "c", "b"), User: "u", Coll: "c", ID: "b", Version: 2, Pos: store.Position{Epoch: 2, Seq: 11},
				Updated: time.Unix(6, 0).UTC(), Deleted: true},
		}}
	data, err := json.Marshal(Request{Batches: []WireBatch{ToWire(in)}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := FromWire(req.Batches[0])
	if out.Partition != in.Partition || out.Epoch != in.Epoch || out.From != in.From || out.UpTo != in.UpTo || len(out.Docs) != 2 ||
		out.EpochStart != in.EpochStart || !reflect.DeepEqual(out.Epochs, in.Epochs) || out.Committed != in.Committed {
		t.Fatalf("batch header changed: %+v", out)
	}
	for i := range in.Docs {
		a, b := in.Docs[i], out.Docs[i]
		if a.Key != b.Key || a.Version != b.Version || a.Pos != b.Pos || a.Deleted != b.Deleted || !a.Updated.Equal(b.Updated) {
			t.Fatalf("document %d changed: %+v -> %+v", i, a, b)
		}
		if !reflect.DeepEqual(a.Body, b.Body) {
			t.Fatalf("body changed:\n%#v\n%#v", a.Body, b.Body)
		}
	}
}

func TestDecodeRequestRefusesGarbage(t *testing.T) {
	if _, err := DecodeRequest(bytes.NewReader([]byte(`{"batches":[{"p":"x"}]}`))); err == nil {
		t.Fatal("accepted a malformed request")
	}
}

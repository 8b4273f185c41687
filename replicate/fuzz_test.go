package replicate

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// FuzzDecodeValid feeds arbitrary bodies to the replica's decoder and
// validation: nothing panics, a refusal is ErrInvalid or a JSON error, and
// an accepted request keeps every invariant Apply relies on, converts
// with FromWire, and is accepted again once re-encoded.
func FuzzDecodeValid(f *testing.F) {
	for _, s := range []string{
		`{"batches":[{"p":99999,"e":1}]}`,
		`{"batches":[{"p":-1,"e":1}]}`,
		`{"batches":[{"p":0,"e":1}]}`,
		`{"batches":[]}`,
		`{"batches":[{"p":3,"e":2,"start":{"epoch":1,"seq":9},"epochs":[{"e":1,"s":{"epoch":0,"seq":3}}],"from":{"epoch":1,"seq":9},"upto":{"epoch":2,"seq":11},` +
			`"docs":[{"u":"u1","c":"c","d":"a","v":4,"pos":{"epoch":2,"seq":10},"t":"2026-01-01T00:00:00Z","b":{"n":9007199254740993,"f":1.5,"a":[1,{"x":null}]}},` +
			`{"u":"u1","c":"c","d":"b","v":2,"pos":{"epoch":2,"seq":11},"x":true,"t":"2026-01-01T00:00:00Z"}]}]}`,
		`{"batches":[{"p":1,"e":3,"restore":true,"absent":["u1/c/a","u2/c/b"]}]}`,
		`{"batches":[{"p":2,"e":3,"from":{"epoch":3,"seq":7},"upto":{"epoch":3,"seq":7},"commit":{"epoch":3,"seq":7}}]}`,
		`{"batches":[{"p":2,"e":3,"commit":{"epoch":4,"seq":1}}]}`,
		`{"batches":[{"p":2,"e":3,"commit":{"epoch":-1,"seq":1}}]}`,
		`{"batches":[{"p":1,"e":3,"full":true,"kfrom":"u1/c/a","kto":"","horizon":{"epoch":2,"seq":1}}]}`,
		`{"batches":[{"p":1,"e":3,"full":true,"restore":true}]}`,
		`{"batches":[{"p":0,"e":1,"docs":[{"u":"../x","c":"c","d":"d","v":1}]}]}`,
		`{"batches":[{"p":"x"}]}`,
		`{"batches":[{"p":0,"e":1}]} trailing`,
		`null`,
		`[]`,
	} {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		partitions := int(n%64) + 1
		req, err := DecodeValid(bytes.NewReader(data), partitions)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("refusal without a reason: %#v", err)
			}
			return
		}
		checkInvariants(t, req, partitions)
		for _, b := range req.Batches {
			FromWire(b)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("an accepted request does not encode: %v", err)
		}
		if _, err := DecodeValid(bytes.NewReader(again), partitions); err != nil {
			t.Fatalf("an accepted request is refused once re-encoded: %v\n%s", err, again)
		}
	})
}

// checkInvariants restates Validate's promises independently.
func checkInvariants(t *testing.T, req Request, partitions int) {
	t.Helper()
	keys := 0
	for i, b := range req.Batches {
		if b.Partition < 0 || b.Partition >= partitions || b.Epoch == 0 || (b.Restore && b.Full) || len(b.Epochs) > MaxChain {
			t.Fatalf("batch %d accepted: p %d of %d, epoch %d, restore %v, full %v, chain %d", i, b.Partition, partitions, b.Epoch, b.Restore, b.Full, len(b.Epochs))
		}
		if !b.Full && (b.KeyFrom != "" || b.KeyTo != "") {
			t.Fatalf("batch %d accepted with a key range outside a full copy", i)
		}
		if b.Committed.Epoch > b.Epoch {
			t.Fatalf("batch %d of epoch %d accepted with the committed position %s", i, b.Epoch, b.Committed)
		}
		keys += len(b.Docs) + len(b.Absent)
		for _, d := range b.Docs {
			if doc.ValidUser(d.User) != nil || doc.ValidCollection(d.Coll) != nil || doc.ValidID(d.ID) != nil ||
				shard.PartitionOf(d.User, partitions) != b.Partition || d.Version < 1 || d.Pos.Epoch > b.Epoch {
				t.Fatalf("batch %d accepted document %+v", i, d)
			}
		}
		for _, k := range append(append([]string(nil), b.Absent...), b.KeyFrom, b.KeyTo) {
			if k == "" && !slices.Contains(b.Absent, k) {
				continue
			}
			parts := strings.SplitN(k, "/", 3)
			if len(parts) != 3 || store.DocKey(parts[0], parts[1], parts[2]) != k || shard.PartitionOf(parts[0], partitions) != b.Partition {
				t.Fatalf("batch %d accepted key %q", i, k)
			}
		}
	}
	if len(req.Batches) > MaxRequestBatches || keys > MaxRequestKeys {
		t.Fatalf("accepted %d batches and %d keys", len(req.Batches), keys)
	}
}

package replicate

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/shoal-db/shoal/record"
)

// wireSample is a request with every field of a batch and a document set,
// and one of each kind of batch.
func wireSample() Request {
	body := map[string]any{
		"big": int64(9007199254740993), "neg": int64(-7), "f": 1.5, "s": "x", "b": true, "null": nil,
		"arr": []any{int64(1), 2.25, "y", []any{int64(3)}}, "inner": map[string]any{"n": int64(42)}, "empty": map[string]any{},
	}
	at := time.Date(2026, 12, 6, 4, 5, 6, 789012345, time.UTC)
	return Request{Batches: []WireBatch{
		{Partition: 3, Epoch: 2, EpochStart: record.Position{Epoch: 1, Seq: 9},
			Epochs: []record.EpochStart{{Epoch: 1, Start: record.Position{Seq: 3}}, {Epoch: 2, Start: record.Position{Epoch: 1, Seq: 9}}},
			From:   record.Position{Epoch: 1, Seq: 9}, UpTo: record.Position{Epoch: 2, Seq: 11}, Committed: record.Position{Epoch: 2, Seq: 10},
			Docs: []WireDoc{
				{User: "u", Coll: "c", ID: "a", Version: 4, Pos: record.Position{Epoch: 2, Seq: 10}, Updated: at, Body: body},
				{User: "u", Coll: "c", ID: "b", Version: 2, Pos: record.Position{Epoch: 2, Seq: 11}, Updated: at.Add(time.Second), Deleted: true},
				{User: "u", Coll: "c", ID: "e", Version: 1, Pos: record.Position{Epoch: 2, Seq: 11}, Updated: time.Time{}, Body: map[string]any{}, New: true},
			}},
		{Partition: 1, Epoch: 3, Restore: true, Absent: []string{"u1/c/a", "u2/c/b"}},
		{Partition: 70000, Epoch: 1 << 40, Full: true, KeyFrom: "u1/c/a", KeyTo: "u1/c/z", Horizon: record.Position{Epoch: 2, Seq: 1 << 50}},
	}}
}

// The binary form reads back exactly what was written: every field,
// integers as int64, a body's empty object as an empty object, a deleted
// document without a body as one, times to the nanosecond in UTC.
func TestTheBinaryFormReadsBackWhatWasWritten(t *testing.T) {
	in := wireSample()
	enc, err := AppendRequest(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ReadRequest(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("read back\n %#v\nwant\n %#v", out, in)
	}
	for i := range enc {
		if _, err := ReadRequest(enc[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a request cut to %d of %d bytes: %v, want ErrMalformed", i, len(enc), err)
		}
	}
	if _, err := ReadRequest(append(enc, 0)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a request with a byte after its end: %v", err)
	}
	if _, err := AppendRequest(nil, Request{Batches: []WireBatch{{Docs: []WireDoc{{Body: map[string]any{"x": struct{}{}}}}}}}); err == nil {
		t.Fatal("a body value no document holds was encoded")
	}

	resp := Response{Results: []Result{
		{Partition: 3, Applied: record.Position{Epoch: 2, Seq: 11}, Epoch: 2, Code: CodeOK},
		{Partition: 1, Epoch: 5, Code: CodeDiverged, Diverged: []string{"u1/c/a"}},
		{Partition: 9, Code: CodeError, Error: "disk full"},
	}}
	renc := AppendResponse(nil, resp)
	rout, err := ReadResponse(renc)
	if err != nil || !reflect.DeepEqual(rout, resp) {
		t.Fatalf("response read back as %#v (%v)", rout, err)
	}
	for i := range renc {
		if _, err := ReadResponse(renc[:i]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a response cut to %d of %d bytes: %v", i, len(renc), err)
		}
	}
}

// The two forms carry the same request: what a replica applies does not
// depend on which one its master sent (bodies aside, whose JSON leaves an
// empty body out: the binary form keeps it).
func TestBothFormsCarryTheSameRequest(t *testing.T) {
	in := wireSample()
	for i := range in.Batches {
		for j := range in.Batches[i].Docs {
			d := &in.Batches[i].Docs[j]
			if len(d.Body) == 0 {
				d.Body = nil
			}
			d.New = false // not in the JSON form, for older nodes
		}
	}
	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := DecodeRequest(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := AppendRequest(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	fromBinary, err := ReadRequest(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromBinary, fromJSON) {
		t.Fatalf("binary\n %#v\nJSON\n %#v", fromBinary, fromJSON)
	}
	if len(bin) >= len(js) {
		t.Errorf("the binary form takes %d bytes, JSON %d", len(bin), len(js))
	}
}

// A reader allocates for no list longer than what a replica accepts or
// than the bytes that follow could hold, and refuses what no writer makes.
func TestTheBinaryReaderRefusesWhatNoWriterMakes(t *testing.T) {
	huge := binary.AppendUvarint([]byte{BinaryVersion}, 1<<40)
	tooMany := binary.AppendUvarint([]byte{BinaryVersion}, MaxRequestBatches+1)
	tooMany = append(tooMany, make([]byte, MaxRequestBatches+1)...)
	badFlags, _ := AppendRequest(nil, Request{Batches: []WireBatch{{Partition: 1, Epoch: 1}}})
	badFlags[1+1+1+1+2+1+2+2] = 0x80 // version, count, partition, epoch, start, chain, from, upto: the flags
	for name, b := range map[string][]byte{
		"empty":                   nil,
		"another version":         {1, 0},
		"JSON":                    []byte(`{"batches":[]}`),
		"a count past the end":    huge,
		"more batches than taken": tooMany,
		"unknown flags":           badFlags,
	} {
		if _, err := ReadRequest(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	// An older master's request (version 2) is read; a document of it
	// cannot be New.
	// (Version 2 is version 3 without New.)
	asOlder := func(r Request) []byte {
		b, err := AppendRequest(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		b[0] = olderVersion
		return b
	}
	one := Request{Batches: []WireBatch{{Partition: 1, Epoch: 1, UpTo: record.Position{Epoch: 1, Seq: 1},
		Docs: []WireDoc{{User: "u", Coll: "c", ID: "a", Version: 1, Pos: record.Position{Epoch: 1, Seq: 1}, Body: map[string]any{}}}}}}
	if req, err := ReadRequest(asOlder(one)); err != nil || len(req.Batches) != 1 || len(req.Batches[0].Docs) != 1 {
		t.Fatalf("a request of version 2: %+v, %v", req, err)
	}
	one.Batches[0].Docs[0].New = true
	if _, err := ReadRequest(asOlder(one)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a request of version 2 with a New document: %v, want ErrMalformed", err)
	}
	if req, err := ReadRequest([]byte{BinaryVersion, 0}); err != nil || len(req.Batches) != 0 {
		t.Fatalf("an empty request: %+v, %v", req, err)
	}
}

// FuzzReadRequest: no input makes the binary reader panic; what it
// accepts encodes again to the same bytes, and what Validate accepts of it
// keeps every invariant Apply relies on.
func FuzzReadRequest(f *testing.F) {
	enc, _ := AppendRequest(nil, wireSample())
	f.Add(enc, uint8(4))
	f.Add([]byte{BinaryVersion, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		req, err := ReadRequest(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("refused with %v, want ErrMalformed", err)
			}
			return
		}
		again, err := AppendRequest(nil, req)
		if err != nil {
			t.Fatalf("a request read does not encode: %v", err)
		}
		// Compared as bytes: a body may hold a NaN, which equals nothing.
		back, err := ReadRequest(again)
		if err != nil {
			t.Fatalf("a request read and encoded again is refused: %v", err)
		}
		if third, _ := AppendRequest(nil, back); !bytes.Equal(third, again) {
			t.Fatal("a request read encodes to what reads back otherwise")
		}
		partitions := int(n%64) + 1
		if req.Validate(partitions) == nil {
			checkInvariants(t, req, partitions)
		}
	})
}

// FuzzReadResponse: no answer makes the sender's reader panic.
func FuzzReadResponse(f *testing.F) {
	f.Add(AppendResponse(nil, Response{Results: []Result{{Partition: 1, Code: CodeDiverged, Diverged: []string{"a/b/c"}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := ReadResponse(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("refused with %v, want ErrMalformed", err)
			}
			return
		}
		if back, err := ReadResponse(AppendResponse(nil, resp)); err != nil || !reflect.DeepEqual(back, resp) {
			t.Fatalf("a response read encodes to what reads back otherwise (%v)", err)
		}
	})
}

// A replica rolls back every change its master never had and names them
// all in its answer: more than a request may carry is read too (a limit
// there left such a partition failing on that replica for good, found by
// a review).
func TestAnAnswerNamesAnyNumberOfDivergedDocuments(t *testing.T) {
	keys := make([]string, MaxRequestKeys+1)
	for i := range keys {
		keys[i] = "u/c/d" + strconv.Itoa(i)
	}
	resp := Response{Results: []Result{{Partition: 1, Epoch: 2, Code: CodeDiverged, Diverged: keys}}}
	got, err := ReadResponse(AppendResponse(nil, resp))
	if err != nil || len(got.Results) != 1 || len(got.Results[0].Diverged) != len(keys) {
		t.Fatalf("an answer naming %d diverged documents: %v", len(keys), err)
	}
}

package replicate

import (
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/shoal-db/shoal/record"
)

// Request is what a sender ships to one replica in one call: runs of
// history of any number of partitions.
type Request struct {
	Batches []WireBatch `json:"batches"`
}

// WireBatch is a record.Batch on the wire.
type WireBatch struct {
	Partition  int                 `json:"p"`
	Epoch      uint64              `json:"e"`
	EpochStart record.Position     `json:"start"`
	Epochs     []record.EpochStart `json:"epochs,omitempty"` // the master's epoch chain
	From       record.Position     `json:"from"`
	UpTo       record.Position     `json:"upto"`
	Docs       []WireDoc           `json:"docs,omitempty"`
	Restore    bool                `json:"restore,omitempty"`
	Absent     []string            `json:"absent,omitempty"`
	Full       bool                `json:"full,omitempty"`
	KeyFrom    string              `json:"kfrom,omitempty"`
	KeyTo      string              `json:"kto,omitempty"`
	Horizon    record.Position     `json:"horizon,omitzero"`
	// Committed is the master's majority-committed position of the
	// partition when it sent the batch (see Shipper.MajorityHeld); a
	// batch with no documents from and up to the replica's acknowledged
	// position carries it alone.
	Committed record.Position `json:"commit,omitzero"`
}

// WireDoc is a document state on the wire.
type WireDoc struct {
	User    string          `json:"u"`
	Coll    string          `json:"c"`
	ID      string          `json:"d"`
	Version int64           `json:"v"`
	Pos     record.Position `json:"pos"`
	Deleted bool            `json:"x,omitempty"`
	Updated time.Time       `json:"t"`
	Body    map[string]any  `json:"b,omitempty"`
	// New is record.Doc.New. The JSON form, sent to older nodes only,
	// leaves it out: they would not know it.
	New bool `json:"-"`
}

// Response answers a Request: one result per batch, in order.
type Response struct {
	Results []Result `json:"results"`
}

// Code is the kind of a replica's answer for one batch, as it travels.
type Code string

const (
	// CodeOK: the batch was applied; the replica holds Applied.
	CodeOK Code = "ok"
	// CodeGap: the batch did not follow what the replica holds: catch it
	// up from Applied.
	CodeGap Code = "gap"
	// CodeFullCopy: the replica's copy cannot be repaired change by
	// change: send a full copy.
	CodeFullCopy Code = "full-copy"
	// CodeDiverged: the replica kept changes this master never had in its
	// rollback collection: restore Diverged, then catch up from Applied.
	CodeDiverged Code = "diverged"
	// CodeStaleEpoch: this master is behind; Epoch is the newest the
	// replica has seen.
	CodeStaleEpoch Code = "stale-epoch"
	// CodeIsMaster: the replica holds the partition's lease.
	CodeIsMaster Code = "is-master"
	// CodeError: the replica could not apply the batch (Error says why).
	CodeError Code = "error"
)

// Result is a replica's answer for one batch.
type Result struct {
	Partition int             `json:"p"`
	Applied   record.Position `json:"applied"`
	Epoch     uint64          `json:"epoch"`
	// Code is the answer's kind (see Code's values).
	Code     Code     `json:"code"`
	Error    string   `json:"error,omitempty"`
	Diverged []string `json:"diverged,omitempty"`
}

// ToWire converts a batch for sending.
func ToWire(b record.Batch) WireBatch {
	w := WireBatch{Partition: b.Partition, Epoch: b.Epoch, EpochStart: b.EpochStart, Epochs: b.Epochs, From: b.From, UpTo: b.UpTo,
		Docs: make([]WireDoc, len(b.Docs)), Restore: b.Restore, Absent: b.Absent,
		Full: b.Full, KeyFrom: b.KeyFrom, KeyTo: b.KeyTo, Horizon: b.Horizon, Committed: b.Committed}
	for i, d := range b.Docs {
		w.Docs[i] = WireDoc{User: d.User, Coll: d.Coll, ID: d.ID, Version: d.Version, Pos: d.Pos, Deleted: d.Deleted, Updated: d.Updated,
			Body: d.Body, New: d.New}
	}
	return w
}

// FromWire converts a received batch; body numbers arrive as float64 from
// JSON and are normalised by the caller's decoder (see api).
func FromWire(w WireBatch) record.Batch {
	b := record.Batch{Partition: w.Partition, Epoch: w.Epoch, EpochStart: w.EpochStart, Epochs: w.Epochs, From: w.From, UpTo: w.UpTo,
		Docs: make([]*record.Doc, len(w.Docs)), Restore: w.Restore, Absent: w.Absent,
		Full: w.Full, KeyFrom: w.KeyFrom, KeyTo: w.KeyTo, Horizon: w.Horizon, Committed: w.Committed}
	for i, d := range w.Docs {
		b.Docs[i] = &record.Doc{Key: record.DocKey(d.User, d.Coll, d.ID), User: d.User, Coll: d.Coll, ID: d.ID, Version: d.Version,
			Pos: d.Pos, Deleted: d.Deleted, Updated: d.Updated, Body: d.Body, Size: approxSize(d.Body), New: d.New}
	}
	return b
}

// DecodeRequest reads a request, keeping integers exact: document bodies
// hold int64 and float64 values, and JSON would turn every number into a
// float64.
func DecodeRequest(r io.Reader) (Request, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Request{}, err
	}
	for i := range req.Batches {
		for j := range req.Batches[i].Docs {
			if b := req.Batches[i].Docs[j].Body; b != nil {
				req.Batches[i].Docs[j].Body = normalize(b).(map[string]any)
			}
		}
	}
	return req, nil
}

// normalize turns json.Number values into int64 (when the literal is an
// integer that fits) or float64, as documents hold them.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}

// approxSize estimates a body's encoded size for the replica's cache budget.
func approxSize(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 8
		for k, e := range x {
			n += len(k) + 4 + approxSize(e)
		}
		return n
	case []any:
		n := 8
		for _, e := range x {
			n += approxSize(e)
		}
		return n
	case string:
		return len(x) + 4
	}
	return 8
}

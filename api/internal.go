package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/shoal-db/shoal/store"
)

// TypeInvalidInternal is the problem type of an internal (node-to-node)
// request that is signed but breaks the rules of its route.
const TypeInvalidInternal = "urn:shoal:problem:invalid-internal-request"

// errTrailing refuses data after a request's JSON value.
var errTrailing = errors.New("data after the JSON value")

// decodeOne decodes exactly one JSON value from r into v.
func decodeOne(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return err
	}
	// Only white space may follow (More would miss a stray "}" or "]").
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errTrailing
	}
	return nil
}

// decodeTakeOver reads a takeover request for a node with partitions
// partitions: the partition must exist. Any From is sane: it is compared
// with what this node holds, and a From beyond that is refused there.
func decodeTakeOver(r io.Reader, partitions int) (TakeOverRequest, error) {
	var req TakeOverRequest
	if err := decodeOne(r, &req); err != nil {
		return TakeOverRequest{}, fmt.Errorf("unreadable takeover request: %w", err)
	}
	if req.Partition < 0 || req.Partition >= partitions {
		return TakeOverRequest{}, fmt.Errorf("no partition %d (this node has %d)", req.Partition, partitions)
	}
	return req, nil
}

// decodeCheckCopy reads a copy-check request for a node with partitions
// partitions: the partition must exist.
func decodeCheckCopy(r io.Reader, partitions int) (CheckCopyRequest, error) {
	var req CheckCopyRequest
	if err := decodeOne(r, &req); err != nil {
		return CheckCopyRequest{}, fmt.Errorf("unreadable copy-check request: %w", err)
	}
	if req.Partition < 0 || req.Partition >= partitions {
		return CheckCopyRequest{}, fmt.Errorf("no partition %d (this node has %d)", req.Partition, partitions)
	}
	return req, nil
}

// decodePositions reads a positions request for a node with partitions
// partitions: each partition must exist, and a partition may be asked
// about only once.
func decodePositions(r io.Reader, partitions int) (PositionsRequest, error) {
	var req PositionsRequest
	if err := decodeOne(r, &req); err != nil {
		return PositionsRequest{}, fmt.Errorf("unreadable positions request: %w", err)
	}
	if len(req.Partitions) > partitions {
		return PositionsRequest{}, fmt.Errorf("%d partitions asked about; this node has %d", len(req.Partitions), partitions)
	}
	seen := make(map[int]bool, len(req.Partitions))
	for i, p := range req.Partitions {
		if p < 0 || p >= partitions {
			return PositionsRequest{}, fmt.Errorf("partition %d of the request: no partition %d (this node has %d)", i, p, partitions)
		}
		if seen[p] {
			return PositionsRequest{}, fmt.Errorf("partition %d of the request: partition %d asked about twice", i, p)
		}
		seen[p] = true
	}
	return req, nil
}

// decodeVoters reads a voter-set question: an empty JSON object (it has no
// fields), or no body at all.
func decodeVoters(r io.Reader) error {
	var req map[string]json.RawMessage
	err := decodeOne(r, &req)
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return fmt.Errorf("unreadable voter-set question: %w", err)
	case req == nil:
		return errors.New("the voter-set question must be a JSON object: {}")
	case len(req) > 0:
		return errors.New("the voter-set question has no fields: send {}")
	}
	return nil
}

// positionsAnswer is the answer of /internal/v1/positions.
type positionsAnswer = map[int]PositionAnswer

// PositionAnswer is how far a node holds one partition's history. Partial
// says its copy awaits a full copy (store.Writer.Recopying: a new store,
// or a copy that threw its history away), and the position is then zero:
// it may lack writes the node acknowledged, so it counts as no copy in a
// tenure's check (it is heard in a campaign, as the least current copy).
// The position's fields are at the top level, as before Partial, so a
// node of an earlier version reads the position and ignores the rest.
type PositionAnswer struct {
	store.Position
	Partial bool `json:"partial,omitempty"`
	// Incarnation, on a partial answer, is the answering process's
	// (cluster.NodeMeta.Incarnation) when its copy is new in that
	// process and has taken nothing (store.Writer.Untouched): it
	// acknowledged nothing of the partition (lease.NamedAtIncarnation).
	Incarnation int64 `json:"incarnation,omitempty"`
}

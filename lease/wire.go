package lease

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxNodeID is the longest node id a peer list accepts.
const maxNodeID = 64

// ErrInvalidBatch marks a lease batch that breaks the rules of the wire
// format.
var ErrInvalidBatch = errors.New("invalid lease batch")

// DecodeBatch reads a lease batch that the node from sent to a voter with
// partitions partitions, and checks it (see Batch.Validate).
func DecodeBatch(r io.Reader, partitions int, from string) (Batch, error) {
	var b Batch
	if err := json.NewDecoder(r).Decode(&b); err != nil {
		return Batch{}, err
	}
	if err := b.Validate(partitions, from); err != nil {
		return Batch{}, err
	}
	return b, nil
}

// Validate checks a batch the node from sent, for a voter with partitions
// partitions: every partition exists; every request and release is from's
// own (a node campaigns, renews and releases only for itself, see
// Holder.Propose and Holder.Release), at an epoch from 1; and each list
// holds at most two entries per partition (a node sends one per
// partition). Errors name entries by index, never by their values.
func (b Batch) Validate(partitions int, from string) error {
	if from == "" || len(from) > maxNodeID {
		return fmt.Errorf("%w: the sender's node id is empty or longer than %d bytes", ErrInvalidBatch, maxNodeID)
	}
	limit := 2 * max(partitions, 1)
	if len(b.Requests) > limit || len(b.Releases) > limit || len(b.Queries) > limit {
		return fmt.Errorf("%w: %d requests, %d releases and %d queries; at most %d of each", ErrInvalidBatch,
			len(b.Requests), len(b.Releases), len(b.Queries), limit)
	}
	inRange := func(p int) bool { return p >= 0 && p < partitions }
	for i, r := range b.Requests {
		switch {
		case !inRange(r.Partition):
			return fmt.Errorf("%w: request %d: no partition %d (this node has %d)", ErrInvalidBatch, i, r.Partition, partitions)
		case r.Candidate != from:
			return fmt.Errorf("%w: request %d: the candidate is not the sending node %q: a node campaigns only for itself", ErrInvalidBatch, i, from)
		case r.Epoch == 0:
			return fmt.Errorf("%w: request %d: epoch 0 (epochs start at 1)", ErrInvalidBatch, i)
		}
	}
	for i, r := range b.Releases {
		switch {
		case !inRange(r.Partition):
			return fmt.Errorf("%w: release %d: no partition %d (this node has %d)", ErrInvalidBatch, i, r.Partition, partitions)
		case r.Holder != from:
			return fmt.Errorf("%w: release %d: the holder is not the sending node %q: a node releases only its own lease", ErrInvalidBatch, i, from)
		case r.Epoch == 0:
			return fmt.Errorf("%w: release %d: epoch 0 (epochs start at 1)", ErrInvalidBatch, i)
		}
	}
	for i, p := range b.Queries {
		if !inRange(p) {
			return fmt.Errorf("%w: query %d: no partition %d (this node has %d)", ErrInvalidBatch, i, p, partitions)
		}
	}
	return nil
}

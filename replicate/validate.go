package replicate

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
)

// Bounds of one replication request, as a replica accepts it. A sender
// stays far below them: its requests hold at most MaxBatchDocs documents
// (default 500) in MaxBatchBytes (default 8 MiB), and every batch costs it
// wireBatchBase bytes of that budget, so at most some 7,000 batches.
const (
	MaxRequestBatches = 16384
	// MaxRequestKeys bounds the documents and absent keys of all the
	// batches of a request together.
	MaxRequestKeys = 65536
	// MaxChain bounds a batch's epoch chain (a master sends at most 8).
	MaxChain = 64
)

// ErrInvalid marks a request that breaks the rules of the wire format.
var ErrInvalid = errors.New("invalid replication request")

// DecodeValid reads a request (see DecodeRequest) and checks it (see
// Validate) for a node with partitions partitions.
func DecodeValid(r io.Reader, partitions int) (Request, error) {
	req, err := DecodeRequest(r)
	if err != nil {
		return Request{}, err
	}
	if err := req.Validate(partitions); err != nil {
		return Request{}, err
	}
	return req, nil
}

// Validate checks what a replica relies on before it touches any state,
// for a node with partitions partitions: every batch is of an existing
// partition (the partition indexes the writer's per-partition state) and
// of a master's epoch (epochs start at 1); it is a restore or a chunk of a
// full copy, not both, and only a full copy names a key range; its chain
// is bounded; its majority-committed position is no newer than its epoch
// (it is a position of the master's history); every document has a valid user, collection and id, belongs
// by its user to the batch's partition, has a version from 1 and a
// position no newer than the batch's epoch (a master's store holds only
// history up to its own epoch: it applies no batch while it holds the
// lease, and epochs only grow); every key named (absent keys, key range)
// is a document key of the partition. Errors name batches and documents by
// index, never by their (unbounded) values.
func (r Request) Validate(partitions int) error {
	if len(r.Batches) > MaxRequestBatches {
		return fmt.Errorf("%w: %d batches, more than %d", ErrInvalid, len(r.Batches), MaxRequestBatches)
	}
	keys := 0
	for i := range r.Batches {
		b := &r.Batches[i]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: batch %d: %s", ErrInvalid, i, fmt.Sprintf(format, args...))
		}
		if b.Partition < 0 || b.Partition >= partitions {
			return bad("no partition %d on this node (it has partitions 0 to %d): the nodes' PARTITION_COUNT differ", b.Partition, partitions-1)
		}
		if b.Epoch == 0 {
			return bad("epoch 0: a master's epoch starts at 1")
		}
		if b.Restore && b.Full {
			return bad("both a restore and a full-copy chunk")
		}
		if !b.Full && (b.KeyFrom != "" || b.KeyTo != "") {
			return bad("a key range outside a full copy")
		}
		if b.Committed.Epoch > b.Epoch {
			return bad("committed position %s is of a later epoch than the batch's %d", b.Committed, b.Epoch)
		}
		if len(b.Epochs) > MaxChain {
			return bad("an epoch chain of %d entries, more than %d", len(b.Epochs), MaxChain)
		}
		keys += len(b.Docs) + len(b.Absent)
		if keys > MaxRequestKeys {
			return fmt.Errorf("%w: more than %d documents and absent keys", ErrInvalid, MaxRequestKeys)
		}
		for j := range b.Docs {
			d := &b.Docs[j]
			if err := validName(d.User, d.Coll, d.ID, b.Partition, partitions); err != nil {
				return bad("document %d: %v", j, err)
			}
			if d.Version < 1 {
				return bad("document %d: version %d: versions start at 1", j, d.Version)
			}
			if d.Pos.Epoch > b.Epoch {
				return bad("document %d: position %s is of a later epoch than the batch's %d", j, d.Pos, b.Epoch)
			}
		}
		for j, k := range b.Absent {
			if err := validKey(k, b.Partition, partitions); err != nil {
				return bad("absent key %d: %v", j, err)
			}
		}
		for _, k := range []string{b.KeyFrom, b.KeyTo} {
			if k == "" {
				continue
			}
			if err := validKey(k, b.Partition, partitions); err != nil {
				return bad("key range: %v", err)
			}
		}
	}
	return nil
}

// validName checks a document's user, collection and id, and that the user
// belongs to partition p.
func validName(user, coll, id string, p, partitions int) error {
	if record.IsTenureMarker(user, coll, id) {
		return nil // every partition has one, under a user no client can name
	}
	if err := doc.ValidUser(user); err != nil {
		return err
	}
	if err := doc.ValidCollection(coll); err != nil {
		return err
	}
	if err := doc.ValidID(id); err != nil {
		return err
	}
	if got := shard.PartitionOf(user, partitions); got != p {
		return fmt.Errorf("its user belongs to partition %d, not %d", got, p)
	}
	return nil
}

// validKey checks a document key (record.DocKey) of partition p.
func validKey(k string, p, partitions int) error {
	parts := strings.SplitN(k, "/", 3)
	if len(parts) != 3 || record.DocKey(parts[0], parts[1], parts[2]) != k {
		return errors.New("not a document key user/collection/id")
	}
	return validName(parts[0], parts[1], parts[2], p, partitions)
}

package shard

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/shoal-db/shoal/internal/nodeid"
)

// Assignment is who is responsible for one partition: its master (the
// holder of the partition's lease at Epoch) and the responsible list,
// master first, then replicas.
type Assignment struct {
	Partition   int      `json:"p"`
	Master      string   `json:"m,omitempty"`
	Epoch       uint64   `json:"e,omitempty"`
	Responsible []string `json:"r,omitempty"`
	// Revision orders changes of the responsible list within one epoch
	// (replicas re-chosen by the same master).
	Revision uint64 `json:"v,omitempty"`
}

// ReplicasOf returns the replicas self lists as the partition's master:
// the responsible list after the master, in order; none when the table
// names another master. Whether self still holds the lease is the
// caller's to check (the table may lag a lease that went).
func (a Assignment) ReplicasOf(self string) []string {
	if a.Master != self || len(a.Responsible) < 2 {
		return nil
	}
	return a.Responsible[1:]
}

// newer reports whether a should replace b: a higher epoch always wins;
// within an epoch, a higher revision; at the same revision, the one that
// knows the responsible list (a master learned from a 421 carries none).
func (a Assignment) newer(b Assignment) bool {
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	return len(a.Responsible) > len(b.Responsible)
}

// Table is a node's knowledge of every partition's assignment. Updates
// arrive from gossip, from 421 answers and from this node's own leases; the
// higher epoch always wins, wherever it comes from. Safe for concurrent use.
type Table struct {
	mu      sync.RWMutex
	entries []Assignment
	changed chan struct{} // closed and replaced at every change
}

// NewTable returns a table of partitions partitions, all unassigned.
func NewTable(partitions int) *Table {
	t := &Table{entries: make([]Assignment, partitions), changed: make(chan struct{})}
	for i := range t.entries {
		t.entries[i].Partition = i
	}
	return t
}

// Get returns the assignment of a partition.
func (t *Table) Get(partition int) Assignment {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a := t.entries[partition]
	a.Responsible = slices.Clone(a.Responsible)
	return a
}

// Peek is Get without copying the responsible list, for a caller on
// every write's path that only reads it: the list is the table's own, which
// the table never changes (Merge stores a new one), and the caller must
// neither change it nor append to it.
func (t *Table) Peek(partition int) Assignment {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.entries[partition]
}

// Merge takes a if it is newer than what the table holds, and reports
// whether it did. Assignments that fail Check (a partition out of range,
// a master learned from a peer's 421 that is no node id) are ignored.
func (t *Table) Merge(a Assignment) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.Check(len(t.entries)) != nil || !a.newer(t.entries[a.Partition]) {
		return false
	}
	a.Responsible = slices.Clone(a.Responsible)
	t.entries[a.Partition] = a
	close(t.changed)
	t.changed = make(chan struct{})
	return true
}

// Changed returns a channel closed at the next change of the table.
func (t *Table) Changed() <-chan struct{} {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.changed
}

// Snapshot returns every assignment.
func (t *Table) Snapshot() []Assignment {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Assignment, len(t.entries))
	for i, a := range t.entries {
		a.Responsible = slices.Clone(a.Responsible)
		out[i] = a
	}
	return out
}

// EncodeAssignments serialises assignments for gossip.
func EncodeAssignments(as []Assignment) []byte {
	b, _ := json.Marshal(as)
	return b
}

// MaxResponsible bounds a gossiped responsible list: REPLICATION_FACTOR
// (at most 7) copies, and an incoming or draining copy or two beyond them.
const MaxResponsible = 16

// Check reports whether a is an assignment a node could have made for one
// of partitions partitions: unassigned (epoch 0, no one named), or a valid
// master at a positive epoch with a responsible list that is empty (a
// master learned from a 421) or starts with the master, names each node
// once and has at most MaxResponsible valid node ids.
func (a Assignment) Check(partitions int) error {
	if a.Partition < 0 || a.Partition >= partitions {
		return fmt.Errorf("partition %d is out of range: this cluster has %d", a.Partition, partitions)
	}
	if a.Epoch == 0 {
		if a.Master != "" || len(a.Responsible) > 0 || a.Revision != 0 {
			return fmt.Errorf("partition %d at epoch 0 names a master or replicas: only a lease (epoch 1 and up) does", a.Partition)
		}
		return nil
	}
	if err := nodeid.Check(a.Master); err != nil {
		return fmt.Errorf("partition %d: master: %w", a.Partition, err)
	}
	if len(a.Responsible) == 0 {
		return nil
	}
	if len(a.Responsible) > MaxResponsible {
		return fmt.Errorf("partition %d lists %d responsible nodes, more than %d", a.Partition, len(a.Responsible), MaxResponsible)
	}
	if a.Responsible[0] != a.Master {
		return fmt.Errorf("partition %d: the responsible list does not start with its master %q", a.Partition, a.Master)
	}
	for i, r := range a.Responsible {
		if err := nodeid.Check(r); err != nil {
			return fmt.Errorf("partition %d: responsible node: %w", a.Partition, err)
		}
		if slices.Contains(a.Responsible[:i], r) {
			return fmt.Errorf("partition %d lists node %q twice", a.Partition, r)
		}
	}
	return nil
}

// DecodeAssignments decodes gossiped assignments for a table of
// partitions partitions, refusing all of them if one does not pass Check.
func DecodeAssignments(data []byte, partitions int) ([]Assignment, error) {
	var as []Assignment
	if err := json.Unmarshal(data, &as); err != nil {
		return nil, fmt.Errorf("gossiped assignments do not decode: %w", err)
	}
	for _, a := range as {
		if err := a.Check(partitions); err != nil {
			return nil, fmt.Errorf("gossiped assignments refused: %w", err)
		}
	}
	return as, nil
}

// MergeEncoded merges gossiped assignments and returns how many were newer.
// Malformed or invalid input (see DecodeAssignments) changes nothing.
func (t *Table) MergeEncoded(data []byte) (int, error) {
	as, err := DecodeAssignments(data, len(t.entries))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range as {
		if t.Merge(a) {
			n++
		}
	}
	return n, nil
}

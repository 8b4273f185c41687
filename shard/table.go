package shard

import (
	"encoding/json"
	"slices"
	"sync"
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

// Merge takes a if it is newer than what the table holds, and reports
// whether it did. Assignments for partitions out of range are ignored.
func (t *Table) Merge(a Assignment) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.Partition < 0 || a.Partition >= len(t.entries) || !a.newer(t.entries[a.Partition]) {
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

// MergeEncoded merges gossiped assignments and returns how many were newer.
// Malformed input changes nothing.
func (t *Table) MergeEncoded(data []byte) (int, error) {
	var as []Assignment
	if err := json.Unmarshal(data, &as); err != nil {
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

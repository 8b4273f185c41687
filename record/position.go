package record

import "fmt"

// Position is where a change sits in its partition's history: the epoch of
// the master that made it, then its sequence number in the partition.
type Position struct {
	Epoch uint64 `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// Compare orders positions, epoch first.
func (p Position) Compare(q Position) int {
	switch {
	case p.Epoch < q.Epoch:
		return -1
	case p.Epoch > q.Epoch:
		return 1
	case p.Seq < q.Seq:
		return -1
	case p.Seq > q.Seq:
		return 1
	}
	return 0
}

func (p Position) String() string { return fmt.Sprintf("%d.%d", p.Epoch, p.Seq) }

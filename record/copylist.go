package record

import (
	"fmt"
	"slices"
)

// CopyList is a master's list of the regular copies of a partition (the
// copies a write concern counts, the master first), as the lease voters
// keep it: a master renews its lease with its list, and counts writes on
// a new list only once a majority of the voters holds it, so a node that
// takes the partition over reads the list the last master counted on
// from the voters that granted it, whatever its own table says. Seq
// orders the lists of one tenure (Epoch): it grows with every list the
// master records.
type CopyList struct {
	Epoch  uint64   `bson:"e" json:"epoch"`
	Seq    uint64   `bson:"s" json:"seq"`
	Copies []string `bson:"c" json:"copies"`
	// Incarnations, when set, holds for each of Copies (same order) the
	// incarnation of its process (cluster.NodeMeta.Incarnation, 0 when
	// unknown) when the master recorded the list as its tenure's first,
	// the partition holding nothing yet: every write counted on the list
	// came later, so a copy still running in that process and holding
	// nothing acknowledged none (lease.ConfirmHoldingNothing). Unset on
	// any other list.
	Incarnations []int64 `bson:"i,omitempty" json:"incarnations,omitempty"`
	// Counted, when set, is the count of copies the writes counted on the
	// list were acknowledged under, the smallest since the tenure began
	// (a majority of Counted copies, among the first Counted of the list):
	// lower than the copies listed while a copy that joined the regular
	// ones, the count of copies having risen, does not hold the master's
	// whole history yet. A check of the list asks enough of its copies to
	// find every such write (lease.ConfirmOnList). 0: the count of copies
	// now (a list recorded before Counted was kept).
	Counted int `bson:"n,omitempty" json:"counted,omitempty"`
}

// NamesAt reports whether l names id as a copy whose process had
// incarnation (a known one, not 0) when the list was recorded.
func (l *CopyList) NamesAt(id string, incarnation int64) bool {
	if l == nil || incarnation == 0 || len(l.Incarnations) != len(l.Copies) {
		return false
	}
	i := slices.Index(l.Copies, id)
	return i >= 0 && l.Incarnations[i] == incarnation
}

// String is the list as logs show it: epoch.seq[copies].
func (l *CopyList) String() string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("%d.%d%v", l.Epoch, l.Seq, l.Copies)
}

// Newer reports whether l is a later list than o (a nil o is older than
// any list).
func (l CopyList) Newer(o *CopyList) bool {
	if o == nil {
		return true
	}
	if l.Epoch != o.Epoch {
		return l.Epoch > o.Epoch
	}
	return l.Seq > o.Seq
}

// Same reports whether l and o are the same list (both nil counts).
func (l *CopyList) Same(o *CopyList) bool {
	if l == nil || o == nil {
		return l == nil && o == nil
	}
	return l.Epoch == o.Epoch && l.Seq == o.Seq && slices.Equal(l.Copies, o.Copies) && l.Counted == o.Counted
}

// Clone returns a copy of l that shares nothing with it (nil for nil).
func (l *CopyList) Clone() *CopyList {
	if l == nil {
		return nil
	}
	c := *l
	c.Copies = slices.Clone(l.Copies)
	c.Incarnations = slices.Clone(l.Incarnations)
	return &c
}

// Newest returns whichever of a and b is newer (either may be nil).
func Newest(a, b *CopyList) *CopyList {
	if a == nil {
		return b
	}
	if b == nil || !b.Newer(a) {
		return a
	}
	return b
}

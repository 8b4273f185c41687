package shard

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/shoal-db/shoal/internal/nodeid"
)

// FuzzMergeEncoded: gossiped assignments never panic; what is refused
// changes nothing; what is accepted names partitions in range, valid
// nodes, the master first, each once, an epoch only with a master; no
// entry of the table goes back to a lower epoch (or revision within one);
// and the table's own encoding is accepted by a table of the same size.
func FuzzMergeEncoded(f *testing.F) {
	for _, s := range []string{
		`[{"p":1,"m":"a","e":2,"r":["a","b"]},{"p":0}]`,
		`[{"p":3,"m":"a","e":2,"v":4,"r":["a","b","c"]}]`,
		`[{"p":1,"m":"b","e":1}]`,
		`[{"p":99999,"m":"a","e":1}]`,
		`[{"p":-1,"m":"a","e":1}]`,
		`[{"p":1,"e":5}]`,
		`[{"p":1,"m":"a","r":["a"]}]`,
		`[{"p":1,"m":"a","e":2,"r":["b","a"]}]`,
		`[{"p":1,"m":"a","e":2,"r":["a","a"]}]`,
		`[{"p":1,"m":"a/b","e":2}]`,
		`[{"p":1,"m":"a","e":2,"r":["a",""]}]`,
		`[{"p":1,"m":"a","e":18446744073709551615}]`,
		`[{"p":1,"m":"a","e":18446744073709551616}]`,
		`[{"p":1.5}]`, `{"p":1}`, `null`, `[]`, `[null]`, `{broken`, ``,
	} {
		f.Add([]byte(s), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, n uint8) {
		partitions := int(n%16) + 1
		tb := NewTable(partitions)
		tb.Merge(Assignment{Partition: 0, Master: "a", Epoch: 3, Revision: 1, Responsible: []string{"a", "b"}})
		before := tb.Snapshot()
		merged, err := tb.MergeEncoded(data)
		after := tb.Snapshot()
		if err != nil {
			if merged != 0 || !slices.EqualFunc(before, after, sameAssignment) {
				t.Fatalf("refused input %q changed the table: %v -> %v", data, before, after)
			}
			return
		}
		var as []Assignment
		if json.Unmarshal(data, &as) != nil || merged > len(as) {
			t.Fatalf("accepted %q, merging %d", data, merged)
		}
		for i, a := range after {
			if a.Partition != i {
				t.Fatalf("entry %d is partition %d", i, a.Partition)
			}
			if b := before[i]; b.newer(a) {
				t.Fatalf("partition %d went back from %+v to %+v", i, b, a)
			}
			if a.Epoch == 0 {
				if a.Master != "" || len(a.Responsible) > 0 {
					t.Fatalf("partition %d at epoch 0: %+v", i, a)
				}
				continue
			}
			if nodeid.Check(a.Master) != nil {
				t.Fatalf("partition %d has master %q", i, a.Master)
			}
			if len(a.Responsible) > MaxResponsible || len(a.Responsible) > 0 && a.Responsible[0] != a.Master {
				t.Fatalf("partition %d: %+v", i, a)
			}
			for j, r := range a.Responsible {
				if nodeid.Check(r) != nil || slices.Contains(a.Responsible[:j], r) {
					t.Fatalf("partition %d lists %q", i, a.Responsible)
				}
			}
		}
		again := NewTable(partitions)
		if _, err := again.MergeEncoded(EncodeAssignments(after)); err != nil {
			t.Fatalf("the table's own encoding is refused: %v", err)
		}
		if got := again.Snapshot(); !slices.EqualFunc(got, after, sameAssignment) {
			t.Fatalf("the table's encoding merged as %v, not %v", got, after)
		}
	})
}

func sameAssignment(a, b Assignment) bool {
	return a.Partition == b.Partition && a.Master == b.Master && a.Epoch == b.Epoch && a.Revision == b.Revision &&
		slices.Equal(a.Responsible, b.Responsible)
}

// A master learned from a peer's 421 that is no node id is not taken.
func TestMergeRefusesInvalidMaster(t *testing.T) {
	tb := NewTable(2)
	for _, a := range []Assignment{
		{Partition: 1, Master: string(make([]byte, 10_000)), Epoch: 9},
		{Partition: 1, Master: "", Epoch: 9},
		{Partition: 1, Master: "a b", Epoch: 9},
	} {
		if tb.Merge(a) {
			t.Errorf("took master %.20q at epoch %d", a.Master, a.Epoch)
		}
	}
}

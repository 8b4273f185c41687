package shard

import "testing"

func TestTableHigherEpochAlwaysWins(t *testing.T) {
	tb := NewTable(4)
	steps := []struct {
		a    Assignment
		took bool
	}{
		{Assignment{Partition: 1, Master: "a", Epoch: 2, Responsible: []string{"a", "b"}}, true},
		{Assignment{Partition: 1, Master: "b", Epoch: 1}, false},                                              // older epoch
		{Assignment{Partition: 1, Master: "a", Epoch: 2, Responsible: []string{"a", "c"}}, false},             // same epoch, same revision
		{Assignment{Partition: 1, Master: "a", Epoch: 2, Revision: 1, Responsible: []string{"a", "c"}}, true}, // replicas re-chosen
		{Assignment{Partition: 1, Master: "c", Epoch: 3, Responsible: []string{"c"}}, true},
		{Assignment{Partition: 1, Master: "a", Epoch: 2, Revision: 9}, false}, // a high revision of an old epoch
		{Assignment{Partition: 9, Master: "x", Epoch: 9}, false},              // out of range
	}
	for i, s := range steps {
		if got := tb.Merge(s.a); got != s.took {
			t.Fatalf("step %d: Merge(%+v) = %v, want %v", i, s.a, got, s.took)
		}
	}
	if got := tb.Get(1); got.Master != "c" || got.Epoch != 3 {
		t.Fatalf("partition 1 is %+v", got)
	}
	// Round trip through the gossip encoding.
	other := NewTable(4)
	n, err := other.MergeEncoded(EncodeAssignments(tb.Snapshot()))
	if err != nil || n != 1 || other.Get(1).Master != "c" {
		t.Fatalf("merged %d, %v: %+v", n, err, other.Get(1))
	}
	if _, err := other.MergeEncoded([]byte("{broken")); err == nil {
		t.Fatal("accepted malformed gossip")
	}
}

// A list Peek handed out stays as it was when the table takes a newer
// assignment, and changing the list Merge was given changes nothing in the
// table: Peek shares the table's own list, which the table never changes.
func TestAPeekedListStaysAsItWas(t *testing.T) {
	tb := NewTable(2)
	given := []string{"a", "b"}
	tb.Merge(Assignment{Partition: 0, Master: "a", Epoch: 1, Responsible: given})
	given[1] = "z"
	peeked := tb.Peek(0)
	if peeked.Responsible[1] != "b" {
		t.Fatalf("the table's list changed with the caller's: %v", peeked.Responsible)
	}
	tb.Merge(Assignment{Partition: 0, Master: "c", Epoch: 2, Responsible: []string{"c", "d"}})
	if peeked.Master != "a" || peeked.Responsible[0] != "a" || peeked.Responsible[1] != "b" {
		t.Fatalf("a peeked assignment changed with the table: %+v", peeked)
	}
	if now := tb.Peek(0); now.Master != "c" || now.Responsible[1] != "d" {
		t.Fatalf("partition 0 is %+v", now)
	}
}

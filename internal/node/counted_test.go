package node

import (
	"slices"
	"testing"
)

// The copies whose acknowledgements count (countedOf): those on every
// list the voters may keep, at the count's own epoch, and not being
// replaced. With no rule worked out for the epoch, none counts (the third
// review of the twenty-first session: it counted every copy, and a write
// concern waiting across this node's next tenure counted a copy a swap
// of the tenure before had replaced).
func TestTheCopiesThatCount(t *testing.T) {
	var n Node
	replicas := []string{"a", "b", "c"}
	if got := n.countedOf(0, 4, replicas); len(got) != 0 {
		t.Errorf("no rule worked out yet: %v count, want none", got)
	}
	n.countable.Store(&map[int]countableCopies{0: {epoch: 4, copies: []string{"a", "c"}}})
	if got := n.countedOf(0, 5, replicas); len(got) != 0 {
		t.Errorf("a rule of epoch 4 asked at epoch 5: %v count, want none", got)
	}
	if got := n.countedOf(0, 4, replicas); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("b is on no list the voters may keep: %v count, want a and c", got)
	}
	n.deciding.Store(0, []string{"c"})
	if got := n.countedOf(0, 4, replicas); !slices.Equal(got, []string{"a"}) {
		t.Errorf("c is being replaced: %v count, want a", got)
	}
	n.deciding.Clear()
	if got := n.countedOf(0, 4, []string{"c", "a"}); !slices.Equal(got, []string{"c", "a"}) {
		t.Errorf("every copy counts: %v, want c and a as given", got)
	}
}

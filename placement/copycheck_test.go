package placement

import (
	"slices"
	"testing"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
)

// A node asking to have its copy checked (a former master replaced while it
// was down) is an extra copy until it has answered a batch of this tenure,
// and never takes a regular slot.
func TestWithCopiesToCheck(t *testing.T) {
	heard := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	for _, c := range []struct {
		name             string
		replicas, asking []string
		copies           int
		heard            func(string) bool
		want, done       []string
	}{
		{"nobody asks", []string{"r"}, nil, 2, heard(), []string{"r"}, nil},
		{"an asker not heard yet: an extra copy", []string{"r"}, []string{"x"}, 2, heard(), []string{"r", "x"}, nil},
		{"after the extra copies already there", []string{"r", "o"}, []string{"x"}, 2, heard(), []string{"r", "o", "x"}, nil},
		{"an asker that answered: dropped, its check done", []string{"r"}, []string{"x"}, 2, heard("x"), []string{"r"}, []string{"x"}},
		{"an asker chosen on its own merits stays", []string{"x"}, []string{"x"}, 2, heard("x"), []string{"x"}, []string{"x"}},
		{"an asker already listed is not added twice", []string{"r", "x"}, []string{"x"}, 2, heard(), []string{"r", "x"}, nil},
		{"a regular slot empty: the asker waits", nil, []string{"x"}, 2, heard(), nil, nil},
		{"RF 3, one regular slot empty: the asker waits", []string{"r"}, []string{"x"}, 3, heard(), []string{"r"}, nil},
		{"RF 3, regular slots taken", []string{"r", "s"}, []string{"x", "y"}, 3, heard("y"), []string{"r", "s", "x"}, []string{"y"}},
		{"RF 1: no regular replica to wait for", nil, []string{"x"}, 1, heard(), []string{"x"}, nil},
	} {
		in := slices.Clone(c.replicas)
		got, done := WithCopiesToCheck(in, c.asking, c.copies, c.heard)
		if !slices.Equal(got, c.want) || !slices.Equal(done, c.done) {
			t.Errorf("%s: %v (done %v), want %v (done %v)", c.name, got, done, c.want, c.done)
		}
		if !slices.Equal(in, c.replicas) {
			t.Errorf("%s: the replicas given were changed: %v", c.name, in)
		}
	}
}

// A node with an unreconciled copy asks the partition's master to check it
// only when another node masters it at a later epoch and is up.
func TestShouldAskCheck(t *testing.T) {
	a := func(master string, epoch uint64) shard.Assignment {
		return shard.Assignment{Master: master, Epoch: epoch, Responsible: []string{master, "r"}}
	}
	for _, c := range []struct {
		name     string
		a        shard.Assignment
		masterUp bool
		want     bool
	}{
		{"a later master, up", a("m", 4), true, true},
		{"a later master, not up", a("m", 4), false, false},
		{"the table still names this node", a("x", 3), true, false},
		{"no master known", shard.Assignment{}, true, false},
		{"a master of this node's tenure or before", a("m", 3), true, false},
	} {
		if got := ShouldAskCheck("x", 3, c.a, c.masterUp); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A node's copy holds writes no later master has checked while its newest
// position is of its own last tenure and nothing of a later epoch reached
// it (the fault suite's seed 6009: a former master out of the peer list
// reported holding nothing with such writes, and was stopped).
func TestUnreconciledCopy(t *testing.T) {
	pos := func(e, s uint64) record.Position { return record.Position{Epoch: e, Seq: s} }
	for _, c := range []struct {
		name    string
		holding bool
		tenure  uint64
		last    record.Position
		newest  uint64
		want    bool
	}{
		{"never mastered", false, 0, pos(3, 9), 3, false},
		{"wrote in its tenure, nobody came after", false, 3, pos(3, 9), 3, true},
		{"still master", true, 3, pos(3, 9), 3, false},
		{"a later master's batch came", false, 3, pos(3, 9), 4, false},
		{"no write in its tenure", false, 3, pos(2, 9), 3, false},
		{"a later epoch's history", false, 3, pos(4, 1), 4, false},
	} {
		if got := UnreconciledCopy(c.holding, c.tenure, c.last, c.newest); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

package node

import (
	"testing"

	"github.com/shoal-db/shoal/shard"
)

func TestPreferredMasterWantsOnlyWhatItCanServe(t *testing.T) {
	up := func(ids ...string) func(string) bool {
		return func(id string) bool {
			for _, u := range ids {
				if u == id {
					return true
				}
			}
			return false
		}
	}
	cases := []struct {
		name string
		a    shard.Assignment
		up   func(string) bool
		want bool
	}{
		{"new cluster, no master known", shard.Assignment{}, up("o"), true},
		{"it is the master", shard.Assignment{Master: "o", Responsible: []string{"o", "r"}}, up("o", "r"), true},
		{"it is a replica of the stand-in", shard.Assignment{Master: "s", Responsible: []string{"s", "o"}}, up("o", "s"), true},
		{"just added: a copy holder is up", shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up("o", "r"), false},
		{"just added: master up", shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up("o", "m"), false},
		{"just added: every copy is gone", shard.Assignment{Master: "m", Responsible: []string{"m", "r"}}, up("o"), true},
	}
	for _, c := range cases {
		if got := preferredMasterWants(c.a, "o", c.up); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

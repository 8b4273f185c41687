package shard

import (
	"slices"
	"testing"
)

func TestWriteQuorum(t *testing.T) {
	for _, c := range []struct {
		name        string
		rf          int
		responsible []string // master first
		regular     []string
		majority    int
	}{
		{"rf 1", 1, []string{"m"}, []string{"m"}, 1},
		{"rf 1, an incoming copy", 1, []string{"m", "in"}, []string{"m"}, 1},
		{"rf 0 counts as 1", 0, []string{"m", "r"}, []string{"m"}, 1},
		{"rf 2", 2, []string{"m", "r"}, []string{"m", "r"}, 2},
		{"rf 2, a replacement still copying", 2, []string{"m", "r", "new"}, []string{"m", "r"}, 2},
		{"rf 2, no replica listed yet", 2, []string{"m"}, []string{"m"}, 2},
		{"rf 3", 3, []string{"m", "a", "b"}, []string{"m", "a", "b"}, 2},
		{"rf 3, a draining replica kept after the regular ones", 3, []string{"m", "a", "b", "gone"}, []string{"m", "a", "b"}, 2},
		{"rf 3, a draining replica in a regular slot still counts", 3, []string{"m", "gone", "a"}, []string{"m", "gone", "a"}, 2},
		{"rf 3, extra copies: incoming and checked", 3, []string{"m", "a", "b", "owner", "asker"}, []string{"m", "a", "b"}, 2},
		{"rf 3, one replica listed", 3, []string{"m", "a"}, []string{"m", "a"}, 2},
		{"rf 3, a new tenure lists no one", 3, nil, []string{}, 2},
		{"rf 4", 4, []string{"m", "a", "b", "c", "d"}, []string{"m", "a", "b", "c"}, 3},
		{"rf 5", 5, []string{"m", "a", "b", "c", "d"}, []string{"m", "a", "b", "c", "d"}, 3},
		{"rf 5, extra copy", 5, []string{"m", "a", "b", "c", "d", "e"}, []string{"m", "a", "b", "c", "d"}, 3},
		{"rf 5, two replicas listed", 5, []string{"m", "a", "b"}, []string{"m", "a", "b"}, 3},
	} {
		q := WriteQuorum(c.rf)
		if got := q.Regular(c.responsible); !slices.Equal(got, c.regular) {
			t.Errorf("%s: regular %v, want %v", c.name, got, c.regular)
		}
		if len(c.responsible) > 0 {
			// The replicas a master counts are its regular copies but itself.
			if got, want := q.Replicas(c.responsible[1:]), c.regular[1:]; !slices.Equal(got, want) {
				t.Errorf("%s: replicas %v, want %v", c.name, got, want)
			}
		}
		if got := q.Majority(); got != c.majority {
			t.Errorf("%s: majority %d, want %d", c.name, got, c.majority)
		}
		if got := q.MajorityReplicas(); got != c.majority-1 {
			t.Errorf("%s: majority replicas %d, want %d", c.name, got, c.majority-1)
		}
		if got, want := q.ReplicaSlots(), max(c.rf, 1)-1; got != want {
			t.Errorf("%s: replica slots %d, want %d", c.name, got, want)
		}
	}
}

func TestReplicasOf(t *testing.T) {
	for _, c := range []struct {
		name string
		a    Assignment
		want []string
	}{
		{"master with replicas", Assignment{Master: "m", Responsible: []string{"m", "a", "b"}}, []string{"a", "b"}},
		{"master alone", Assignment{Master: "m", Responsible: []string{"m"}}, nil},
		{"another master", Assignment{Master: "x", Responsible: []string{"x", "m"}}, nil},
		{"no master known", Assignment{Responsible: []string{"m", "a"}}, nil},
	} {
		if got := c.a.ReplicasOf("m"); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: replicas of m %v, want %v", c.name, got, c.want)
		}
	}
}

// TestWriteQuorumOverlapsPromotion checks the property the promotion rule
// (lease.MayCampaign) relies on: a majority write and any rf-rf/2 regular
// copies share one, and a majority is never more copies than rf.
func TestWriteQuorumOverlapsPromotion(t *testing.T) {
	for rf := 1; rf <= MaxResponsible; rf++ {
		m, heard := WriteQuorum(rf).Majority(), rf-rf/2
		if m > rf || m+heard <= rf {
			t.Errorf("rf %d: majority %d and %d heard from need not overlap", rf, m, heard)
		}
	}
}

package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

func TestPartitionViewOf(t *testing.T) {
	a := shard.Assignment{Partition: 7, Master: "node2", Epoch: 4, Responsible: []string{"node2", "node1"}, Revision: 3}
	cases := []struct {
		name      string
		a         shard.Assignment
		preferred string
		epoch     uint64
		held      bool
		want      api.PartitionView
	}{
		{"the table's master", a, "node3", 0, false,
			api.PartitionView{Partition: 7, Master: "node2", Epoch: 4, PreferredMaster: "node3", Responsible: []string{"node2", "node1"}}},
		{"a lease held here before the table says so", a, "node1", 5, true,
			api.PartitionView{Partition: 7, Master: "node1", Epoch: 5, PreferredMaster: "node1", Responsible: []string{"node2", "node1"}}},
		{"no master known", shard.Assignment{Partition: 0}, "node1", 0, false,
			api.PartitionView{Partition: 0, PreferredMaster: "node1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := api.PartitionViewOf("node1", tc.a, tc.preferred, tc.epoch, tc.held)
			if !samePartition(got, tc.want) || got.Position != nil {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			// The placement answer carries the same fields.
			pl := got.Placement()
			if pl.Partition != got.Partition || pl.Master != got.Master || pl.Epoch != got.Epoch ||
				pl.PreferredMaster != got.PreferredMaster || !slices.Equal(pl.Responsible, got.Responsible) {
				t.Errorf("Placement() = %+v, from %+v", pl, got)
			}
		})
	}
	// The view does not share the assignment's list.
	v := api.PartitionViewOf("node1", a, "node1", 0, false)
	v.Responsible[0] = "changed"
	if a.Responsible[0] != "node2" {
		t.Error("PartitionViewOf shares the assignment's responsible list")
	}
}

func samePartition(a, b api.PartitionView) bool {
	return a.Partition == b.Partition && a.Master == b.Master && a.Epoch == b.Epoch &&
		a.PreferredMaster == b.PreferredMaster && slices.Equal(a.Responsible, b.Responsible)
}

// TestClusterPartitionTableMatchesPlacement asks every node of a
// three-node cluster for GET /v1/cluster?partitions=1 between two rounds
// of GET /v1/users/{user}/placement, one user per partition: every
// partition the placements name alike before and after is in the table
// as they name it (master, epoch, preferred master, responsible list), and
// its position is given exactly where the node holds a copy, between the
// placements' positions.
func TestClusterPartitionTableMatchesPlacement(t *testing.T) {
	start := time.Now()
	c := testcluster.Start(t, 3)
	t.Logf("cluster of 3 ready in %s", time.Since(start).Round(time.Millisecond))
	admin := testnode.AdminToken(t)

	users := make([]string, testcluster.Partitions)
	for i, left := 0, len(users); left > 0; i++ {
		u := fmt.Sprintf("u%d", i)
		if p := shard.PartitionOf(u, len(users)); users[p] == "" {
			users[p], left = u, left-1
		}
	}
	// A document in every other partition, so that positions differ.
	writer := c.Nodes[0].Client(admin)
	for p := 0; p < len(users); p += 2 {
		if r := writer.Do("PUT", "/v1/users/"+users[p]+"/collections/c/documents/d", `{"p":`+fmt.Sprint(p)+`}`); r.Status != 201 {
			t.Fatalf("PUT in partition %d: %d %s", p, r.Status, r.Body)
		}
	}

	for _, n := range c.Nodes {
		cl := n.Client(admin)
		// The default answer stays small: no table.
		for _, path := range []string{"/v1/cluster", "/v1/cluster?all=1", "/v1/cluster?partitions=0"} {
			if got := clusterAnswer(t, cl, path); got.PartitionTable != nil {
				t.Errorf("%s GET %s: %d partition rows, want none", n.ID, path, len(got.PartitionTable))
			}
		}
		placements := func() []api.PlacementView {
			out := make([]api.PlacementView, len(users))
			for p, u := range users {
				r := cl.Do("GET", "/v1/users/"+u+"/placement", nil)
				if r.Status != 200 {
					t.Fatalf("%s GET placement of %s: %d %s", n.ID, u, r.Status, r.Body)
				}
				if err := json.Unmarshal(r.Body, &out[p]); err != nil || out[p].Partition != p {
					t.Fatalf("%s GET placement of %s (partition %d): %v %s", n.ID, u, p, err, r.Body)
				}
			}
			return out
		}
		// GET /v1/placement (an admin's call): the same rows, without
		// positions, and the partition count; refused to a user's token.
		if r := n.Client(testnode.Token(t, "anyone")).Do("GET", "/v1/placement", nil); r.Status != 403 {
			t.Errorf("%s: GET /v1/placement with a user's token: %d %s, want 403", n.ID, r.Status, r.Body)
		}
		var compared int
		testnode.Eventually(t, 30*time.Second, n.ID+": a round in which no partition's placement changed", func() (bool, string) {
			before := placements()
			table := clusterAnswer(t, cl, "/v1/cluster?partitions=1").PartitionTable
			public := placementTable(t, cl)
			after := placements()
			if len(table) != len(users) {
				t.Fatalf("%s: %d partition rows, want %d", n.ID, len(table), len(users))
			}
			if public.PartitionCount != len(users) || len(public.Partitions) != len(users) {
				t.Fatalf("%s: GET /v1/placement: count %d, %d rows; want %d", n.ID, public.PartitionCount, len(public.Partitions), len(users))
			}
			var moved []string
			compared = 0
			for p, row := range table {
				b, a := before[p], after[p]
				was := api.PartitionView{Partition: p, Master: b.Master, Epoch: b.Epoch, PreferredMaster: b.PreferredMaster, Responsible: b.Responsible}
				now := api.PartitionView{Partition: p, Master: a.Master, Epoch: a.Epoch, PreferredMaster: a.PreferredMaster, Responsible: a.Responsible}
				if !samePartition(was, now) {
					moved = append(moved, fmt.Sprintf("%d: %+v then %+v", p, was, now))
					continue
				}
				compared++
				if !samePartition(row, now) {
					t.Errorf("%s: partition %d: the table says %+v, the placement %+v", n.ID, p, row, now)
				}
				if pub := public.Partitions[p]; !samePartition(pub, now) || pub.Partition != p || pub.Position != nil {
					t.Errorf("%s: partition %d: GET /v1/placement says %+v, the placement %+v", n.ID, p, pub, now)
				}
				holds := now.Master == n.ID || slices.Contains(now.Responsible, n.ID)
				switch {
				case holds && row.Position == nil:
					t.Errorf("%s: partition %d: no position, though the node holds a copy (master %s, responsible %v)", n.ID, p, now.Master, now.Responsible)
				case !holds && row.Position != nil:
					t.Errorf("%s: partition %d: position %v, though the node holds no copy (master %s, responsible %v)", n.ID, p, *row.Position, now.Master, now.Responsible)
				case holds && (row.Position.Compare(b.Position) < 0 || row.Position.Compare(a.Position) > 0):
					t.Errorf("%s: partition %d: position %v, not between the placements' %v and %v", n.ID, p, *row.Position, b.Position, a.Position)
				}
				if p%2 == 0 && now.Master == n.ID && row.Position != nil && *row.Position == (store.Position{}) {
					t.Errorf("%s: partition %d: position zero on its master after a write", n.ID, p)
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			return len(moved) == 0, strings.Join(moved, "; ")
		})
		t.Logf("%s: %d partition rows agree with the placements", n.ID, compared)
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Millisecond))
}

func clusterAnswer(t *testing.T, cl *testnode.Client, path string) api.ClusterAnswer {
	t.Helper()
	r := cl.Do("GET", path, nil)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var out api.ClusterAnswer
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

func placementTable(t *testing.T, cl *testnode.Client) api.PlacementTable {
	t.Helper()
	r := cl.Do("GET", "/v1/placement", nil)
	if r.Status != 200 {
		t.Fatalf("GET /v1/placement: %d %s", r.Status, r.Body)
	}
	var out api.PlacementTable
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatalf("GET /v1/placement: %v", err)
	}
	return out
}

package testcluster_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// A copy leaving a partition's list costs no write. RF 3: node1 stops,
// and once it is DOWN past REPLICA_REPLACE_AFTER each master takes it out
// of its lists. Clients write to partitions node2 masters throughout,
// with write concern majority, which node2 and the third copy meet
// without node1.
//
//   - Dropped (three nodes): no node is left to take node1's place.
//     Before, the shorter list went to the lease voters first and to the
//     master's table only at its next round of replica choice, and in
//     between the voters' list did not name every copy of the table's,
//     so the master refused to acknowledge: a commit under way failed
//     with "the partition's lease ran out during the commit; the outcome
//     is unknown" (503; 3 of 5 runs), and a new tenure's marker failed
//     the same way (a CI flake of
//     TestStrongReadsAcrossAFailoverOfAnIdlePartition). A copy that
//     leaves is now dropped from the table first (the voters' list still
//     names it: a node taking over asks one copy more), then from the
//     voters' list.
//   - Replaced (four nodes): node4 is copied the partition and takes
//     node1's slot, once it holds what node1 held, without a pause of the
//     writes. The table must wait for the voters there (the new list
//     names a copy the voters' list did not), and a commit that ended in
//     between failed the same way; it now waits for the table to take
//     the list (one round of replica choice) and is acknowledged.
func TestACopyLeavingAListFailsNoWrite(t *testing.T) {
	t.Run("dropped", func(t *testing.T) { writesWhileNode1Leaves(t, 3) })
	t.Run("replaced", func(t *testing.T) { writesWhileNode1Leaves(t, 4) })
}

func writesWhileNode1Leaves(t *testing.T, nodes int) {
	c := testcluster.Start(t, nodes, testcluster.ReplicationFactor(3))
	token := testnode.AdminToken(t)
	// One user on each partition node2 masters with node1 as a copy.
	users := map[int]string{}
	for i := 0; i < 10000; i++ {
		u := fmt.Sprintf("user%d", i)
		p := shard.PartitionOf(u, testcluster.Partitions)
		if _, ok := users[p]; !ok && c.MasterOf(p) == "node2" && slices.Contains(c.Node("node2").Placement(p).Responsible, "node1") {
			users[p] = u
		}
	}
	if len(users) < 3 {
		t.Fatalf("node2 masters %d partitions node1 holds a copy of; the test wants 3 or more", len(users))
	}
	cl := c.Node("node2").Client(token)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	var mu sync.Mutex
	var failed []string
	for p, user := range users {
		for w := range 3 { // three writers a partition: a commit is nearly always under way
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					path := fmt.Sprintf("/v1/users/%s/collections/c/documents/w%d-%d", user, w, i%20)
					r, err := cl.TryDo("PUT", path, fmt.Sprintf(`{"n":%d}`, i), "X-Write-Concern", "majority")
					if err == nil && (r.Status == 200 || r.Status == 201) {
						writes.Add(1)
						continue
					}
					mu.Lock()
					if err != nil {
						failed = append(failed, fmt.Sprintf("partition %d, %s: %v", p, path, err))
					} else {
						failed = append(failed, fmt.Sprintf("partition %d, %s: %d %s", p, path, r.Status, r.Body))
					}
					mu.Unlock()
				}
			}()
		}
	}
	testnode.Eventually(t, 30*time.Second, "writes flowing", func() (bool, string) {
		n := writes.Load()
		return n >= int64(4*len(users)), fmt.Sprintf("%d writes", n)
	})
	c.Node("node1").Stop()
	testnode.Eventually(t, 60*time.Second, "node2 taking node1 out of each list, on its table and on the voters", func() (bool, string) {
		for p := range users {
			on := c.Node("node2").Placement(p).Responsible
			kept := c.Node("node2").Leases().ListOnVoters(p)
			if slices.Contains(on, "node1") || kept == nil || slices.Contains(kept.Copies, "node1") || len(on) != min(nodes-1, 3) {
				return false, fmt.Sprintf("partition %d: table %v, voters keep %v", p, on, kept)
			}
		}
		return true, ""
	})
	// A few more writes on the new lists.
	after := writes.Load()
	testnode.Eventually(t, 30*time.Second, "writes on the new lists", func() (bool, string) {
		n := writes.Load()
		return n >= after+int64(2*len(users)), fmt.Sprintf("%d writes since", n-after)
	})
	close(stop)
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d majority writes failed while node1 left the lists, first: %s", len(failed), int64(len(failed))+writes.Load(), failed[0])
	}
	t.Logf("%d majority writes to %d partitions of node2 while node1 left their lists; %d failed", writes.Load(), len(users), len(failed))
}

package replicate

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoal-db/shoal/store"
)

// A sender's round reads the view of the partitions it has something for
// (a run queued, an answer to weigh), not of every partition the replica
// holds: with hundreds of partitions and a few writes per request,
// reading every one's view in every round was 9% of a node's CPU under
// majority writes (docs/benchmarks.md). What only a view shows of an idle
// partition (here a commit stored without a run, as when its lease ran
// out during the commit) is found by the next sweep, sweepEvery later.
func TestARoundReadsTheViewsOfBusyPartitionsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const partitions = 64
		c := &lockCheck{epochs: map[int]uint64{}, replicas: map[int][]string{}, copies: 2,
			docs: map[int][]*store.Doc{}, horizon: map[int]store.Position{}, calls: map[string]int{}, held: map[string]string{}}
		for p := range partitions {
			c.epochs[p], c.replicas[p] = 1, []string{"r"}
		}
		s, _, rounds := c.drive(t, Config{})
		s.Ensure(partitions) // every partition probed: all idle after
		rounds()
		for p := range partitions {
			if _, ok := s.Acked("r", p); !ok {
				t.Fatalf("partition %d was not probed", p)
			}
		}
		// Whatever the probes' answers left to weigh is weighed.
		rounds()

		c.mu.Lock()
		c.viewed = map[int]int{}
		k := stored("k", pos(1, 1))
		c.docs[5] = []*store.Doc{k}
		c.mu.Unlock()
		s.Committed(store.Batch{Partition: 5, Epoch: 1, UpTo: pos(1, 1), Docs: []*store.Doc{k}})
		rounds()
		if acked, _ := s.Acked("r", 5); acked != pos(1, 1) {
			t.Fatalf("partition 5 acknowledged at %s, want 1.1", acked)
		}
		c.mu.Lock()
		for p, n := range c.viewed {
			if p != 5 && n > 0 {
				t.Errorf("partition %d, idle, had its view read %d times in rounds that shipped partition 5", p, n)
			}
		}
		if c.viewed[5] == 0 {
			t.Error("partition 5's view was never read: the count proves nothing")
		}
		// A commit of partition 9 stored without a run.
		c.docs[9] = []*store.Doc{stored("lost-lease", pos(1, 1))}
		c.mu.Unlock()

		time.Sleep(sweepEvery) // the fake clock: the next round sweeps
		s.Committed(store.Batch{Partition: 5, Epoch: 1, From: pos(1, 1), UpTo: pos(1, 2), Docs: []*store.Doc{stored("k", pos(1, 2))}})
		rounds()
		if acked, _ := s.Acked("r", 9); acked != pos(1, 1) {
			t.Fatalf("partition 9, its commit stored without a run, acknowledged at %s after a sweep, want 1.1", acked)
		}
	})
}

// A notice that does not fit in a sweep's request is sent by the round
// after it, not left to a later sweep: a partition whose only news is a
// new tenure of this node looks idle (nothing is counted at the new
// epoch yet), and rounds that skip it could move past it sweep after
// sweep while other partitions fill the requests; a drain waiting for
// the replica to have heard the tenure (Shipper.Heard) would wait as
// long.
func TestANoticeCutFromAFullRequestGoesInTheNextRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &lockCheck{epochs: map[int]uint64{0: 1, 1: 1}, replicas: map[int][]string{0: {"r"}, 1: {"r"}}, copies: 2,
			docs: map[int][]*store.Doc{}, horizon: map[int]store.Position{}, calls: map[string]int{}, held: map[string]string{}}
		// One document fills a request: nothing else fits after it.
		s, d, rounds := c.drive(t, Config{MaxBatchBytes: 600})
		s.Ensure(2)
		rounds()
		rounds()
		if !s.Heard("r", 1, 1) {
			t.Fatal("partition 1's first tenure was not heard: the test proves nothing")
		}

		// Partition 1: a new tenure of this node. Partition 0: a run that
		// fills the sweep's request, ahead of partition 1's notice.
		c.mu.Lock()
		c.epochs[1] = 2
		big := stored("big", pos(1, 1))
		big.Body = map[string]any{"payload": strings.Repeat("x", 1000)}
		c.docs[0] = []*store.Doc{big}
		c.mu.Unlock()
		time.Sleep(sweepEvery) // the next round sweeps
		s.Committed(store.Batch{Partition: 0, Epoch: 1, UpTo: pos(1, 1), Docs: []*store.Doc{big}})
		d.liveFrom = 0
		if _, err := s.round(d); err != nil {
			t.Fatal(err)
		}
		if s.Heard("r", 1, 2) {
			t.Fatal("partition 1's notice fitted in the request after partition 0's run: the test proves nothing")
		}
		rounds() // no sweep due
		if !s.Heard("r", 1, 2) {
			t.Fatal("the replica never heard partition 1's new tenure: its notice, cut from a full request, waited for a sweep")
		}
	})
}

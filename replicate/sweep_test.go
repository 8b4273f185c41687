package replicate

import (
	"log/slog"
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
		s := New(Config{Mastership: c, Source: c, Transport: c, Observer: c, Logger: slog.New(slog.DiscardHandler)})
		c.s = s
		defer s.Close()
		d := &dest{id: "r", wake: make(chan struct{}, 1), parts: map[int]*progress{}, running: true}
		s.dests["r"] = d
		rounds := func() {
			t.Helper()
			for range 100 {
				progressed, err := s.round(d)
				if err != nil {
					t.Fatal(err)
				}
				if !progressed {
					return
				}
			}
			t.Fatal("the sender's rounds never ran out of work")
		}
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

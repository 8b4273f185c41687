package replicate

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/shoal-db/shoal/store"
)

// TestASenderStopsWhenItsNodeReplicatesNothing: a node that leaves every
// responsible list (replaced, drained, gone) keeps no sender goroutine,
// but what it acknowledged stays known; one still listed keeps its
// sender, and one listed again has its sender started again.
func TestASenderStopsWhenItsNodeReplicatesNothing(t *testing.T) {
	var mu sync.Mutex
	replicas := []string{"r1", "r2"}
	pos := store.Position{Epoch: 1, Seq: 1}
	s := New((&wiring{
		replicas: func(int) []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(replicas)
		},
		epoch:      func(int) (uint64, bool) { return 1, true },
		epochStart: func(int, uint64) store.Position { return store.Position{} },
		last:       func(int) store.Position { return pos },
		send: func(_ context.Context, _ string, req Request) (Response, error) {
			var resp Response
			for _, b := range req.Batches {
				resp.Results = append(resp.Results, Result{Partition: b.Partition, Applied: pos, Code: CodeOK})
			}
			return resp, nil
		},
	}).config(Config{}))
	defer s.Close()
	eventually := func(what string, cond func() (bool, string)) {
		t.Helper()
		var last string
		await(t, func() string { return what + " (" + last + ")" }, func() bool {
			ok, now := cond()
			last = now
			return ok
		})
	}
	running := func(want ...string) func() (bool, string) {
		return func() (bool, string) {
			s.mu.Lock()
			defer s.mu.Unlock()
			var ids []string
			for id, d := range s.dests {
				if d.running {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			return slices.Equal(ids, want), "senders for [" + strings.Join(ids, " ") + "]"
		}
	}
	s.Committed(store.Batch{Partition: 0, Epoch: 1, From: store.Position{}, UpTo: pos, Docs: []*store.Doc{{Key: "k", Pos: pos}}})
	for _, r := range []string{"r1", "r2"} {
		eventually(r+" acknowledges", func() (bool, string) {
			acked, ok := s.Acked(r, 0)
			return ok && acked == pos, acked.String()
		})
	}
	mu.Lock()
	replicas = []string{"r1"}
	mu.Unlock()
	eventually("r2's sender stops and r1's runs on", running("r1"))
	// What r2 acknowledged stays known: a master whose lease lapses for a
	// moment stops every sender, and when it renews it must still know
	// how far a replica that is down holds the partition.
	if acked, ok := s.Acked("r2", 0); !ok || acked != pos {
		t.Fatalf("r2's acknowledgement after its sender stopped: %s (known %v), want %s", acked, ok, pos)
	}
	mu.Lock()
	replicas = []string{"r1", "r2"}
	mu.Unlock()
	s.Ensure(1)
	eventually("r2 has a sender again", running("r1", "r2"))
}

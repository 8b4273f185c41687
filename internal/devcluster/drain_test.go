package devcluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
)

func TestDrainedIn(t *testing.T) {
	summary := func(without int, masters, copies map[string]int) *api.PartitionSummary {
		return &api.PartitionSummary{Count: 8, WithoutMaster: without, Masters: masters, Copies: copies}
	}
	for _, tc := range []struct {
		name string
		st   api.ClusterAnswer
		done bool
		want string
	}{
		{"its own answer: nothing", api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: summary(0, map[string]int{"a": 8}, map[string]int{"a": 0})}, true, "holds nothing"},
		{"another's answer: nothing", api.ClusterAnswer{View: cluster.View{Node: "a"}, Partitions: summary(0, map[string]int{"a": 8}, nil), Moves: []api.MoveStatus{{Partition: 1}}}, true, "holds nothing"},
		{"masters some", api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: summary(0, map[string]int{"a": 6, "x": 2}, map[string]int{"x": 1})}, false, "masters 2 partitions, holds 1 copy"},
		{"copies only", api.ClusterAnswer{View: cluster.View{Node: "a"}, Partitions: summary(0, map[string]int{"a": 8}, map[string]int{"x": 3})}, false, "masters 0 partitions, holds 3 copies"},
		{"moves still listed", api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: summary(0, map[string]int{"a": 8}, nil), Moves: []api.MoveStatus{{Partition: 1}}},
			false, "masters 0 partitions, holds 0 copies, 1 partition moving from it"},
		{"partitions without a master", api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: summary(8, nil, nil)}, false, "(8 partitions without a master in x's table)"},
		{"writes no later master checked", api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: &api.PartitionSummary{Count: 8, Masters: map[string]int{"a": 8},
			Unreconciled: map[string]int{"x": 1}}}, false, "masters 0 partitions, holds 0 copies, holds writes of its own no later master has checked in 1 partition"},
		{"no partition counts", api.ClusterAnswer{View: cluster.View{Node: "x"}}, false, "x gives no partition counts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, got := drainedIn(tc.st, "x")
			if done != tc.done || !strings.Contains(got, tc.want) {
				t.Fatalf("drainedIn = %v, %q; want %v, %q", done, got, tc.done, tc.want)
			}
		})
	}
}

// drainAnswers gives a node's GET /v1/cluster answers in turn (the last one
// again and again), counting the questions; the first unanswered
// questions get no answer.
type drainAnswers struct {
	mu         sync.Mutex
	unanswered int
	answers    []api.ClusterAnswer
	asked      int
}

func (d *drainAnswers) next() (api.ClusterAnswer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	if d.asked <= d.unanswered {
		return api.ClusterAnswer{}, errors.New("connection refused")
	}
	return d.answers[min(d.asked-d.unanswered-1, len(d.answers)-1)], nil
}

func (d *drainAnswers) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

// askNodes is an AskCluster over the nodes at the urls in nodes; any other
// url does not answer, the way cmd/shoal's asker words a refused connection.
func askNodes(nodes map[string]*drainAnswers) AskCluster {
	return func(ctx context.Context, base string) (api.ClusterAnswer, error) {
		d, ok := nodes[base]
		if !ok {
			return api.ClusterAnswer{}, errors.New("connection refused")
		}
		return d.next()
	}
}

func TestWatchDrain(t *testing.T) {
	partitions := func(masters, copies map[string]int) *api.PartitionSummary {
		return &api.PartitionSummary{Count: 4, Masters: masters, Copies: copies}
	}
	var (
		holding = api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: partitions(map[string]int{"a": 3, "x": 1}, map[string]int{"x": 2})}
		empty   = api.ClusterAnswer{View: cluster.View{Node: "x"}, Partitions: partitions(map[string]int{"a": 4}, nil)}
		other   = api.ClusterAnswer{View: cluster.View{Node: "a"}, Partitions: partitions(map[string]int{"a": 4}, nil)}
	)
	newSup := func(nodes map[string]*drainAnswers) (*Supervisor, *watchedOutput) {
		out := newWatchedOutput()
		s := NewSupervisor(Setup{AdminToken: "tok"}, nil, askNodes(nodes), out)
		s.watchInterval = time.Millisecond
		return s, out
	}
	watch := func(t *testing.T, s *Supervisor, c *child, others []string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go s.watchDrain(ctx, c, others)
		select {
		case got := <-s.drained:
			if got != c {
				t.Fatalf("drained %v, want %v", got.ID, c.ID)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the drain was not seen")
		}
	}

	t.Run("its own answer", func(t *testing.T) {
		answers := &drainAnswers{answers: []api.ClusterAnswer{holding, holding, holding, empty}}
		s, out := newSup(map[string]*drainAnswers{"http://x": answers})
		c := &child{Node: Node{Peer: cluster.Peer{ID: "x", URL: "http://x"}}, done: make(chan struct{})}
		watch(t, s, c, nil)
		if n := answers.count(); n != 4 {
			t.Errorf("asked %d times, want 4", n)
		}
		if !strings.Contains(out.String(), "x drains: masters 1 partition, holds 2 copies") {
			t.Errorf("no progress logged:\n%s", out.String())
		}
	})

	// Only the node itself knows whether it holds writes of its own no
	// later master has checked (api.PartitionSummary.Unreconciled) and
	// what moves from it: the others' tables say neither. While it does
	// not answer (paused, or too busy) it is not stopped, whatever they
	// say; the progress logged says what they say.
	t.Run("not while it does not answer, whatever the others say", func(t *testing.T) {
		self := &drainAnswers{unanswered: 3, answers: []api.ClusterAnswer{empty}}
		a := &drainAnswers{answers: []api.ClusterAnswer{other}}
		s, out := newSup(map[string]*drainAnswers{
			"http://x":     self,
			"http://stale": {answers: []api.ClusterAnswer{holding}}, // says x still holds copies
			"http://a":     a,
		})
		c := &child{Node: Node{Peer: cluster.Peer{ID: "x", URL: "http://x"}}, done: make(chan struct{})}
		watch(t, s, c, []string{"http://stale", "http://a"})
		if n := self.count(); n != 4 {
			t.Errorf("asked the node %d times, want 4 (three unanswered, then its own answer that it holds nothing)", n)
		}
		if n := a.count(); n != 3 {
			t.Errorf("asked the other node %d times, want 3 (once for each question the node did not answer)", n)
		}
		if !strings.Contains(out.String(), "x drains: cannot ask it how far it is (connection refused); x says it masters 1 partition, holds 2 copies; a says it holds nothing") {
			t.Errorf("progress:\n%s", out.String())
		}
	})

	t.Run("ends when the node exits", func(t *testing.T) {
		s, _ := newSup(map[string]*drainAnswers{"http://x": {answers: []api.ClusterAnswer{holding}}})
		c := &child{Node: Node{Peer: cluster.Peer{ID: "x", URL: "http://x"}}, done: make(chan struct{})}
		ended := make(chan struct{})
		go func() { s.watchDrain(context.Background(), c, nil); close(ended) }()
		close(c.done)
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatal("the watch did not end with its node")
		}
	})
}

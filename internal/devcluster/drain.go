package devcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/wording"
)

// drainLogEvery is how often the progress of a drain is logged.
const drainLogEvery = 10 * time.Second

// AskCluster asks the node at baseURL for its GET /v1/cluster answer
// (client.Client.Cluster); the drain watch reads the answering node, its
// partition counts (nil when it gives none) and the partitions moving from
// it. The error's text is logged as it is, so it says in a few words why
// the node did not answer ("connection refused").
type AskCluster func(ctx context.Context, baseURL string) (api.ClusterAnswer, error)

// listedURLs are the urls of the peers in the peer list, in id order.
func (s *Supervisor) listedURLs() []string {
	var urls []string
	for _, p := range s.peersList.Peers {
		urls = append(urls, p.URL)
	}
	return urls
}

// watchDrain polls GET /v1/cluster of c, a node out of the peer list, until
// it says it holds nothing, and then hands it to Run's goroutine. When c
// does not answer, the nodes at others are asked about it for the progress
// logged, every drainLogEvery.
func (s *Supervisor) watchDrain(ctx context.Context, c *child, others []string) {
	var logged time.Time
	for {
		done, progress := s.drainState(ctx, c, others)
		if done {
			select {
			case s.drained <- c:
			case <-ctx.Done():
			}
			return
		}
		if now := time.Now(); now.Sub(logged) >= drainLogEvery && ctx.Err() == nil {
			logged = now
			s.Logf("%s drains: %s", c.ID, progress)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-time.After(s.watchInterval): // polling another process: nothing to wait on
		}
	}
}

// drainState asks c whether it holds nothing any more, and says how far
// it is otherwise. Only c's own answer can say it is drained: the writes
// of its own no later master has checked yet
// (api.PartitionSummary.Unreconciled), and the partitions moving from it,
// are in no other node's answer, and until they are checked or moved its
// copy may be their only place. When c does not answer (paused, or too
// busy), what the nodes at others say of it is the progress.
func (s *Supervisor) drainState(ctx context.Context, c *child, others []string) (bool, string) {
	st, err := s.ask(ctx, c.URL)
	if err == nil {
		return drainedIn(st, c.ID)
	}
	progress := fmt.Sprintf("cannot ask it how far it is (%v)", err)
	for _, u := range others {
		if st, err := s.ask(ctx, u); err == nil {
			_, p := drainedIn(st, c.ID)
			progress += "; " + st.Node + " says it " + p
		}
	}
	return false, progress
}

// drainedIn reports whether the answer st of GET /v1/cluster shows the node
// id holding nothing: st's partition table gives every partition a master
// (a partition without one may yet need the copy id holds), and in it id
// masters none and holds no copy; when st is id's own answer, nothing moves
// from it either, and no writes of its own wait for a later master's check
// (api.PartitionSummary.Unreconciled). Otherwise it says what id still
// holds.
func drainedIn(st api.ClusterAnswer, id string) (bool, string) {
	ps := st.Partitions
	if ps == nil {
		return false, wording.OrDash(st.Node) + " gives no partition counts"
	}
	masters, held := ps.Masters[id], ps.Copies[id]
	moving := 0
	if st.Node == id {
		moving = len(st.Moves)
	}
	if done, why := ps.HoldsNothing(id, moving); done {
		return true, why
	}
	progress := fmt.Sprintf("masters %s, holds %s", wording.Plural(masters, "partition"), wording.Copies(held))
	if n := ps.Unreconciled[id]; n > 0 {
		progress += fmt.Sprintf(", holds writes of its own no later master has checked in %s", wording.Plural(n, "partition"))
	}
	if moving > 0 {
		progress += fmt.Sprintf(", %s moving from it", wording.Plural(moving, "partition"))
	}
	if ps.WithoutMaster > 0 {
		progress += fmt.Sprintf(" (%d partitions without a master in %s's table)", ps.WithoutMaster, wording.OrDash(st.Node))
	}
	return false, progress
}

// stopDrained stops c, out of the peer list and holding nothing, with
// SIGTERM, and SIGKILLs it if it does not stop within the stop timeout.
func (s *Supervisor) stopDrained(ctx context.Context, c *child, waiters *sync.WaitGroup) {
	if c.stopDrain != nil {
		c.stopDrain()
		c.stopDrain = nil
	}
	if _, listed := s.peersList.Get(c.ID); listed || isDone(c) || s.children[c.ID] != c {
		return
	}
	c.drained = true
	s.Logf("%s drained: it masters no partition and holds no copy; stopping it (SIGTERM to pid %d); its data stays in %s",
		c.ID, c.proc.Pid(), filepath.Join(s.setup.Dir, c.ID))
	c.proc.Terminate()
	waiters.Go(func() {
		select {
		case <-c.done:
		case <-ctx.Done(): // stop() takes over
		case <-time.After(s.stopTimeout):
			s.Logf("%s did not stop within %s: killing it (SIGKILL)", c.ID, s.stopTimeout)
			c.proc.Kill()
		}
	})
}

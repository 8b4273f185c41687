package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/placement"
)

// A former master may hold, in its copy of a partition, w=1 writes it
// acknowledged while cut off that no later master ever had; the first
// batch of a later tenure it answers moves them to its rollback
// collection (store.Writer's divergence check). A node that was down past
// REPLICA_REPLACE_AFTER is in no responsible list when it comes back, so
// no master would send it that batch: it asks the partition's master to
// check its copy (askForChecks, placement.ShouldAskCheck), and the master
// keeps it as an extra copy until it has answered a batch of its tenure
// (copyChecks, placement.WithCopiesToCheck in chooseReplicas).

// checkAskedFor is how long, in LEASE_TTLs, a master remembers a node's
// request to check its copy: the node asks again about every LEASE_TTL
// while its copy is unreconciled and the master is reachable.
const checkAskedFor = 5

// copyChecks are the requests a master was sent to check nodes' copies:
// partition, node, when last asked.
type copyChecks struct {
	mu    sync.Mutex
	asked map[int]map[string]time.Time
}

// ask records that node asked at now to have its copy of partition p
// checked.
func (c *copyChecks) ask(p int, node string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asked == nil {
		c.asked = map[int]map[string]time.Time{}
	}
	if c.asked[p] == nil {
		c.asked[p] = map[string]time.Time{}
	}
	c.asked[p][node] = now
}

// asking lists, in order, the nodes that asked to have their copy of p
// checked within ttl before now, and forgets the others.
func (c *copyChecks) asking(p int, now time.Time, ttl time.Duration) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for node, at := range c.asked[p] {
		if now.Sub(at) > ttl {
			delete(c.asked[p], node)
			continue
		}
		out = append(out, node)
	}
	if len(c.asked[p]) == 0 {
		delete(c.asked, p)
	}
	slices.Sort(out)
	return out
}

// done forgets the requests of nodes whose copy of p was checked.
func (c *copyChecks) done(p int, nodes []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, node := range nodes {
		delete(c.asked[p], node)
	}
	if len(c.asked[p]) == 0 {
		delete(c.asked, p)
	}
}

// checkCopy is a master's side of a copy check: node asked to have its
// copy of partition p checked. It returns this node's epoch.
func (n *Node) checkCopy(p int, node string) (uint64, error) {
	epoch, ok := n.leases.Holds(p)
	switch {
	case node == "" || node == n.cfg.NodeID:
		return 0, fmt.Errorf("no node to check the copy of (%q)", node)
	case !ok:
		return 0, fmt.Errorf("this node does not master partition %d", p)
	}
	n.checks.ask(p, node, time.Now())
	return epoch, nil
}

// askForChecks asks, about every LEASE_TTL per partition, the master of
// each partition whose copy here is unreconciled to check this copy, so
// that its first batch of the new tenure moves the writes of this node's
// own last tenure that the master never had to the rollback collection.
// It runs until ctx ends.
func (n *Node) askForChecks(ctx context.Context) {
	tick := time.NewTicker(max(n.cfg.LeaseTTL/3, 50*time.Millisecond))
	defer tick.Stop()
	next := map[int]time.Time{} // partition: not asked again before
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		unreconciled := n.unreconciled()
		for p := range next {
			if !slices.Contains(unreconciled, p) {
				delete(next, p)
			}
		}
		if len(unreconciled) == 0 {
			continue
		}
		states := n.cluster.States()
		for _, p := range unreconciled {
			a := n.table.Get(p)
			if time.Now().Before(next[p]) || !placement.ShouldAskCheck(n.cfg.NodeID, n.writer.Tenure(p), a, states[a.Master] == cluster.Up) {
				continue
			}
			first := next[p].IsZero()
			next[p] = time.Now().Add(n.cfg.LeaseTTL)
			cctx, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL)
			var out api.CheckCopyAnswer
			err := callPeer(cctx, n.cluster, "master", a.Master, "/internal/v1/check-copy", api.CheckCopyRequest{Partition: p}, &out)
			cancel()
			switch {
			case err == nil:
				failing = false
				if !first {
					break
				}
				n.log.Info("asked a partition's master to check this node's copy, which holds writes of its own last tenure that no later master has checked",
					"partition", p, "master", a.Master, "epoch", out.Epoch, "tenure", n.writer.Tenure(p))
			case ctx.Err() != nil:
				return
			case !failing:
				failing = true
				n.log.Warn("could not ask a partition's master to check this node's copy; asking again every LEASE_TTL, logged once until a request succeeds",
					"partition", p, "master", a.Master, "err", err)
			}
		}
	}
}

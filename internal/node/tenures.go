package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/shoal-db/shoal/store"
)

// startTenures starts each tenure of this node as soon as it takes writes
// (writable: the lease held, a tenure won by the promotion rule
// confirmed), instead of at its first write: a new master holding
// documents beyond its tenure's start carries them into the tenure and
// ships them (store.Writer.StartTenure) even if nobody writes to the
// partition, so its replicas converge on its copy. A tenure with nothing
// to carry stores nothing. It runs until ctx ends, woken when a tenure may
// have become writable (wakeTenures) and every tick. Each partition has at
// most one start under way, on a goroutine of its own (a carry waits for
// the partition's writer, which may be busy or paused, and must not hold
// up the others); one that failed is tried again at the next round, and a
// burst of failures is logged once.
func (n *Node) startTenures(ctx context.Context) {
	tick := time.NewTicker(max(n.cfg.LeaseTTL/3, 50*time.Millisecond))
	defer tick.Stop()
	type outcome struct {
		partition int
		epoch     uint64
		err       error
	}
	done := make(chan outcome)
	var starts sync.WaitGroup
	defer starts.Wait()
	started := map[int]uint64{} // partition: the epoch of the tenure started
	underway := map[int]bool{}
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-done:
			delete(underway, o.partition)
			switch {
			case o.err == nil:
				started[o.partition] = o.epoch
				failing = false
			case ctx.Err() != nil, errors.Is(o.err, store.ErrNotMaster):
				// The node is stopping, or the tenure ended meanwhile (or
				// is fenced): nothing to start.
			case !failing:
				failing = true
				n.log.Warn("could not start a tenure (carry the documents held beyond its start into it); retrying every round, logged once until a start succeeds",
					"partition", o.partition, "epoch", o.epoch, "err", o.err)
			}
			continue
		case <-tick.C:
		case <-n.tenureWake:
		}
		for p := 0; p < n.cfg.PartitionCount; p++ {
			epoch, ok := n.writable(p)
			if !ok {
				delete(started, p)
				continue
			}
			if started[p] == epoch || underway[p] {
				continue
			}
			underway[p] = true
			starts.Add(1)
			go func() {
				defer starts.Done()
				o := outcome{partition: p, epoch: epoch, err: n.writer.StartTenure(ctx, p, epoch)}
				select {
				case done <- o:
				case <-ctx.Done():
				}
			}()
		}
	}
}

// wakeTenures has startTenures look at once for tenures that became
// writable. It never blocks: lease and promotion callbacks call it.
func (n *Node) wakeTenures() {
	select {
	case n.tenureWake <- struct{}{}:
	default:
	}
}

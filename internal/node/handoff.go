package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// Handoff tuning.
const (
	// handoffShipTimeout bounds the wait for the last changes to reach the
	// receiver; past it the handoff is abandoned and writes resume here.
	handoffShipTimeout = 2 * time.Second
)

// handoffs moves the lease of a partition this node masters to its
// preferred master, once that node holds a copy and is nearly caught up:
// writes to the partition pause here, the last changes ship, the lease is
// released on the voters, and the receiver campaigns at once (epoch + 1).
// Requests for a partition being handed off wait (see api.Handoffs).
type handoffs struct {
	*handoffDeps

	mu       sync.Mutex
	active   map[int]chan struct{}  // closed when the handoff of the partition ends
	incoming map[int]int            // partitions being handed to this node (TakeOver calls in progress)
	handed   map[int]store.Position // partitions this node handed over, and up to where
	retryAt  map[int]time.Time      // an abandoned handoff is not tried again before
}

// handoffDeps is what handoffs uses of its node (built by StartWith).
type handoffDeps struct {
	self string // NODE_ID
	// incarnation is this process's (cluster.Cluster.Incarnation).
	incarnation int64
	partitions  int           // PARTITION_COUNT
	leaseTTL    time.Duration // LEASE_TTL
	maxMoves    int           // MAX_CONCURRENT_MOVES
	log         *slog.Logger

	leases  handoffLeases
	writer  handoffWriter
	shipper handoffShipper
	table   *shard.Table
	peers   peers
	ring    func() *shard.Ring // the ring in force (peerRing.Ring)
	// observe counts a handoff done or abandoned, and how long writes
	// paused (api.Metrics.ObserveHandoff).
	observe func(paused time.Duration, done bool)

	// The node's own rules (Node.writable, Node.caughtUp,
	// Node.masterChanged).
	writable      func(p int) (epoch uint64, ok bool)
	caughtUp      func(p int, replicas []string) bool
	masterChanged func(p int, holder string, epoch uint64)
	// stopping reports that the node is shutting down (Node.Close began):
	// it takes no lease, so it refuses a handoff at once.
	stopping func() bool
}

// handoffLeases is the lease manager as handoffs uses it (lease.Manager).
type handoffLeases interface {
	Holds(p int) (uint64, bool)
	Release(ctx context.Context, p int) bool
	Acquire(ctx context.Context, p int) (uint64, error)
}

// handoffWriter is the partition writer as handoffs uses it (store.Writer).
type handoffWriter interface {
	Applied(p int) store.Position
	Recopying(p int) bool
	Untouched(p int) bool
	Position(p int) store.Position
	Pause(ctx context.Context, p int) (resume func(), err error)
}

// handoffShipper is the shipper as handoffs uses it (replicate.Shipper).
type handoffShipper interface {
	WaitReplicated(ctx context.Context, p int, pos store.Position, replicas func() []string, need int) (int, error)
	Lags() []replicate.Lag
}

func newHandoffs(deps *handoffDeps) *handoffs {
	return &handoffs{handoffDeps: deps, active: map[int]chan struct{}{}, incoming: map[int]int{}, handed: map[int]store.Position{}, retryAt: map[int]time.Time{}}
}

// receiving reports whether a handoff of p to this node is in progress.
func (h *handoffs) receiving(p int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.incoming[p] > 0
}

// inProgress reports whether a handoff of p is running here.
func (h *handoffs) inProgress(p int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.active[p] != nil
}

// Wait returns once no handoff of p is in progress, ctx ends or max has
// passed.
func (h *handoffs) Wait(ctx context.Context, p int, max time.Duration) {
	h.mu.Lock()
	done := h.active[p]
	h.mu.Unlock()
	if done == nil {
		return // the common case: no timer made for every request
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// start registers a handoff of p; false if one runs already or too many do.
func (h *handoffs) start(p int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.active[p] != nil || len(h.active) >= h.maxMoves || time.Now().Before(h.retryAt[p]) {
		return false
	}
	h.active[p] = make(chan struct{})
	return true
}

func (h *handoffs) finish(p int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if done := h.active[p]; done != nil {
		close(done)
		delete(h.active, p)
	}
}

// due lists the partitions this node masters that should move now: their
// preferred master is another node, UP, in the responsible list (it holds
// a copy) and at most placement.MaxBehind changes behind.
func (h *handoffs) due() map[int]string {
	ring := h.ring()
	if ring == nil {
		return nil
	}
	states := h.peers.States()
	out := map[int]string{}
	for p := 0; p < h.partitions; p++ {
		if _, ok := h.writable(p); !ok {
			continue
		}
		owner := ring.Owner(p)
		if owner == h.self || states[owner] != cluster.Up || !slices.Contains(h.table.Get(p).Responsible, owner) {
			continue
		}
		if !h.caughtUp(p, []string{owner}) {
			continue
		}
		out[p] = owner
	}
	return out
}

// run starts the handoffs that are due, every tick, until ctx ends.
func (h *handoffs) run(ctx context.Context) {
	tick := time.NewTicker(max(h.leaseTTL/6, 50*time.Millisecond))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for p, to := range h.due() {
			if !h.start(p) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer h.finish(p)
				if err := h.handOff(ctx, p, to); err != nil {
					// Each try pauses the partition's writes (and one whose
					// receiver failed leaves it without a master for a
					// while): back off.
					h.mu.Lock()
					h.retryAt[p] = time.Now().Add(2 * h.leaseTTL)
					h.mu.Unlock()
					h.observe(0, false)
					h.log.Warn("handoff abandoned; writes resume here and it is tried again", "partition", p, "to", to, "err", err)
				}
			}()
		}
	}
}

// handOff moves partition p's lease to node to.
func (h *handoffs) handOff(ctx context.Context, p int, to string) error {
	began := time.Now()
	pauseCtx, cancel := context.WithTimeout(ctx, h.leaseTTL)
	resume, err := h.writer.Pause(pauseCtx, p)
	cancel()
	if err != nil {
		return fmt.Errorf("pausing writes: %w", err)
	}
	defer resume()
	if _, ok := h.leases.Holds(p); !ok {
		return nil // the lease ran out meanwhile: nothing to hand over
	}
	last := h.writer.Position(p)
	shipCtx, cancel := context.WithTimeout(ctx, handoffShipTimeout)
	_, err = h.shipper.WaitReplicated(shipCtx, p, last, func() []string { return []string{to} }, 1)
	cancel()
	if err != nil {
		return fmt.Errorf("%s did not acknowledge the last changes (up to %s): %w", to, last, err)
	}
	if !h.leases.Release(ctx, p) {
		return nil
	}
	h.mu.Lock()
	h.handed[p] = last
	h.mu.Unlock()
	// From here the partition has no master until to takes it: tell it.
	a, err := h.requestTakeOver(ctx, to, p, last)
	paused := time.Since(began)
	if err != nil {
		// to may still have taken the lease. If it did not, the partition
		// has no master: once the release is a LEASE_TTL old, the voters
		// count this node's tenure as over and the promotion rule has the
		// most current copy (this node or a caught-up replica) campaign.
		return fmt.Errorf("%s did not confirm it took the lease (if it did not, the most current copy campaigns after LEASE_TTL): %w", to, err)
	}
	h.observe(paused, true)
	h.table.Merge(a)
	h.log.Info("handed partition over", "partition", p, "to", to, "epoch", a.Epoch, "writes_paused", paused)
	return nil
}

// requestTakeOver asks to to take p's lease now.
func (h *handoffs) requestTakeOver(ctx context.Context, to string, p int, from store.Position) (shard.Assignment, error) {
	ctx, cancel := context.WithTimeout(ctx, h.leaseTTL)
	defer cancel()
	var a shard.Assignment
	err := callPeer(ctx, h.peers, "node", to, "/internal/v1/takeover", api.TakeOverRequest{Partition: p, From: from}, &a)
	return a, err
}

// TakeOver is the receiving side of a handoff: campaign for p now.
func (h *handoffs) TakeOver(ctx context.Context, p int, from store.Position) (shard.Assignment, error) {
	// A node shutting down takes no lease (placement.WantInput.Stopping):
	// its campaign would spin until LEASE_TTL while the sender, its lease
	// released, waits with the partition's writes paused.
	if h.stopping != nil && h.stopping() {
		return shard.Assignment{}, fmt.Errorf("node %s is shutting down: it takes no partition", h.self)
	}
	// A copy awaiting a full copy holds nothing that counts, whatever
	// position a full copy cut short left (its position is zero).
	if have := h.position(p).Position; have.Compare(from) < 0 {
		return shard.Assignment{}, fmt.Errorf("node %s holds partition %d up to %s, not %s", h.self, p, have, from)
	}
	h.mu.Lock()
	h.incoming[p]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.incoming[p]--; h.incoming[p] == 0 {
			delete(h.incoming, p)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, h.leaseTTL)
	defer cancel()
	epoch, err := h.leases.Acquire(ctx, p)
	if err != nil {
		return shard.Assignment{}, err
	}
	h.masterChanged(p, h.self, epoch)
	return h.table.Get(p), nil
}

// HandedOver reports whether this node's last tenure of p ended with a
// handoff that carried its history up to pos: a position of that tenure
// (a write of an older tenure of this node may have been rolled back
// since, whatever its position).
func (h *handoffs) HandedOver(p int, pos store.Position) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.handed[p]
	return ok && pos.Epoch == at.Epoch && pos.Compare(at) <= 0
}

// Positions is how far this node holds each partition's history.
func (h *handoffs) Positions(ps []int) map[int]api.PositionAnswer {
	out := make(map[int]api.PositionAnswer, len(ps))
	for _, p := range ps {
		out[p] = h.position(p)
	}
	return out
}

// position is how far this node holds partition p's history.
func (h *handoffs) position(p int) api.PositionAnswer {
	if !h.writer.Recopying(p) {
		return api.PositionAnswer{Position: h.writer.Applied(p)}
	}
	// Its position may be one a full copy cut short left: it holds
	// nothing that counts.
	a := api.PositionAnswer{Partial: true}
	if h.writer.Untouched(p) {
		a.Incarnation = h.incarnation
	}
	return a
}

// Moves lists the partitions moving from this node: those it masters whose
// preferred master is another node that is in the responsible list (being
// copied the partition, catching up, or being handed it).
func (h *handoffs) Moves() []api.MoveStatus {
	ring := h.ring()
	if ring == nil {
		return nil
	}
	type key struct {
		replica   string
		partition int
	}
	lags := map[key]replicate.Lag{}
	for _, l := range h.shipper.Lags() {
		lags[key{l.Replica, l.Partition}] = l
	}
	var out []api.MoveStatus
	for p := 0; p < h.partitions; p++ {
		if _, ok := h.leases.Holds(p); !ok {
			continue
		}
		owner := ring.Owner(p)
		if owner == h.self || !slices.Contains(h.table.Get(p).Responsible, owner) {
			continue
		}
		m := api.MoveStatus{Partition: p, From: h.self, To: owner, Phase: "catching-up"}
		l, known := lags[key{owner, p}]
		switch {
		case h.inProgress(p):
			m.Phase = "handing-over"
		case !known || l.Copying || l.CatchUp:
			m.Phase = "copying"
		case h.caughtUp(p, []string{owner}):
			m.Phase = "ready" // waits for a free handoff slot (MAX_CONCURRENT_MOVES)
		}
		m.DocumentsCopied, m.DocumentsTotal, m.Behind = l.Copied, l.ToCopy, l.Behind
		out = append(out, m)
	}
	return out
}

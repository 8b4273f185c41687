package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/store"
)

// Read concerns: what a read promises about the state it returns. The
// names and meanings follow MongoDB's.
const (
	headerReadConcern = "X-Read-Concern"
	// ConcernLocal (the default) returns the serving copy's newest state:
	// the master's may include a write that a failover later rolls back,
	// and a read that fails over to a replica may get an older state.
	ConcernLocal = "local"
	// ConcernMajority returns only states that a majority of the
	// partition's copies hold, which no failover rolls back. It may be
	// older than the newest acknowledged write when a replica serves it.
	ConcernMajority = "majority"
	// ConcernLinearizable returns the newest majority-held state, served
	// by the lease holder, which checks after the read that it still
	// holds the lease: the read reflects every write acknowledged with
	// write concern majority before it began. It never fails over to a
	// replica.
	ConcernLinearizable = "linearizable"
)

// headerReadFrom marks the forwarded try of a read that is aimed at the
// partition's master: a node that does not hold the lease answers it 421
// with the master it knows, instead of serving its copy as if it were the
// master's (the stale read after a handoff). Like every X-Shoal-* header,
// only a signed forward keeps it.
const headerReadFrom = "X-Shoal-Read-From"

// concernWait bounds how long a majority or linearizable read waits, on
// the master, for a majority of the partition's copies to hold the state
// it read.
const concernWait = time.Second

// readConcern is the request's X-Read-Concern ("" counts as local).
func readConcern(r *http.Request) (string, *Problem) {
	switch c := r.Header.Get(headerReadConcern); c {
	case "", ConcernLocal:
		return ConcernLocal, nil
	case ConcernMajority, ConcernLinearizable:
		return c, nil
	default:
		return "", badRequest(TypeInvalidHeader, fmt.Sprintf("X-Read-Concern %q: use local, majority or linearizable", logsafe.ClipTo(c, 64)))
	}
}

// readPosition is where a read handler notes the position of the state
// it answered with, when it knows it (a document or a tombstone).
type readPosition struct {
	pos   store.Position
	known bool
}

type readPositionKey struct{}

// noteReadPosition records, for a majority or linearizable read, the
// position of the state the handler answers with.
func noteReadPosition(r *http.Request, pos store.Position) {
	if rp, ok := r.Context().Value(readPositionKey{}).(*readPosition); ok {
		rp.pos, rp.known = pos, true
	}
}

// heldAnswer is a handler's answer kept back until the read concern
// allows it out.
type heldAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *heldAnswer) Header() http.Header { return a.header }
func (a *heldAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}
func (a *heldAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

// release writes the held answer to w.
func (a *heldAnswer) release(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	if a.status == 0 {
		a.status = http.StatusOK
	}
	w.WriteHeader(a.status)
	w.Write(a.body.Bytes())
}

// serveConcern answers r from this node's copy under concern. asMaster:
// the read must be served as the partition's master (a linearizable read,
// or a try aimed at the master); it reports readNotMaster, having written
// nothing, when this node does not hold the lease at the start and at the
// end of the read (at the same epoch). A local read is served as it is;
// majority and linearizable ones are held until the state they read is
// known to be on a majority of the partition's copies: on the master, by
// waiting (up to concernWait) for the replicas' acknowledgements; on a
// replica, by the committed position the master shipped (readNotCommitted,
// having written nothing, when the state is newer: the router tries
// another copy).
func (s *Server) serveConcern(w http.ResponseWriter, r *http.Request, partition int, concern string, asMaster bool, local http.HandlerFunc) readOutcome {
	epoch, master := s.leaseEpoch(partition)
	if asMaster && !master {
		return readNotMaster
	}
	if concern == ConcernLinearizable {
		var confirmed bool
		if epoch, confirmed = s.servingEpoch(partition); !confirmed {
			s.metrics.observeStrongRead(concern, "unconfirmed")
			return readUnconfirmed
		}
	}
	if concern == ConcernLocal {
		local(w, r)
		return readAnswered
	}
	held := &heldAnswer{header: http.Header{}}
	rp := &readPosition{}
	local(held, r.WithContext(context.WithValue(r.Context(), readPositionKey{}, rp)))
	if held.status >= 500 {
		held.release(w) // an error tells nothing of the data
		return readAnswered
	}
	pos := rp.pos
	if !rp.known {
		// A query, a listing or a missing document: whatever it saw is
		// at or before this.
		pos = s.writer.Visible(partition)
	}
	if !master {
		committed := store.Position{}
		if s.cfg.Committed != nil {
			committed = s.cfg.Committed(partition)
		}
		if pos.Compare(committed) > 0 {
			s.metrics.observeStrongRead(concern, "not_committed")
			return readNotCommitted
		}
		s.metrics.observeStrongRead(concern, "served")
		held.release(w)
		return readAnswered
	}
	began := time.Now()
	prob := s.awaitMajority(r.Context(), partition, pos)
	s.metrics.majorityWait.Observe(time.Since(began).Seconds())
	if prob != nil {
		if e, ok := s.leaseEpoch(partition); asMaster && (!ok || e != epoch) {
			s.metrics.observeStrongRead(concern, "not_master")
			return readNotMaster
		}
		s.metrics.observeStrongRead(concern, "timeout")
		writeProblem(w, prob)
		return readAnswered
	}
	if concern == ConcernLinearizable {
		// The state read was the newest while the lease was held from
		// before the read to now: no other master can have written.
		if e, ok := s.servingEpoch(partition); !ok || e != epoch {
			s.metrics.observeStrongRead(concern, "not_master")
			return readNotMaster
		}
	}
	s.metrics.observeStrongRead(concern, "served")
	held.release(w)
	return readAnswered
}

// Confirmer is what a lease holder may add to Leases: whether its tenure
// of a partition is confirmed. A tenure won by the promotion rule holds
// the lease before it has asked the other copies again whether one is
// ahead of it (see internal/node); until then its writer refuses writes,
// and its copy may lack the newest acknowledged ones.
type Confirmer interface {
	// Writable reports whether this node holds the partition's lease in a
	// confirmed tenure, and at which epoch.
	Writable(partition int) (epoch uint64, ok bool)
}

// servingEpoch is the epoch at which this node may serve the partition's
// newest state: a held lease whose tenure is confirmed.
func (s *Server) servingEpoch(partition int) (uint64, bool) {
	if c, ok := s.cfg.Leases.(Confirmer); ok && s.clustered() {
		return c.Writable(partition)
	}
	return s.leaseEpoch(partition)
}

// leaseEpoch is Holds for a clustered node; a node of its own always holds.
func (s *Server) leaseEpoch(partition int) (uint64, bool) {
	if !s.clustered() {
		return 0, true
	}
	return s.cfg.Leases.Holds(partition)
}

// awaitMajority waits, on the master, until the partition's
// majority-committed position reaches pos: a majority of its copies
// (master included, counted as write concern majority counts them) hold
// pos and a position of this tenure's epoch at or after it, so that no
// promotion can roll it back. It answers 503 with Retry-After when that
// takes longer than concernWait.
func (s *Server) awaitMajority(ctx context.Context, partition int, pos store.Position) *Problem {
	total, need := s.copiesFor(ConcernMajority)
	if need <= 0 {
		return nil
	}
	if s.cfg.Replication == nil {
		return unavailable(fmt.Sprintf("partition %d should have %d copies but this node replicates to no one: no state is on a majority of copies", partition, total))
	}
	ctx, cancel := context.WithTimeout(ctx, concernWait)
	defer cancel()
	if err := s.markTenure(ctx, partition); err != nil {
		return unavailable(fmt.Sprintf("partition %d: the new master's tenure marker could not be written (%v); retry shortly, or read with X-Read-Concern: local", partition, err))
	}
	held, err := s.cfg.Replication.WaitMajorityHeld(ctx, partition, pos)
	if err != nil {
		return unavailable(fmt.Sprintf("the state read (position %s) of partition %d is not known to be on a majority of its %d copies (majority-committed up to %s) after %s; retry, or read with X-Read-Concern: local",
			pos, partition, total, held, concernWait))
	}
	return nil
}

// markTenure writes the tenure marker (store.TenureUser) of partition if
// this node masters it and has written nothing at its epoch yet: only a
// position of the current epoch establishes the majority-committed
// position (see replicate.Shipper.MajorityHeld), so without a write the
// states a new master inherited would never count as majority-held.
// Concurrent reads share one write.
func (s *Server) markTenure(ctx context.Context, partition int) error {
	epoch, ok := s.leaseEpoch(partition)
	if !ok || !s.clustered() || s.writer.Position(partition).Epoch >= epoch {
		return nil
	}
	s.markMu.Lock()
	done, busy := s.marking[partition]
	if !busy {
		done = make(chan struct{})
		s.marking[partition] = done
	}
	s.markMu.Unlock()
	if busy {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() {
		s.markMu.Lock()
		delete(s.marking, partition)
		s.markMu.Unlock()
		close(done)
	}()
	if s.writer.Position(partition).Epoch >= epoch {
		return nil
	}
	res := s.writer.Do(ctx, store.Op{Partition: partition, User: store.TenureUser, Coll: store.TenureColl, ID: store.TenureID,
		Mutate: func(*store.Doc) (store.Next, error) {
			return store.Next{Body: map[string]any{"epoch": int64(epoch), "node": s.cfg.NodeID}, Size: 64}, nil
		}})
	if res.Err != nil {
		s.log.Warn("could not write the tenure marker", "partition", partition, "epoch", epoch, "err", clipError(res.Err))
		return res.Err
	}
	s.metrics.tenureMarkers.Inc()
	s.log.Debug("tenure marker written", "partition", partition, "epoch", epoch, "position", res.Doc.Pos)
	return nil
}

// comparison is what a conditional write (If-Match, or the existence a
// POST, PATCH or DELETE needs) compared against: the document's state on
// the master when its change was decided.
type comparison struct {
	s         *Server
	partition int
	strong    bool   // the write asked for write concern majority or all
	epoch     uint64 // the lease epoch before the write
	pos       store.Position
	seen      bool // pos is the state's own (else: the partition's Visible)
}

// compareFor starts the comparison of a write of r to partition.
func (s *Server) compareFor(r *http.Request, partition int) *comparison {
	wc := r.Header.Get("X-Write-Concern")
	c := &comparison{s: s, partition: partition, strong: wc == "majority" || wc == "all"}
	c.epoch, _ = s.leaseEpoch(partition)
	return c
}

// saw records the state the write's Mutate was handed (nil: no record).
func (c *comparison) saw(cur *store.Doc) {
	if cur != nil {
		c.pos, c.seen = cur.Pos, true
	}
}

// settle is the answer to a write refused by the state it compared
// against (412, 409, 404), when the write asked for write concern majority
// or all: nil once that state is majority-held and this node still holds
// the lease at the epoch the write began at, as a linearizable read would
// have to. Answered at once, a refusal could rest on a write that a
// failover then rolls back: a compare-and-set refused against version 23,
// and the next master, which never had it, acknowledging another version
// 23. Otherwise it is a 503 (nothing was written). Any other error: nil.
func (c *comparison) settle(ctx context.Context, err error) *Problem {
	var p *Problem
	if !c.strong || !errors.As(err, &p) || (p.Status != http.StatusPreconditionFailed && p.Status != http.StatusConflict && p.Status != http.StatusNotFound) {
		return nil
	}
	pos := c.pos
	if !c.seen {
		pos = c.s.writer.Visible(c.partition)
	}
	if prob := c.s.awaitMajority(ctx, c.partition, pos); prob != nil {
		prob.Detail = "nothing was written: the state this conditional write was refused against is not known to be on a majority of copies yet; retry. (" + prob.Detail + ")"
		return prob
	}
	if e, ok := c.s.servingEpoch(c.partition); !ok || e != c.epoch {
		return unavailable(fmt.Sprintf("nothing was written: the partition %d changed master while this conditional write was refused, so the refusal may not stand; retry", c.partition))
	}
	return nil
}

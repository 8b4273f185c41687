package api

import (
	"bytes"
	"context"
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

// concernOutcome is what serving a read under its concern came to.
type concernOutcome int

const (
	answered     concernOutcome = iota // an answer was written
	notMaster                          // a read that needs the master found this node is not: nothing written
	notCommitted                       // a replica does not know the state to be majority-held: nothing written
)

// serveConcern answers r from this node's copy under concern. asMaster:
// the read must be served as the partition's master (a linearizable read,
// or a try aimed at the master); it reports notMaster, having written
// nothing, when this node does not hold the lease at the start and at the
// end of the read (at the same epoch). A local read is served as it is;
// majority and linearizable ones are held until the state they read is
// known to be on a majority of the partition's copies: on the master, by
// waiting (up to concernWait) for the replicas' acknowledgements; on a
// replica, by the committed position the master shipped (notCommitted,
// having written nothing, when the state is newer: the router tries
// another copy).
func (s *Server) serveConcern(w http.ResponseWriter, r *http.Request, partition int, concern string, asMaster bool, local http.HandlerFunc) concernOutcome {
	epoch, master := uint64(0), false
	if s.clustered() {
		epoch, master = s.cfg.Leases.Holds(partition)
	} else {
		master = true // a node of its own: its copy is the only one
	}
	if asMaster && !master {
		return notMaster
	}
	if concern == ConcernLocal {
		local(w, r)
		return answered
	}
	held := &heldAnswer{header: http.Header{}}
	rp := &readPosition{}
	local(held, r.WithContext(context.WithValue(r.Context(), readPositionKey{}, rp)))
	if held.status >= 500 {
		held.release(w) // an error tells nothing of the data
		return answered
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
			return notCommitted
		}
		held.release(w)
		return answered
	}
	if prob := s.awaitMajority(r.Context(), partition, pos); prob != nil {
		if e, ok := s.leaseEpoch(partition); asMaster && (!ok || e != epoch) {
			return notMaster
		}
		writeProblem(w, prob)
		return answered
	}
	if concern == ConcernLinearizable {
		// The state read was the newest while the lease was held from
		// before the read to now: no other master can have written.
		if e, ok := s.leaseEpoch(partition); !ok || e != epoch {
			return notMaster
		}
	}
	held.release(w)
	return answered
}

// leaseEpoch is Holds for a clustered node; a node of its own always holds.
func (s *Server) leaseEpoch(partition int) (uint64, bool) {
	if !s.clustered() {
		return 0, true
	}
	return s.cfg.Leases.Holds(partition)
}

// awaitMajority waits, on the master, until a majority of the partition's
// copies (master included, counted as write concern majority counts them)
// hold pos. It answers 503 with Retry-After when that takes longer than
// concernWait.
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
	have, err := s.cfg.Replication.WaitReplicated(ctx, partition, pos, s.countedReplicas(partition, pos), need)
	if err != nil {
		p := unavailable(fmt.Sprintf("the state read (position %s) is on %d of the %d copies of partition %d, and a majority read needs %d: it was not confirmed within %s; retry, or read with X-Read-Concern: local",
			pos, have+1, total, partition, need+1, concernWait))
		p.retryAfter = 1
		return p
	}
	return nil
}

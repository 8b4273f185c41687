package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/shoal-db/shoal/store"
)

// Acknowledger is told of every write this node acknowledges as a
// partition's master, at the moment it does (see Server.acknowledge). It
// is called on the request's goroutine, before the answer is written: it
// must be quick (COMMIT_LOG: one write(2)).
type Acknowledger interface {
	Acknowledged(a Acknowledgement)
}

// Acknowledgement is writes of a partition answered as a success.
type Acknowledgement struct {
	Partition int
	// Epoch is the lease epoch the writes were committed under; First and
	// Last their lowest and highest positions.
	Epoch       uint64
	First, Last store.Position
	// At is a moment of the answer at which this node still held that
	// lease, or (HandedOver) when it found the writes carried to the next
	// master by an orderly handoff.
	At time.Time
	// HandedOver: this node's lease had ended in an orderly handoff that
	// carried the writes; the next master's history holds them, so the
	// answer confirms them but accepts nothing.
	HandedOver bool
}

// acknowledge is the last step before a write is answered as a success:
// its changes, committed at positions first..last of the partition, are
// acknowledged only if this node still holds the partition's lease at the
// epoch they were committed under. The writer checked the lease when the
// commit was stored, but the answer can come much later: after the wait
// for a write concern, or after the process was stopped (SIGSTOP, a long
// GC pause, a swapped-out page) past its lease while another node took
// the partition over and acknowledged writes of its own. Telling the
// client "ok" then would be an answer from a node that is not the
// partition's master at that moment; a w=1 write the next master never
// got is rolled back. Such a write is stored here, so its outcome is
// unknown: 503. After an orderly handoff that carried the writes, the
// next master continues this history, and they are acknowledged.
//
// The time recorded is taken before the lease is checked, so it is a
// moment at which this node held the lease: records of two nodes never
// overlap in time unless their leases did (a check and the answer that
// follows it are never atomic, but a pause after the check delays an
// answer decided while the lease was held).
func (s *Server) acknowledge(partition int, first, last store.Position) *Problem {
	a := Acknowledgement{Partition: partition, Epoch: last.Epoch, First: first, Last: last, At: time.Now()}
	epoch := last.Epoch
	if s.cfg.Leases != nil {
		held, ok := s.cfg.Leases.Holds(partition)
		switch {
		case ok && held == epoch && first.Epoch == epoch:
		case !ok && first.Epoch == epoch && s.cfg.Handoffs != nil && s.cfg.Handoffs.HandedOver(partition, last):
			// The handoff waited for the next master to hold these
			// writes before the lease was released: they stand.
			a.HandedOver, a.At = true, time.Now()
		default:
			s.log.Warn("the lease ran out before a committed write was answered; answering that its outcome is unknown",
				"partition", partition, "epoch", epoch, "held", held, "holds", ok, "seq", last.Seq)
			return problem(http.StatusServiceUnavailable, TypeTimeout, "Outcome unknown", fmt.Sprintf(
				"this node's lease of partition %d (epoch %d) ran out after the write was applied here and before it could be acknowledged; "+
					"another node may be the partition's master now, and the write may or may not survive: read the document to find out, or retry the same write",
				partition, epoch))
		}
	}
	if s.cfg.Acknowledgements != nil {
		s.cfg.Acknowledgements.Acknowledged(a)
	}
	return nil
}

// confirmWrite is what a write's handler does once its changes are
// committed at first..last: wait for the write concern, then acknowledge.
func (s *Server) confirmWrite(r *http.Request, partition int, first, last store.Position) *Problem {
	if prob := s.awaitWriteConcern(r, partition, last); prob != nil {
		return prob
	}
	return s.acknowledge(partition, first, last)
}

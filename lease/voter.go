package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/shoal-db/shoal/record"
)

// Record is a voter's lease record for one partition, as kept in its store.
// Until is on the voter's own clock; it means nothing to anyone else. The
// zero Record (no holder, epoch 0) is the record of a partition the voter has
// never granted.
type Record struct {
	Partition int       `json:"partition"`
	Holder    string    `json:"holder,omitempty"`
	Epoch     uint64    `json:"epoch"`
	Until     time.Time `json:"until"`
	// Released: the holder gave the lease up early, by an orderly handoff
	// (it did not fail).
	Released bool `json:"released,omitempty"`
	// List is the newest list of regular copies a holder of the
	// partition granted by this voter carried (record.CopyList): kept
	// across later grants until a holder carries a newer one.
	List *record.CopyList `json:"list,omitempty"`
}

// Live reports whether the record names a holder whose lease has not yet
// expired at now (the voter's clock). At Until itself the lease has expired.
func (r Record) Live(now time.Time) bool {
	return r.Holder != "" && now.Before(r.Until)
}

// Ended reports whether the lease recorded here is over with nobody after
// it, so that its holder counts as gone for the partition: it ran out
// without a renewal, or it was released by a handoff more than one ttl ago
// and nobody took it since (a handoff's receiver campaigns at once; if it
// could not, the partition must not wait for its master to fail). A record
// loaded at start (Until zero) says nothing of the present.
func (r Record) Ended(now time.Time, ttl time.Duration) bool {
	if r.Holder == "" || r.Until.IsZero() || r.Live(now) {
		return false
	}
	return !r.Released || !now.Before(r.Until.Add(ttl))
}

// Request asks a voter to grant (or renew) the lease of Partition to
// Candidate at Epoch.
type Request struct {
	Partition int    `json:"partition"`
	Candidate string `json:"candidate"`
	Epoch     uint64 `json:"epoch"`
	// Renew marks a renewal of a lease the candidate believes it holds. It
	// changes only the refusal code (not-holder instead of stale-epoch): a
	// renewal that meets the conditions of a new grant is granted like one.
	Renew bool `json:"renew,omitempty"`
	// List, on a request of the holder, is its list of regular copies;
	// a grant keeps it if it is not older than the one recorded.
	List *record.CopyList `json:"list,omitempty"`
}

// Reason is the stable code of a refusal.
type Reason string

const (
	// ReasonHeldByOther: another holder's lease is live on this voter.
	ReasonHeldByOther Reason = "held-by-other"
	// ReasonStaleEpoch: the epoch is not higher than the one recorded.
	ReasonStaleEpoch Reason = "stale-epoch"
	// ReasonNewVoterWait: the voter lost its records or has just become a
	// voter, and grants nothing until one TTL has passed.
	ReasonNewVoterWait Reason = "new-voter-wait"
	// ReasonNotHolder: a renewal from a candidate that is not the recorded
	// holder at that epoch, and that a later epoch has superseded.
	ReasonNotHolder Reason = "not-holder"
	// ReasonInvalid: the request names no candidate or epoch 0.
	ReasonInvalid Reason = "invalid-request"
	// ReasonNotRecorded: the voter would grant, but could not record the
	// grant in its store (a grant is durable before it is announced); the
	// candidate may ask again.
	ReasonNotRecorded Reason = "not-recorded"
)

// Sentinel errors, one per Reason, for errors.Is on [Decision.Err].
var (
	ErrHeldByOther  = errors.New("lease: held by another node")
	ErrStaleEpoch   = errors.New("lease: stale epoch")
	ErrNewVoterWait = errors.New("lease: new voter waiting out one TTL")
	ErrNotHolder    = errors.New("lease: not the holder")
	ErrInvalid      = errors.New("lease: invalid request")
	ErrNotRecorded  = errors.New("lease: the voter could not record the grant")
)

func (r Reason) sentinel() error {
	switch r {
	case ReasonHeldByOther:
		return ErrHeldByOther
	case ReasonStaleEpoch:
		return ErrStaleEpoch
	case ReasonNewVoterWait:
		return ErrNewVoterWait
	case ReasonNotHolder:
		return ErrNotHolder
	case ReasonNotRecorded:
		return ErrNotRecorded
	default:
		return ErrInvalid
	}
}

// Decision is a voter's answer to a Request. Record is the voter's record
// after the decision: on a grant, the new record; on a refusal, the record
// unchanged, so the candidate learns the highest epoch and who holds it.
type Decision struct {
	Granted bool   `json:"granted"`
	Reason  Reason `json:"reason,omitempty"`
	Record  Record `json:"record"`
	// Ended answers a query (Batch.Queries): the voter saw the recorded
	// lease end with nobody after it (Record.Ended).
	Ended bool `json:"ended,omitempty"`
}

// Err is nil for a grant and a *RefusedError otherwise.
func (d Decision) Err() error {
	if d.Granted {
		return nil
	}
	return &RefusedError{Reason: d.Reason, Record: d.Record}
}

// RefusedError is a refusal as an error; it unwraps to the sentinel of its
// Reason and carries the voter's record (who holds the lease, at what epoch).
type RefusedError struct {
	Reason Reason
	Record Record
}

func (e *RefusedError) Error() string {
	if e.Record.Holder == "" {
		return fmt.Sprintf("lease refused (%s): partition %d epoch %d, no holder", e.Reason, e.Record.Partition, e.Record.Epoch)
	}
	return fmt.Sprintf("lease refused (%s): partition %d held by %s at epoch %d", e.Reason, e.Record.Partition, e.Record.Holder, e.Record.Epoch)
}

func (e *RefusedError) Unwrap() error { return e.Reason.sentinel() }

// VoterState is what a voter needs besides its records to decide.
type VoterState struct {
	// Since is when, on the voter's clock, this node became a lease voter or
	// started with an empty lease store. A voter grants nothing until one TTL
	// after it. The zero value means a voter of long standing whose records
	// are intact (a restart that kept its store does not reset it).
	Since time.Time
}

// Wait returns how long the voter still has to wait before it may grant
// anything (0 when it may).
func (v VoterState) Wait(now time.Time, ttl time.Duration) time.Duration {
	if v.Since.IsZero() {
		return 0
	}
	if left := v.Since.Add(ttl).Sub(now); left > 0 {
		return left
	}
	return 0
}

// Decide rules on req against rec, the voter's record for req.Partition (the
// zero Record if it has none), at now on the voter's clock. It returns the
// record to persist (unchanged on refusal) and the decision to send back.
// The caller serialises Decide per partition and must persist a changed
// record before it replies.
//
// The request is granted, with Until = max(Until, now+ttl), when:
//
//   - the candidate is the recorded holder at the recorded epoch: a renewal
//     (or a retried request) extends the lease; or
//   - no other holder is live on the record and the epoch is higher than the
//     recorded one: a new lease.
//
// Otherwise it is refused with the record. A voter inside its new-voter wait
// refuses everything, and a record its holder released (DecideRelease)
// refuses that holder's renewals of the released epoch.
//
// A renewal that arrives after Until has passed, but before anybody else took
// the record, is granted. This is safe: the record still naming (candidate,
// epoch) proves this voter has granted nobody else since, and if any other
// candidate had gathered a majority meanwhile, one voter of every majority
// would now record a higher epoch and refuse the renewal, so it can reach a
// majority only if the tenure truly continued. The holder itself stopped
// writing at its own earlier deadline and resumes only when a majority grants
// the new renewal, counting from the moment it sent that renewal, which is
// exactly the footing of a fresh grant. Refusing it would only force a new
// epoch, and with it a needless fencing of the partition's replicas.
//
// Decide panics if ttl is not positive or if rec is for another partition:
// both are caller bugs.
func Decide(v VoterState, rec Record, req Request, now time.Time, ttl time.Duration) (Record, Decision) {
	if ttl <= 0 {
		panic(fmt.Sprintf("lease: Decide with non-positive ttl %s", ttl))
	}
	if rec.Holder == "" && rec.Epoch == 0 {
		rec.Partition = req.Partition
	} else if rec.Partition != req.Partition {
		panic(fmt.Sprintf("lease: Decide on partition %d with the record of partition %d", req.Partition, rec.Partition))
	}
	refuse := func(r Reason) (Record, Decision) {
		return rec, Decision{Reason: r, Record: rec}
	}
	if req.Candidate == "" || req.Epoch == 0 {
		return refuse(ReasonInvalid)
	}
	if v.Wait(now, ttl) > 0 {
		return refuse(ReasonNewVoterWait)
	}
	switch {
	case rec.Released && rec.Holder == req.Candidate && rec.Epoch == req.Epoch:
		// A renewal sent before the release and delivered after it: the
		// holder has given this epoch up for good.
		return refuse(ReasonNotHolder)
	case rec.Holder == req.Candidate && rec.Epoch == req.Epoch:
		// Renewal, live or lapsed (see above), or a retry of a granted request.
	case rec.Live(now) && rec.Holder != req.Candidate:
		return refuse(ReasonHeldByOther)
	case req.Epoch > rec.Epoch:
		// New lease: nobody else live, epoch higher than any recorded.
	case req.Renew:
		return refuse(ReasonNotHolder)
	default:
		return refuse(ReasonStaleEpoch)
	}
	until := now.Add(ttl)
	if rec.Until.After(until) {
		until = rec.Until // never shorten a lease on a grant
	}
	next := Record{Partition: req.Partition, Holder: req.Candidate, Epoch: req.Epoch, Until: until, List: rec.List}
	if req.List != nil && req.List.Epoch <= req.Epoch && (rec.List == nil || !rec.List.Newer(req.List)) {
		next.List = req.List.Clone()
	}
	return next, Decision{Granted: true, Record: next}
}

// Release is sent by a holder that steps down, so that the voters let the
// next candidate in without waiting for the TTL.
type Release struct {
	Partition int    `json:"partition"`
	Holder    string `json:"holder"`
	Epoch     uint64 `json:"epoch"`
}

// DecideRelease ends the lease on rec at now if rel names its holder and
// epoch; the record keeps its holder and epoch, so the next grant still needs
// a higher epoch. It reports whether the record changed (persist it then).
//
// Safe because the holder stopped accepting writes before sending it and
// never uses that epoch again (a later lease of the same node has a higher
// epoch), so a release delayed in the network cannot end a newer lease.
func DecideRelease(rec Record, rel Release, now time.Time) (Record, bool) {
	if rel.Holder == "" || rec.Partition != rel.Partition || rec.Holder != rel.Holder ||
		rec.Epoch != rel.Epoch || !rec.Until.After(now) {
		return rec, false
	}
	rec.Until, rec.Released = now, true
	return rec, true
}

package lease

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shoal-db/shoal/internal/nodeid"
)

// Config configures a Holder.
type Config struct {
	// Self is this node's id, the Candidate of every request it makes.
	Self string
	// Voters is the current lease voter set (see NextVoterSet).
	Voters []string
	// TTL is LEASE_TTL: how long a voter's grant lasts on its clock.
	TTL time.Duration
	// DriftMargin is taken off TTL on the holder's side. It must cover how
	// far a holder's clock and a voter's clock can drift apart over one TTL:
	// at least 2ρ·TTL if every clock's rate is within ρ of real time.
	// Zero means TTL/10, generous for real clocks (ρ is about 1e-4).
	DriftMargin time.Duration
	// RenewEvery is how often a held lease is renewed. Zero means TTL/3.
	// Replies must come back within it: a newer renewal supersedes an older
	// one still in flight.
	RenewEvery time.Duration
}

// withDefaults fills the zero durations.
func (c Config) withDefaults() Config {
	if c.DriftMargin == 0 {
		c.DriftMargin = c.TTL / 10
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.TTL / 3
	}
	return c
}

// Validate explains what is wrong with the configuration, after defaults.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Self == "":
		return errors.New("lease: Self (node id) is empty")
	case c.TTL <= 0:
		return fmt.Errorf("lease: TTL %s must be positive", c.TTL)
	case c.DriftMargin <= 0 || c.DriftMargin >= c.TTL:
		return fmt.Errorf("lease: DriftMargin %s must be positive and below TTL %s", c.DriftMargin, c.TTL)
	case c.RenewEvery <= 0 || c.RenewEvery >= c.TTL-c.DriftMargin:
		return fmt.Errorf("lease: RenewEvery %s must be positive and below TTL - DriftMargin (%s), or the lease lapses between renewals",
			c.RenewEvery, c.TTL-c.DriftMargin)
	}
	return validVoters(c.Voters)
}

func validVoters(voters []string) error {
	if len(voters) == 0 {
		return errors.New("lease: the voter set is empty")
	}
	seen := make(map[string]bool, len(voters))
	for _, v := range voters {
		if v == "" {
			return errors.New("lease: empty voter id")
		}
		if seen[v] {
			return fmt.Errorf("lease: voter %q listed twice", v)
		}
		seen[v] = true
	}
	return nil
}

// Holder is the candidate side of the leases of one node: per partition, a
// small state machine driven by the decisions it observes and by the times
// it is given. Times are on the node's monotonic clock (time.Now() values,
// never persisted or sent). A Holder is not safe for concurrent use: one
// goroutine owns it.
type Holder struct {
	cfg    Config
	voters []string
	parts  map[int]*partition
}

// partition is the holder's state for one partition.
type partition struct {
	// epoch is the epoch of the lease this node obtained last (0: none, or it
	// stepped down); validUntil is when, on this node's clock, it stops
	// counting that lease as held.
	epoch      uint64
	validUntil time.Time
	// learned is the highest epoch heard of anywhere, learnedHolder the
	// holder a voter recorded with it ("" if unknown).
	learned       uint64
	learnedHolder string
	// proposed is the highest epoch this node ever proposed: never reused.
	proposed uint64
	// att is the attempt in flight (nil if none). Only its grants count.
	att *attempt
}

// attempt is one round of requests sent to the voters at sentAt.
type attempt struct {
	epoch  uint64
	renew  bool
	sentAt time.Time
	voters []string
	grants map[string]bool
}

// NewHolder returns a Holder for cfg, or the reason cfg is invalid.
func NewHolder(cfg Config) (*Holder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Holder{cfg: cfg, parts: make(map[int]*partition)}
	h.voters = sortedCopy(cfg.Voters)
	return h, nil
}

// Config returns the configuration in use, defaults filled in.
func (h *Holder) Config() Config {
	c := h.cfg
	c.Voters = h.Voters()
	return c
}

// Voters returns the voter set new requests go to (sorted). The driver sends
// every request Propose or RenewalsDue returns to each of them.
func (h *Holder) Voters() []string { return slices.Clone(h.voters) }

// SetVoters changes the voter set for attempts made from now on; attempts in
// flight keep counting against the set they were sent to. Change it only as
// NextVoterSet says: one member at a time.
func (h *Holder) SetVoters(voters []string) error {
	if err := validVoters(voters); err != nil {
		return err
	}
	h.voters = sortedCopy(voters)
	return nil
}

func (h *Holder) state(p int) *partition {
	st := h.parts[p]
	if st == nil {
		st = &partition{}
		h.parts[p] = st
	}
	return st
}

// renewable reports whether st's next request should renew its epoch rather
// than propose a new one: it has an epoch, and either still holds it or has
// learned of nothing newer (voters grant a lapsed renewal nobody superseded).
func renewable(st *partition, now time.Time) bool {
	return st.epoch != 0 && (now.Before(st.validUntil) || st.learned <= st.epoch)
}

// RenewNow starts a renewal of partition p at now, whatever RenewEvery
// says, if this node may renew it (ok false: it may not). It replaces any
// attempt in flight.
func (h *Holder) RenewNow(p int, now time.Time) (Request, bool) {
	st, ok := h.parts[p]
	if !ok || !renewable(st, now) {
		return Request{}, false
	}
	return h.start(p, st, st.epoch, true, now), true
}

// Propose starts a new attempt for partition p at now and returns the request
// to send to every voter. While the node holds the lease (or held it and has
// learned of no later epoch) it is a renewal at that epoch; otherwise it
// proposes one more than the highest epoch learned or ever proposed by this
// node, so an epoch is never proposed twice. The new attempt replaces any
// attempt in flight: grants for that one no longer count.
func (h *Holder) Propose(p int, now time.Time) Request {
	st := h.state(p)
	if renewable(st, now) {
		return h.start(p, st, st.epoch, true, now)
	}
	e := max(st.learned, st.proposed) + 1
	st.proposed = e
	return h.start(p, st, e, false, now)
}

func (h *Holder) start(p int, st *partition, epoch uint64, renew bool, now time.Time) Request {
	st.att = &attempt{epoch: epoch, renew: renew, sentAt: now, voters: h.voters, grants: make(map[string]bool)}
	return Request{Partition: p, Candidate: h.cfg.Self, Epoch: epoch, Renew: renew}
}

// RenewalsDue returns, in partition order, the renewals to send now: one for
// every partition whose lease this node holds (or may still renew, see
// Propose) and whose last attempt went out at least RenewEvery ago. Each
// starts a new attempt at now. The driver sends the whole batch to every
// voter in one message per voter, so the cost of renewing does not grow with
// the number of partitions held.
func (h *Holder) RenewalsDue(now time.Time) []Request {
	var out []Request
	for _, p := range slices.Sorted(maps.Keys(h.parts)) {
		st := h.parts[p]
		if !renewable(st, now) {
			continue
		}
		if st.att != nil && now.Sub(st.att.sentAt) < h.cfg.RenewEvery {
			continue
		}
		out = append(out, h.start(p, st, st.epoch, true, now))
	}
	return out
}

// Observe takes voter's decision d on the request of partition p that this
// node sent at sentAt (the now it passed to Propose or RenewalsDue). Every
// decision teaches the highest epoch and its holder. A grant counts only if it
// answers the attempt in flight (same sentAt, same epoch) and comes from one
// of the voters that attempt went to; duplicates count once. When a majority
// of them has granted, the node holds the lease until sentAt + TTL -
// DriftMargin; a renewal moves that point forward, never back.
func (h *Holder) Observe(p int, voter string, sentAt time.Time, d Decision) {
	if !about(p, d.Record) {
		return
	}
	st := h.state(p)
	h.learn(st, d.Record.Epoch, d.Record.Holder)
	a := st.att
	if !d.Granted || a == nil || !sentAt.Equal(a.sentAt) || d.Record.Epoch != a.epoch ||
		d.Record.Holder != h.cfg.Self || !slices.Contains(a.voters, voter) {
		return
	}
	a.grants[voter] = true
	if len(a.grants) < Majority(len(a.voters)) {
		return
	}
	until := a.sentAt.Add(h.cfg.TTL - h.cfg.DriftMargin)
	if st.epoch != a.epoch {
		// A new tenure (a.epoch is above any epoch this node held before).
		st.epoch, st.validUntil = a.epoch, until
		return
	}
	if until.After(st.validUntil) {
		st.validUntil = until
	}
}

func (h *Holder) learn(st *partition, epoch uint64, holder string) {
	switch {
	case epoch > st.learned:
		st.learned, st.learnedHolder = epoch, holder
	case epoch == st.learned && st.learnedHolder == "":
		st.learnedHolder = holder
	}
}

// Learn tells the holder of an epoch of partition p seen elsewhere (the
// partition table, this node's applied position, a replication batch, the
// epoch it last held before a restart), so its next proposal is higher.
func (h *Holder) Learn(p int, epoch uint64) {
	h.learn(h.state(p), epoch, "")
}

// LearnHolder tells the holder of a grant of partition p at epoch to
// holder that a voter recorded (its own record, loaded at start, or one a
// voter answered a query with), so its next proposal is higher and it
// knows who held the partition.
func (h *Holder) LearnHolder(p int, epoch uint64, holder string) {
	h.learn(h.state(p), epoch, holder)
}

// Holds reports whether this node holds the lease of partition p at now, on
// its own clock: it may accept writes for p, at Epoch(p). Check it at the
// moment of committing; the epoch fences whatever slips past.
func (h *Holder) Holds(p int, now time.Time) bool {
	st := h.parts[p]
	return st != nil && st.epoch != 0 && now.Before(st.validUntil)
}

// Epoch returns the epoch of the lease of p this node obtained last, held or
// lapsed (0 if none, or after StepDown).
func (h *Holder) Epoch(p int) uint64 {
	if st := h.parts[p]; st != nil {
		return st.epoch
	}
	return 0
}

// ValidUntil returns when, on this node's clock, it stops counting the lease
// of p as held (the zero time if it has none).
func (h *Holder) ValidUntil(p int) time.Time {
	if st := h.parts[p]; st != nil {
		return st.validUntil
	}
	return time.Time{}
}

// Learned returns the highest epoch of p this node has heard of and the
// holder a voter recorded with it ("" if unknown): the hint to give a client
// or a router when this node is not the master.
func (h *Holder) Learned(p int) (epoch uint64, holder string) {
	if st := h.parts[p]; st != nil {
		return st.learned, st.learnedHolder
	}
	return 0, ""
}

// StepDown gives up the lease of p at once: Holds turns false, the attempt in
// flight is dropped and the epoch is never renewed again. It returns the
// Release to send to every voter (false if the node had no lease of p). Stop
// writes before sending it; the next holder needs a higher epoch.
func (h *Holder) StepDown(p int) (Release, bool) {
	st := h.parts[p]
	if st == nil || st.epoch == 0 {
		return Release{}, false
	}
	rel := Release{Partition: p, Holder: h.cfg.Self, Epoch: st.epoch}
	h.learn(st, st.epoch, h.cfg.Self)
	st.epoch, st.validUntil, st.att = 0, time.Time{}, nil
	return rel, true
}

// Majority is the number of grants a lease needs from n voters.
func Majority(n int) int { return n/2 + 1 }

func sortedCopy(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// about reports whether rec can be a voter's record of partition p: a
// record that names another partition, or a holder that is no node id, is
// no answer about p (a voter's empty record names no partition).
func about(p int, rec Record) bool {
	if rec.Holder == "" && rec.Epoch == 0 {
		return true
	}
	return rec.Partition == p && (rec.Holder == "" || nodeid.Check(rec.Holder) == nil)
}

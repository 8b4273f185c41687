package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shoal-db/shoal/internal/wording"
	"github.com/shoal-db/shoal/record"
)

// Batch is what a node sends one voter at a time: the requests of every
// partition it campaigns for or renews, in one message, and the leases it
// releases. A node that merely stops wanting a partition sends no release:
// it lets its lease run out, so that a commit that passed its lease check
// just before cannot overlap the next master. Only an orderly handoff, which
// has paused the partition's writer first, releases (see Release).
type Batch struct {
	Requests []Request `json:"requests,omitempty"`
	Releases []Release `json:"releases,omitempty"`
	// Queries asks, per partition, whether the voter saw its lease end with
	// nobody after it; answered after the decisions of Requests, in order.
	Queries []int `json:"queries,omitempty"`
}

// Transport carries a batch to a voter and brings back its decisions, one per
// request in order.
type Transport interface {
	Vote(ctx context.Context, voter string, b Batch) ([]Decision, error)
}

// VoteStore keeps a voter's votes durably (the node's own MongoDB).
type VoteStore interface {
	LeaseVotes(ctx context.Context) (map[int]record.LeaseVote, error)
	// SaveLeaseVotes replaces every recorded vote.
	SaveLeaseVotes(ctx context.Context, votes map[int]record.LeaseVote) error
	// VoterSet and SaveVoterSet keep the voter set this node applies, so
	// a restart resumes a step-by-step change instead of skipping steps.
	VoterSet(ctx context.Context) ([]string, time.Time, error)
	SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error
}

// Plan is what the node wants right now: the lease voters and, per
// partition, whether this node should be its master.
type Plan struct {
	Voters []string
	Want   func(partition int) bool
	// Settle is the least time between two steps of a voter-set change
	// (LEASE_TTL + PEERS_REFRESH).
	Settle time.Duration
	// List, if set, is this node's list of regular copies of a partition
	// it holds (nil: none to carry): every renewal carries it, and
	// ListOnVoters reports it once a majority of the voters keeps it.
	List func(partition int) *record.CopyList
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	Self       string
	Partitions int
	TTL        time.Duration
	Store      VoteStore
	Transport  Transport
	// Plan is asked every tick; it must be cheap and must not block.
	Plan func() Plan
	// WaitAtStart makes this voter grant nothing for one TTL after start:
	// it may have granted leases before a restart. A node that is its
	// cluster's only voter has no one to conflict with and skips it.
	WaitAtStart bool
	// OnChange is told, on the manager's goroutine, when this node starts
	// holding a partition at a new epoch.
	OnChange func(partition int, holder string, epoch uint64)
	// OnListKept, if set, is told (with no lock held) when a majority of
	// the voters has kept a new list of copies of a partition this node
	// renewed with (ListOnVoters changed).
	OnListKept func(partition int)
	// InitialVoters is the voter set to start from when the store holds
	// none: the set in use in the cluster, learned from a peer (nil: the
	// plan's, as for a new cluster). A change toward the plan's set then
	// goes one member at a time, as on every node.
	InitialVoters []string
	Now           func() time.Time
	Logger        *slog.Logger
}

// Manager drives leases for one node: as a candidate and holder it
// campaigns for the partitions its plan wants, renews them in one batch per
// voter every TTL/3 and steps down from the others; as a voter it decides
// the requests of every node, one partition at a time, and records each new
// grant in its store before answering. The decisions themselves are the
// pure functions of this package; the Manager only does the I/O.
type Manager struct {
	cfg    ManagerConfig
	log    *slog.Logger
	holder *Holder
	mu     sync.Mutex // guards holder, lastVoters, changedAt, attempt, reported

	lastVoters []string
	target     []string
	changedAt  time.Time
	attempt    []time.Time // last campaign per partition
	reported   []uint64    // epoch last reported held (0: not held)

	voterMu []sync.Mutex // one per partition: a voter's decisions are serialised per partition
	records []Record
	// seen is a copy of records for readers that must never wait behind a
	// decision (which holds its partition's lock across a store write):
	// Lapsed and VotedHolder are asked by every round's plan, and queries.
	seenMu sync.Mutex
	seen   []Record

	voterMuState sync.Mutex
	voter        VoterState
	wasVoter     bool
	// startedEmpty: the store held no lease record at start (set once).
	startedEmpty bool

	persistMu sync.Mutex // guards durable, queued and saving
	durable   map[int]record.LeaseVote
	// queued: votes waiting for the next write of the votes document,
	// which the caller that finds no write under way makes for every
	// caller queued by then (group commit: under load, batches of many
	// nodes need recording at once, and the document is written whole).
	queued []queuedVotes
	saving bool

	// lists: per partition, the latest lists of copies this node has seen
	// voters keep (any voter's answer, see latestTwo), and its own list as
	// last kept by a majority of them (guarded by listMu).
	listMu   sync.Mutex
	newest   [][]*record.CopyList // per partition: the two latest lists of the newest epoch seen
	onVoters []*record.CopyList

	urgent  chan struct{} // wakes Run for a round now (Acquire)
	roundMu sync.Mutex
	rounded chan struct{} // closed and replaced after every round
	eager   []bool        // partitions Acquire campaigns for without the retry delay (guarded by mu)
	carry   []bool        // partitions whose new list of copies the next round renews with (guarded by mu)
}

// NewManager loads this node's votes and prepares the holder.
func NewManager(ctx context.Context, cfg ManagerConfig) (*Manager, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	plan := cfg.Plan()
	voters, changedAt, err := cfg.Store.VoterSet(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading the lease voter set: %w", err)
	}
	if len(voters) == 0 {
		// First start: the set in use if a peer told it, else the peer
		// list's set; recorded.
		voters, changedAt = slices.Sorted(slices.Values(plan.Voters)), time.Time{}
		if len(cfg.InitialVoters) > 0 {
			// The set in use may itself be a step of a change: the next
			// step waits as on every node.
			voters, changedAt = slices.Sorted(slices.Values(cfg.InitialVoters)), cfg.Now()
		}
		if err := cfg.Store.SaveVoterSet(ctx, voters, changedAt); err != nil {
			return nil, fmt.Errorf("recording the lease voter set: %w", err)
		}
	}
	h, err := NewHolder(Config{Self: cfg.Self, Voters: voters, TTL: cfg.TTL})
	if err != nil {
		return nil, err
	}
	votes, err := cfg.Store.LeaseVotes(ctx)
	if err != nil {
		return nil, fmt.Errorf("loading lease votes: %w", err)
	}
	m := &Manager{cfg: cfg, log: cfg.Logger, holder: h, lastVoters: voters, changedAt: changedAt,
		attempt: make([]time.Time, cfg.Partitions), reported: make([]uint64, cfg.Partitions),
		voterMu: make([]sync.Mutex, cfg.Partitions), records: make([]Record, cfg.Partitions), seen: make([]Record, cfg.Partitions),
		urgent: make(chan struct{}, 1), rounded: make(chan struct{}), eager: make([]bool, cfg.Partitions),
		newest: make([][]*record.CopyList, cfg.Partitions), onVoters: make([]*record.CopyList, cfg.Partitions),
		carry: make([]bool, cfg.Partitions)}
	for p := range m.records {
		m.records[p].Partition = p
		m.seen[p].Partition = p
	}
	m.durable = votes
	m.startedEmpty = len(votes) == 0
	for p, v := range votes {
		if p < 0 || p >= cfg.Partitions {
			continue
		}
		// The expiry is not stored: WaitAtStart covers every lease granted
		// before the restart. The epoch is, so it never goes back.
		m.records[p] = Record{Partition: p, Holder: v.Holder, Epoch: v.Epoch, List: v.List.Clone()}
		m.seen[p] = m.records[p]
		// This node may have held these epochs itself before it restarted:
		// its next proposal must be higher. And it knows who held the
		// partition, though its table is empty until the holder is heard
		// from (see placement.Decide).
		h.LearnHolder(p, v.Epoch, v.Holder)
	}
	if cfg.WaitAtStart {
		m.voter = VoterState{Since: cfg.Now()}
	}
	m.wasVoter = slices.Contains(plan.Voters, cfg.Self)
	return m, nil
}

// Fence is told that partition's stored history already has positions at
// epoch newest, above the lease this node holds: it gives the lease up and
// campaigns next time above newest.
func (m *Manager) Fence(partition int, newest uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holder.Learn(partition, newest)
	if _, ok := m.holder.StepDown(partition); ok {
		m.log.Warn("lease epoch is older than the partition's stored history; stepping down to campaign higher",
			"partition", partition, "stored_epoch", newest)
	}
}

// Learn tells the holder of an epoch of partition seen in this node's own
// store (its history, a master's batches, its tenures), so its next
// proposal is higher even if the voters' records were lost.
func (m *Manager) Learn(partition int, epoch uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.holder.Learn(partition, epoch)
}

// Holds reports whether this node may accept writes for partition now, and
// at which epoch.
func (m *Manager) Holds(partition int) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.holder.Holds(partition, m.cfg.Now()) {
		return 0, false
	}
	return m.holder.Epoch(partition), true
}

// StartedEmpty reports whether this node's store held no lease record
// when the manager started (a new node, or one whose store was emptied).
func (m *Manager) StartedEmpty() bool { return m.startedEmpty }

// LastEpoch is the epoch of the lease of partition this node obtained
// last, held or lapsed (0 if none, or after it stepped down): a lapsed
// lease may still be renewed at it.
func (m *Manager) LastEpoch(partition int) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holder.Epoch(partition)
}

// Learned is the highest epoch of partition this node has heard of (from
// the voters, its own store, or the partition table; 0 if none) and its
// holder as the voters named it ("" if they did not): another node's id
// means this node's own tenure was superseded.
func (m *Manager) Learned(partition int) (epoch uint64, holder string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holder.Learned(partition)
}

// VotedHolder is the holder of a live grant in this node's own voter
// record of partition ("" if none): a good guess of its master.
func (m *Manager) VotedHolder(partition int) string {
	if partition < 0 || partition >= m.cfg.Partitions {
		return ""
	}
	if rec := m.seenRecord(partition); rec.Live(m.cfg.Now()) {
		return rec.Holder
	}
	return ""
}

// Lapsed reports the holder and epoch of partition's lease that this voter
// granted and saw end with nobody after it (Record.Ended): the fastest
// sign that a master is gone, faster than gossip declaring it dead. Every
// master at that epoch or before is gone too. Records loaded at start
// (granted before a restart) never count, and a lease released by a
// handoff counts only once its receiver had one TTL to take it.
func (m *Manager) Lapsed(partition int) (holder string, epoch uint64, lapsed bool) {
	if partition < 0 || partition >= m.cfg.Partitions {
		return "", 0, false
	}
	rec := m.seenRecord(partition)
	if !rec.Ended(m.cfg.Now(), m.cfg.TTL) {
		return "", 0, false
	}
	return rec.Holder, rec.Epoch, true
}

// RecordEpoch is the epoch of this voter's record of partition (0: none):
// a partition table naming a later tenure means a grant was made without
// this voter.
func (m *Manager) RecordEpoch(partition int) uint64 {
	if partition < 0 || partition >= m.cfg.Partitions {
		return 0
	}
	return m.seenRecord(partition).Epoch
}

// RecordStale reports whether this voter's record of partition was loaded
// at start and not decided since (a grant made before a restart): it says
// nothing of whether that lease is over (Record.Ended), so the node asks
// the other voters instead.
func (m *Manager) RecordStale(partition int) bool {
	if partition < 0 || partition >= m.cfg.Partitions {
		return false
	}
	rec := m.seenRecord(partition)
	return rec.Holder != "" && rec.Until.IsZero()
}

// seenRecord is this voter's record of partition as last decided, read
// without waiting for a decision in progress.
func (m *Manager) seenRecord(partition int) Record {
	m.seenMu.Lock()
	defer m.seenMu.Unlock()
	return m.seen[partition]
}

// Vote decides a batch as this node's voter. The partitions of the batch
// are locked (in order, so batches never deadlock), decided, and every new
// grant is recorded in one store write before any answer leaves.
func (m *Manager) Vote(ctx context.Context, b Batch) []Decision {
	var parts []int
	for _, r := range b.Requests {
		parts = append(parts, r.Partition)
	}
	for _, r := range b.Releases {
		parts = append(parts, r.Partition)
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	parts = slices.DeleteFunc(parts, func(p int) bool { return p < 0 || p >= m.cfg.Partitions })
	for _, p := range parts {
		m.voterMu[p].Lock()
	}
	defer func() {
		for _, p := range parts {
			m.voterMu[p].Unlock()
		}
	}()
	now := m.cfg.Now()
	out := make([]Decision, len(b.Requests))
	next := map[int]Record{}
	current := func(p int) Record {
		if r, ok := next[p]; ok {
			return r
		}
		return m.records[p]
	}
	// Releases only shorten a lease: nothing to persist (expiries are not
	// stored; a restarted voter waits one TTL anyway).
	for _, rel := range b.Releases {
		if rel.Partition < 0 || rel.Partition >= m.cfg.Partitions {
			continue
		}
		if rec, ok := DecideRelease(current(rel.Partition), rel, now); ok {
			next[rel.Partition] = rec
		}
	}
	var votes []record.LeaseVote
	listOnly := map[int]Record{} // renewals that changed only the list: the record before
	for i, req := range b.Requests {
		if req.Partition < 0 || req.Partition >= m.cfg.Partitions {
			out[i] = Decision{Reason: ReasonInvalid, Record: Record{Partition: req.Partition}}
			continue
		}
		rec := current(req.Partition)
		n, d := Decide(m.voterState(), rec, req, now, m.cfg.TTL)
		granted := d.Granted && (n.Epoch != rec.Epoch || n.Holder != rec.Holder)
		if granted || d.Granted && !n.List.Same(rec.List) {
			votes = append(votes, record.LeaseVote{Partition: req.Partition, Holder: n.Holder, Epoch: n.Epoch, List: n.List.Clone()})
			if !granted {
				if _, ok := listOnly[req.Partition]; !ok {
					listOnly[req.Partition] = rec
				}
			}
		}
		next[req.Partition] = n
		out[i] = d
	}
	// A new grant is durable before it is announced, so a restarted voter
	// never grants the same epoch to someone else. If it cannot be
	// recorded, only the new grants are refused: renewals and refusals
	// record nothing new (expiries are not stored), so they stand.
	// A list of copies is kept only once durable too: a renewal whose
	// list could not be recorded stands, with the list recorded before
	// (its holder then sees its list is not held here).
	if err := m.persist(ctx, votes); err != nil {
		m.log.Error("could not record new lease grants and lists of copies; refusing the grants, renewals stand without the new lists",
			"grants", len(votes)-len(listOnly), "lists", len(listOnly), "err", err)
		unrecorded := map[int]bool{}
		for _, v := range votes {
			if before, ok := listOnly[v.Partition]; ok {
				n := next[v.Partition]
				n.List = before.List
				next[v.Partition] = n
				continue
			}
			unrecorded[v.Partition] = true
			delete(next, v.Partition)
		}
		for i, req := range b.Requests {
			switch {
			case unrecorded[req.Partition]:
				out[i] = Decision{Reason: ReasonNotRecorded, Record: m.records[req.Partition]}
			case out[i].Granted:
				if _, ok := listOnly[req.Partition]; ok {
					out[i].Record = next[req.Partition]
				}
			}
		}
	}
	m.seenMu.Lock()
	for p, r := range next {
		m.records[p] = r
		m.seen[p] = r
	}
	m.seenMu.Unlock()
	for _, p := range b.Queries {
		if p < 0 || p >= m.cfg.Partitions {
			out = append(out, Decision{Reason: ReasonInvalid, Record: Record{Partition: p}})
			continue
		}
		rec := m.seenRecord(p)
		// A voter still waiting out its first TTL may have forgotten a
		// grant: it vouches for nothing.
		ended := m.voterState().Wait(now, m.cfg.TTL) == 0 && rec.Ended(now, m.cfg.TTL)
		out = append(out, Decision{Record: rec, Ended: ended})
	}
	return out
}

// EndedLease is what a majority of the voters said of a partition's lease.
type EndedLease struct {
	Partition int
	// Ended: a majority of the voters saw the lease of Holder at Epoch
	// end with nobody after it.
	Ended  bool
	Holder string
	Epoch  uint64
}

// Ended asks every voter whether each partition's lease is over, for a
// node that is not a voter itself (a voter reads its own records: Lapsed).
// A lease is over when a majority of the voter set say so; the holder and
// epoch are the highest they name. The newest grant any voter names is
// learned (Learned), ended or not.
func (m *Manager) Ended(ctx context.Context, partitions []int) []EndedLease {
	out := make([]EndedLease, len(partitions))
	for i, p := range partitions {
		out[i].Partition = p
	}
	if len(partitions) == 0 {
		return out
	}
	m.mu.Lock()
	voters := m.holder.Voters()
	m.mu.Unlock()
	var mu sync.Mutex
	ended := make([]int, len(partitions))
	newest := make([]Record, len(partitions)) // the newest grant any voter named
	m.toVoters(ctx, voters, Batch{Queries: partitions}, func(_ string, ds []Decision, err error) {
		if err != nil || len(ds) != len(partitions) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for i, d := range ds {
			if !about(partitions[i], d.Record) {
				continue
			}
			m.seeList(partitions[i], d.Record.List)
			if d.Record.Epoch > newest[i].Epoch {
				newest[i] = d.Record
			}
			if !d.Ended {
				continue
			}
			ended[i]++
			if d.Record.Epoch > out[i].Epoch {
				out[i].Epoch, out[i].Holder = d.Record.Epoch, d.Record.Holder
			}
		}
	})
	m.mu.Lock()
	for i := range out {
		out[i].Ended = ended[i] >= Majority(len(voters))
		if newest[i].Holder != "" {
			m.holder.LearnHolder(partitions[i], newest[i].Epoch, newest[i].Holder)
		}
	}
	m.mu.Unlock()
	return out
}

// queuedVotes is one caller's votes waiting to be written.
type queuedVotes struct {
	votes []record.LeaseVote
	done  chan error
}

// persist records new votes together with every earlier one, in one
// write with those of the callers waiting meanwhile. The callers' votes
// are of different partitions (each holds its partitions' voter locks
// until it returns).
func (m *Manager) persist(ctx context.Context, votes []record.LeaseVote) error {
	if len(votes) == 0 {
		return nil
	}
	mine := queuedVotes{votes: votes, done: make(chan error, 1)}
	m.persistMu.Lock()
	m.queued = append(m.queued, mine)
	if !m.saving {
		m.saving = true
		go m.saveQueued(context.WithoutCancel(ctx))
	}
	m.persistMu.Unlock()
	select {
	case err := <-mine.done:
		return err
	case <-ctx.Done():
		// The write may still happen: the grant is refused here, and a
		// vote recorded for a grant never announced is harmless (the
		// epoch is used up, as after any refused campaign).
		return ctx.Err()
	}
}

// saveQueued writes the queued votes, one write for all queued at its
// start, until none is left.
func (m *Manager) saveQueued(ctx context.Context) {
	for {
		m.persistMu.Lock()
		batch := m.queued
		m.queued = nil
		if len(batch) == 0 {
			m.saving = false
			m.persistMu.Unlock()
			return
		}
		next := make(map[int]record.LeaseVote, len(m.durable))
		for p, v := range m.durable {
			next[p] = v
		}
		m.persistMu.Unlock()
		for _, q := range batch {
			for _, v := range q.votes {
				next[v.Partition] = v
			}
		}
		saveCtx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
		err := m.cfg.Store.SaveLeaseVotes(saveCtx, next)
		cancel()
		if err == nil {
			m.persistMu.Lock()
			m.durable = next
			m.persistMu.Unlock()
		}
		for _, q := range batch {
			q.done <- err
		}
	}
}

// Run campaigns, renews and steps down until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	tick := time.NewTicker(m.cfg.TTL / 6)
	defer tick.Stop()
	for {
		m.Round(ctx)
		m.roundMu.Lock()
		close(m.rounded)
		m.rounded = make(chan struct{})
		m.roundMu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.urgent:
		}
	}
}

// Release gives up the lease of partition at once, on this node and on
// every voter that answers, so that the next master need not wait for the
// lease to run out. The caller must have stopped every write to the
// partition first (the writer paused): a commit that passed its lease check
// before the release could otherwise overlap the next master. It reports
// whether this node held the lease.
//
// This node then skips the partition in its campaign rounds for a TTL,
// even in a round that decided to want it before the release: the lease
// is for the node it is handed to (or, if that one does not take it, for
// the most current copy once the release is a TTL old). Taking it back at
// once, at the next epoch, beat the receiver's campaign: in CI a draining
// node did so with 71 leases it had just released, and its drain did not
// end.
func (m *Manager) Release(ctx context.Context, partition int) bool {
	if partition < 0 || partition >= m.cfg.Partitions {
		return false
	}
	m.mu.Lock()
	m.attempt[partition] = m.cfg.Now().Add(m.cfg.TTL)
	rel, ok := m.holder.StepDown(partition)
	voters := m.holder.Voters()
	m.mu.Unlock()
	if !ok {
		return false
	}
	m.log.Info("releasing the lease for a handoff", "partition", partition, "epoch", rel.Epoch)
	m.toVoters(ctx, voters, Batch{Releases: []Release{rel}}, func(v string, _ []Decision, err error) {
		if err != nil {
			m.log.Debug("lease voter did not take a release", "voter", v, "err", err)
		}
	})
	return true
}

// Acquire campaigns for partition now, without waiting for the next round
// or the retry delay, and waits until this node holds it or ctx ends. The
// plan must want the partition. A handoff's receiver calls it once the
// previous master has released the lease.
func (m *Manager) Acquire(ctx context.Context, partition int) (uint64, error) {
	if partition < 0 || partition >= m.cfg.Partitions {
		return 0, fmt.Errorf("no partition %d", partition)
	}
	m.mu.Lock()
	m.eager[partition] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.eager[partition] = false
		m.mu.Unlock()
	}()
	for {
		if e, ok := m.Holds(partition); ok {
			return e, nil
		}
		// A refused campaign is tried again after retryAfter, not at
		// once: a refusal records nothing and comes back in a round trip,
		// and every attempt uses up an epoch (a round before then would
		// skip the partition).
		m.mu.Lock()
		wait := m.attempt[partition].Add(m.retryAfter(partition)).Sub(m.cfg.Now())
		m.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return 0, fmt.Errorf("partition %d not acquired: %w", partition, ctx.Err())
			}
		}
		m.roundMu.Lock()
		rounded := m.rounded
		m.roundMu.Unlock()
		select {
		case m.urgent <- struct{}{}:
		default:
		}
		select {
		case <-rounded:
		case <-ctx.Done():
			return 0, fmt.Errorf("partition %d not acquired: %w", partition, ctx.Err())
		}
	}
}

// Round is one pass: decide what to send, send it to every voter at once,
// observe the answers. Run calls it every TTL/6.
func (m *Manager) Round(ctx context.Context) {
	plan := m.cfg.Plan()
	now := m.cfg.Now()
	m.noteVoterRole(plan, now)
	// Decide what is wanted before taking the holder lock: Want may wait on
	// a voter lock held across a store write, and Holds (every write's
	// check) must never wait behind that.
	want := make([]bool, m.cfg.Partitions)
	for p := range want {
		want[p] = plan.Want(p)
	}
	m.stepVoters(ctx, plan, now)
	m.mu.Lock()
	var b Batch
	renewals := m.holder.RenewalsDue(now)
	renewing := map[int]bool{}
	for _, r := range renewals {
		renewing[r.Partition] = true
		if want[r.Partition] {
			b.Requests = append(b.Requests, withList(plan, r))
		} else if rel, ok := m.holder.StepDown(r.Partition); ok {
			// The lease is left to run out on the voters rather than
			// released: a commit that passed its lease check just before
			// the step-down must end before anyone else can start.
			m.log.Info("stepping down", "partition", r.Partition, "epoch", rel.Epoch)
		}
	}
	// A new list of copies goes out at once, not at the next renewal due:
	// the tenure, or the change of copies, waits for the voters to keep it.
	for p, c := range m.carry {
		if !c || renewing[p] || !want[p] {
			continue
		}
		m.carry[p] = false
		if r, ok := m.holder.RenewNow(p, now); ok {
			renewing[p] = true
			b.Requests = append(b.Requests, withList(plan, r))
		}
	}
	// While this node's own voter waits out its first TTL, so most likely
	// do the others started with it: campaigning now would only use up
	// epochs on refusals.
	// (An Acquire campaigns anyway: the previous holder released it.)
	campaign := m.voterState().Wait(now, m.cfg.TTL) == 0
	for p := 0; p < m.cfg.Partitions; p++ {
		if renewing[p] || !want[p] || m.holder.Holds(p, now) || !campaign && !m.eager[p] {
			continue
		}
		// Campaign at most once a round per partition while refused, so a
		// lapsed lease is taken within a round of its end; an Acquire
		// (retryAfter) sooner, but not in every round.
		if now.Sub(m.attempt[p]) < m.retryAfter(p) {
			continue
		}
		m.attempt[p] = now
		b.Requests = append(b.Requests, m.holder.Propose(p, now))
	}
	voters := m.holder.Voters()
	m.mu.Unlock()

	// Renewals and campaigns go in separate batches, side by side: a voter
	// answers a campaign only once its grant is in its store, and a slow
	// store must not hold up the renewals (they record nothing new) until
	// the leases run out.
	// Renewals that carry a list not yet kept go in a third batch: the
	// voter records such a list before it answers, and a slow store must
	// not hold up the plain renewals either.
	var renew, renewList, fresh Batch
	for _, r := range b.Requests {
		switch {
		case !renewing[r.Partition]:
			fresh.Requests = append(fresh.Requests, r)
		case r.List != nil && !m.isKept(r.Partition, r.List):
			renewList.Requests = append(renewList.Requests, r)
		default:
			renew.Requests = append(renew.Requests, r)
		}
	}
	var wg sync.WaitGroup
	for _, part := range []Batch{renew, renewList, fresh} {
		if len(part.Requests) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.send(ctx, voters, part, now)
		}()
	}
	wg.Wait()
	m.report(now)
}

// withList is renewal r carrying the plan's list of copies of its
// partition, if the plan has one of the lease's epoch.
func withList(plan Plan, r Request) Request {
	if plan.List != nil {
		if l := plan.List(r.Partition); l != nil && l.Epoch == r.Epoch {
			r.List = l
		}
	}
	return r
}

// VoterSets reports the voter set leases are asked of now and the one the
// peer list asks for; they differ while a change is applied step by step.
func (m *Manager) VoterSets() (current, target []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	current = slices.Clone(m.lastVoters)
	target = slices.Clone(m.target)
	if target == nil {
		target = slices.Clone(current)
	}
	return current, target
}

// voterState is this node's state as a voter.
func (m *Manager) voterState() VoterState {
	m.voterMuState.Lock()
	defer m.voterMuState.Unlock()
	return m.voter
}

// noteVoterRole starts the new-voter wait when the peer list makes this
// node a voter: it may hold no records of grants the others made.
func (m *Manager) noteVoterRole(plan Plan, now time.Time) {
	is := slices.Contains(plan.Voters, m.cfg.Self)
	m.voterMuState.Lock()
	defer m.voterMuState.Unlock()
	if is && !m.wasVoter {
		m.log.Info("became a lease voter; granting nothing for one LEASE_TTL", "ttl", m.cfg.TTL)
		m.voter = VoterState{Since: now}
	}
	m.wasVoter = is
}

// stepVoters moves the holder's voter set toward the plan's one member at a
// time. Each step is recorded in the store before it is used, outside the
// holder lock (a store write must never hold up Holds).
func (m *Manager) stepVoters(ctx context.Context, plan Plan, now time.Time) {
	target := slices.Sorted(slices.Values(plan.Voters))
	m.mu.Lock()
	m.target = target
	current, changedAt := m.lastVoters, m.changedAt
	m.mu.Unlock()
	if slices.Equal(target, current) {
		return
	}
	next, _ := NextVoterSet(current, target, changedAt, now, plan.Settle)
	if slices.Equal(next, current) {
		return
	}
	if err := m.cfg.Store.SaveVoterSet(ctx, next, now); err != nil {
		m.log.Error("could not record the next lease voter set; keeping the current one", "next", next, "err", err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.holder.SetVoters(next); err != nil {
		m.log.Error("voter set change refused", "from", current, "to", next, "err", err)
		return
	}
	m.log.Info("lease voters changed by one step", "from", current, "to", next, "target", target)
	// The settle delay runs from when the holder started using the step,
	// not from the round that decided it: recording it may have taken a
	// while (a slow store), and counting that time would shorten the delay.
	m.lastVoters, m.changedAt = next, m.cfg.Now()
}

// toVoters delivers b to every voter at once (this node's own voter
// directly), bounded by a third of the TTL, and hands each answer to
// answered, from the voter's goroutine.
func (m *Manager) toVoters(ctx context.Context, voters []string, b Batch, answered func(voter string, ds []Decision, err error)) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
	defer cancel()
	var wg sync.WaitGroup
	for _, v := range voters {
		wg.Add(1)
		go func(v string) {
			defer wg.Done()
			if v == m.cfg.Self {
				answered(v, m.Vote(ctx, b), nil)
				return
			}
			ds, err := m.cfg.Transport.Vote(ctx, v, b)
			answered(v, ds, err)
		}(v)
	}
	wg.Wait()
}

// send delivers the batch to every voter (a later renewal supersedes a
// slower answer anyway).
func (m *Manager) send(ctx context.Context, voters []string, b Batch, sentAt time.Time) {
	var keptMu sync.Mutex
	kept := make([]int, len(b.Requests)) // voters that granted request i keeping its list
	defer func() {
		for i, r := range b.Requests {
			if r.List != nil && kept[i] >= Majority(len(voters)) && m.listKept(r.Partition, r.List) && m.cfg.OnListKept != nil {
				m.cfg.OnListKept(r.Partition)
			}
		}
	}()
	m.toVoters(ctx, voters, b, func(v string, ds []Decision, err error) {
		if err == nil && len(ds) != len(b.Requests) {
			err = fmt.Errorf("voter %s answered %d decisions for %d requests", v, len(ds), len(b.Requests))
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				m.log.Debug("lease voter did not answer", "voter", v, "err", err)
			}
			return
		}
		m.mu.Lock()
		for i, d := range ds {
			m.holder.Observe(b.Requests[i].Partition, v, sentAt, d)
		}
		m.mu.Unlock()
		keptMu.Lock()
		for i, d := range ds {
			if d.Granted && b.Requests[i].List != nil && b.Requests[i].List.Same(d.Record.List) {
				kept[i]++
			}
		}
		keptMu.Unlock()
		for i, d := range ds {
			if about(b.Requests[i].Partition, d.Record) {
				m.seeList(b.Requests[i].Partition, d.Record.List)
			}
		}
	})
}

// seeList notes a list of copies a voter keeps for partition.
func (m *Manager) seeList(partition int, l *record.CopyList) {
	if l == nil || partition < 0 || partition >= m.cfg.Partitions {
		return
	}
	m.listMu.Lock()
	defer m.listMu.Unlock()
	m.newest[partition] = latestTwo(m.newest[partition], l)
}

// latestTwo adds l to seen, the latest lists of the newest epoch, and
// keeps the two latest: the list a majority of the voters keeps, and the
// next one, which some may keep already (its master counts on it only
// once a majority does). Older lists of that epoch are on a minority of
// the voters only, and nothing was counted on them since.
func latestTwo(seen []*record.CopyList, l *record.CopyList) []*record.CopyList {
	if len(seen) > 0 && l.Epoch < seen[0].Epoch {
		return seen
	}
	if len(seen) > 0 && l.Epoch > seen[0].Epoch {
		seen = nil
	}
	for _, s := range seen {
		if s.Same(l) {
			return seen
		}
	}
	seen = append(slices.Clone(seen), l.Clone())
	slices.SortFunc(seen, func(a, b *record.CopyList) int { return cmp.Compare(b.Seq, a.Seq) })
	return seen[:min(len(seen), 2)]
}

// listKept notes that a majority of the voters keeps l, this node's list
// of copies of partition, and reports whether that is news.
func (m *Manager) listKept(partition int, l *record.CopyList) bool {
	m.listMu.Lock()
	defer m.listMu.Unlock()
	news := l.Newer(m.onVoters[partition])
	m.onVoters[partition] = record.Newest(m.onVoters[partition], l).Clone()
	m.newest[partition] = latestTwo(m.newest[partition], l)
	return news
}

// ListOnVoters is this node's newest list of copies of partition that a
// majority of the voters kept when it renewed with it (nil: none).
func (m *Manager) ListOnVoters(partition int) *record.CopyList {
	if partition < 0 || partition >= m.cfg.Partitions {
		return nil
	}
	m.listMu.Lock()
	defer m.listMu.Unlock()
	return m.onVoters[partition].Clone()
}

// CarryList has the next round renew the lease of partition with this
// node's list of copies at once (Plan.List), rather than when a renewal
// is next due, and wakes that round: the node records a new list and
// waits for the voters to keep it.
func (m *Manager) CarryList(partition int) {
	if partition < 0 || partition >= m.cfg.Partitions {
		return
	}
	m.mu.Lock()
	m.carry[partition] = true
	m.mu.Unlock()
	select {
	case m.urgent <- struct{}{}:
	default:
	}
}

// NewestLists is the latest lists of copies of partition of the newest
// epoch below before that this node has seen the voters keep: from its
// own voter record and every voter's answer to its campaigns, renewals
// and queries; at most two (the one a majority keeps and the next, see
// latestTwo). A node that won the partition at epoch before read them
// from the majority that granted it, which shares a voter with every
// majority that kept a list.
func (m *Manager) NewestLists(partition int, before uint64) []*record.CopyList {
	if partition < 0 || partition >= m.cfg.Partitions {
		return nil
	}
	own := m.seenRecord(partition).List
	m.listMu.Lock()
	seen := m.newest[partition]
	m.listMu.Unlock()
	if own != nil {
		seen = latestTwo(seen, own)
	}
	var out []*record.CopyList
	for _, l := range seen {
		if l.Epoch < before {
			out = append(out, l.Clone())
		}
	}
	return out
}

// isKept reports whether a majority of the voters keeps l already.
func (m *Manager) isKept(partition int, l *record.CopyList) bool {
	m.listMu.Lock()
	defer m.listMu.Unlock()
	return m.onVoters[partition].Same(l)
}

// KeptCovers reports whether a majority of the voters keeps this node's
// list of copies of partition at epoch, and it names every one of copies
// (master first): the copies its table counts writes on. It may name
// more: copies leaving the regular ones while the count of copies falls
// stay on it until the copies left hold what they held
// (placement.KeepReplacedCopies), and a node that takes the partition
// over then asks them too.
func (m *Manager) KeptCovers(partition int, epoch uint64, copies []string) bool {
	if partition < 0 || partition >= m.cfg.Partitions {
		return false
	}
	m.listMu.Lock()
	defer m.listMu.Unlock()
	l := m.onVoters[partition]
	if l == nil || l.Epoch != epoch {
		return false
	}
	for _, c := range copies {
		if !slices.Contains(l.Copies, c) {
			return false
		}
	}
	return true
}

// report tells OnChange what changed: partitions gained or lost, and
// holders learned from voters.
func (m *Manager) report(now time.Time) {
	if m.cfg.OnChange == nil {
		return
	}
	type change struct {
		p      int
		holder string
		epoch  uint64
	}
	var changes []change
	var lost []int
	m.mu.Lock()
	for p := range m.reported {
		if m.holder.Holds(p, now) {
			if e := m.holder.Epoch(p); m.reported[p] != e {
				m.reported[p] = e
				changes = append(changes, change{p, m.cfg.Self, e})
			}
			continue
		}
		if m.reported[p] != 0 {
			m.reported[p] = 0
			lost = append(lost, p)
			m.log.Debug("no longer master", "partition", p)
		}
		// A holder learned from a voter's refusal is not reported: it may
		// be a campaign that never reached a majority. Masters announce
		// themselves.
	}
	m.mu.Unlock()
	if len(lost) > 0 {
		slices.Sort(lost)
		m.log.Info(fmt.Sprintf("no longer master of %s", wording.Plural(len(lost), "partition")), "partitions", wording.Ranges(lost))
	}
	for _, c := range changes {
		m.cfg.OnChange(c.p, c.holder, c.epoch)
	}
}

// retryAfter is the least time between two campaigns of partition (call
// with mu held): TTL/8 in the rounds, TTL/30 for an Acquire, which wants
// the partition at once (a handoff's writes are paused meanwhile) but must
// not spend an epoch in every round while the voters refuse it.
func (m *Manager) retryAfter(partition int) time.Duration {
	if m.eager[partition] {
		return m.cfg.TTL / 30
	}
	return m.cfg.TTL / 8
}

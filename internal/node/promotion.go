package node

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/placement"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// promotion decides which copy takes a partition over when its master is
// gone: the live member of the responsible list with the highest applied
// position (lease.MayCampaign). Want must not block, so it only reads
// positions heard from the other members; a goroutine asks them.
type promotion struct {
	*promotionDeps
	wake chan struct{}

	mu   sync.Mutex
	asks map[int]*positionAsk
	// checks: which tenures must be confirmed before they take writes.
	checks tenureChecks
	// votersSaid: for a node that is not a voter (or a voter whose record
	// is older than the table's tenure), what a majority of the
	// voters last said of each partition's lease it holds a regular copy
	// of (lease.Manager.Ended), and when.
	votersSaid  map[int]heardLapse
	lastQueried time.Time
	// yielded: tenures this node gave up because a copy was ahead; while
	// the table names no later master, the promotion rule decides for it
	// (it must not take its own lease back).
	yielded map[int]uint64
}

type heardLapse struct {
	l  placement.Lapse
	at time.Time
}

// positionAsk is one spell of a partition without a master: the positions
// heard from the other live members since it began.
type positionAsk struct {
	since     time.Time // when this node found the master gone
	lastAsked time.Time // when Want last asked (the spell ends when it stops)
	members   []string
	heard     map[string]heardPosition
}

type heardPosition struct {
	pos store.Position
	at  time.Time // when the question was sent
}

// promotionDeps is what promotion uses of its node (built by StartWith).
type promotionDeps struct {
	self string // NODE_ID
	// incarnation is this process's (cluster.Cluster.Incarnation): a list
	// of copies that names this node at it was recorded before any write
	// this process could have acknowledged on it.
	incarnation int64
	partitions  int           // PARTITION_COUNT
	leaseTTL    time.Duration // LEASE_TTL
	log         *slog.Logger

	leases promotionLeases
	writer promotionWriter
	table  *shard.Table
	peers  peers
	voters func() []string // the lease voters in force (peerRing.Voters)

	// The node's own rules (Node.copies, Node.lapseOf, Node.wakeTenures).
	copies  func() int
	lapseOf func(p int) placement.Lapse
	// lost says a member is gone for good (Node.memberLost: DOWN past
	// REPLICA_REPLACE_AFTER, or neither in the peer list nor gossiping).
	lost        func(id string) bool
	wakeTenures func()
	// wakeReplicas has the replica loop record a confirmed tenure's list.
	wakeReplicas func()
	// broadcast gossips assignments this node changed in the table.
	broadcast func([]shard.Assignment)
}

// promotionLeases is the lease manager as promotion uses it
// (lease.Manager).
type promotionLeases interface {
	Holds(p int) (uint64, bool)
	LastEpoch(p int) uint64
	RecordEpoch(p int) uint64
	RecordStale(p int) bool
	Ended(ctx context.Context, ps []int) []lease.EndedLease
	Release(ctx context.Context, p int) bool
	// NewestLists is the latest lists of regular copies of an epoch
	// before the given one that the voters keep (lease.Manager.NewestLists).
	NewestLists(p int, before uint64) []*record.CopyList
	// CarryList has the next lease round carry this node's list of p.
	CarryList(p int)
}

// promotionWriter is the partition writer as promotion uses it
// (store.Writer).
type promotionWriter interface {
	Applied(p int) store.Position
	NewestEpoch(p int) uint64
	Recopying(p int) bool
	Untouched(p int) bool
	// Whole is told that this node's tenure of p may write: its copy
	// holds every write a majority acknowledged (store.Writer.Whole).
	Whole(p int)
}

func newPromotion(deps *promotionDeps) *promotion {
	return &promotion{promotionDeps: deps, wake: make(chan struct{}, 1), asks: map[int]*positionAsk{},
		checks: newTenureChecks(deps.leaseTTL), votersSaid: map[int]heardLapse{}, yielded: map[int]uint64{}}
}

// mayCampaign says whether this node should campaign for partition p,
// whose master is gone: only if, among itself and the live members of the
// responsible list it has heard from since, it holds the most history
// (ties to the master the table names when it is up, named, then to the
// lowest id), and it has heard from enough of them that a
// write acknowledged by a majority of the copies is among them.
//
// The copies asked are those up (not merely seen by gossip, but not found
// gone by their lease either). When they are too few for the quorum, the
// copies gossip still reaches are asked too, whose lease is over: a
// former master that gave its tenure up still knows how far it holds the
// partition, and without its answer nobody could reach the quorum. (When
// the up copies suffice, a copy whose lease is over is left out: it may be
// cut from the voters and unable to win, and nobody should wait for it.)
func (pr *promotion) mayCampaign(p int, regular []string, up, reachable func(string) bool, named string) bool {
	self := pr.self
	var others []string
	for _, id := range regular {
		if id != self && up(id) {
			others = append(others, id)
		}
	}
	copies := pr.copies()
	if need := copies - copies/2; len(others)+1 < need {
		for _, id := range regular {
			if id != self && !up(id) && reachable(id) {
				others = append(others, id)
			}
		}
	}
	positions := map[string]store.Position{self: pr.writer.Applied(p)}
	if len(others) > 0 {
		pr.mu.Lock()
		a := pr.askLocked(p, others, time.Now())
		for _, id := range others {
			if h, ok := a.heard[id]; ok && h.at.After(a.since) {
				positions[id] = h.pos
			}
		}
		pr.mu.Unlock()
		select {
		case pr.wake <- struct{}{}:
		default:
		}
	}
	ok, why := lease.MayCampaign(self, positions, copies, named)
	if !ok {
		pr.log.Debug("not campaigning for a partition whose master is gone", "partition", p, "why", why)
		return false
	}
	pr.mu.Lock()
	pr.checks.campaign(p, time.Now())
	pr.mu.Unlock()
	return true
}

// askLocked has members asked for their positions of p in the current
// spell without a master, or a new one if the last ask is older than
// LEASE_TTL (answers from before a spell began do not count in it); call
// with pr.mu held.
func (pr *promotion) askLocked(p int, members []string, now time.Time) *positionAsk {
	a := pr.asks[p]
	if a == nil || now.Sub(a.lastAsked) > pr.leaseTTL {
		a = &positionAsk{since: now, heard: map[string]heardPosition{}}
		pr.asks[p] = a
	}
	a.lastAsked, a.members = now, members
	return a
}

// mayTakeOver says whether this node, which holds no regular copy of p,
// may campaign in place of its gone master, the partition's only regular
// copy, which gossip still reaches: only once the master has answered,
// since this node found it gone (its lease over: it writes no more), with
// a position this node's copy has reached. The tenure won so is confirmed
// like one won by the promotion rule before it takes writes.
func (pr *promotion) mayTakeOver(p int, master string) bool {
	now := time.Now()
	pr.mu.Lock()
	a := pr.askLocked(p, []string{master}, now)
	h, heard := a.heard[master]
	heard = heard && h.at.After(a.since)
	pr.mu.Unlock()
	if !heard {
		select {
		case pr.wake <- struct{}{}:
		default:
		}
		return false
	}
	if own := pr.writer.Applied(p); own.Compare(h.pos) < 0 {
		pr.log.Debug("not taking over a partition whose only copy is ahead", "partition", p, "master", master, "at", h.pos, "own", own)
		return false
	}
	pr.mu.Lock()
	pr.checks.campaign(p, now)
	pr.mu.Unlock()
	return true
}

// queryVoters, on a node that is not a lease voter, asks the voters every
// LEASE_TTL/3 whether the lease of each partition it holds a regular copy
// of (and does not master) is over: a master cut off from the voters but
// still seen UP by gossip is then found gone by its lease alone, as a
// voter finds it from its own records. A voter asks too about a partition
// whose table names a later tenure than its own record (it was paused or
// cut off when that lease was granted). Any node asks who last held a
// partition whose master nobody has named to it.
func (pr *promotion) queryVoters(ctx context.Context) {
	if time.Since(pr.lastQueried) < pr.leaseTTL/3 {
		return
	}
	pr.lastQueried = time.Now()
	voters := pr.voters()
	voter := slices.Contains(voters, pr.self)
	copies := pr.copies()
	var ps []int
	for p := 0; p < pr.partitions; p++ {
		a := pr.table.Get(p)
		_, holding := pr.leases.Holds(p)
		if placement.AsksVoters(pr.self, a, holding, voter, pr.leases.RecordEpoch(p), pr.leases.RecordStale(p), copies) {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return
	}
	said := pr.leases.Ended(ctx, ps)
	now := time.Now()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, e := range said {
		if e.Ended {
			pr.votersSaid[e.Partition] = heardLapse{l: placement.Lapse{Holder: e.Holder, Epoch: e.Epoch, Ended: true}, at: now}
		} else {
			delete(pr.votersSaid, e.Partition)
		}
	}
}

// lapseHeard is what a majority of the voters said of p's lease within the
// last LEASE_TTL (the zero lapse if nothing, or nothing recent).
func (pr *promotion) lapseHeard(p int) placement.Lapse {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	h, ok := pr.votersSaid[p]
	if !ok || time.Since(h.at) > pr.leaseTTL {
		return placement.Lapse{}
	}
	return h.l
}

// yieldedAt reports whether this node gave up its tenure of p at epoch
// (or later) because a copy was ahead.
func (pr *promotion) yieldedAt(p int, epoch uint64) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	e, ok := pr.yielded[p]
	if ok && e < epoch {
		delete(pr.yielded, p) // a later tenure is known: over
		return false
	}
	return ok
}

// heardOf lists the positions of p heard from the other copies in the
// current spell without a master.
func (pr *promotion) heardOf(p int) map[string]store.Position {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	out := map[string]store.Position{}
	if a := pr.asks[p]; a != nil {
		for id, h := range a.heard {
			if h.at.After(a.since) {
				out[id] = h.pos
			}
		}
	}
	return out
}

// mayRetake says whether this node, its copy at own, takes back its own
// tenure of p, lapsed or named from its tenure record after a restart, or
// a grant the voters name it the holder of (placement.AskRetake): the
// tenure it wins is confirmed before it writes, as one won by the
// promotion rule. Meanwhile it does not contest a copy of regular, up,
// that has answered with a position of a later epoch than the tenure the
// table names: that copy campaigns by the promotion rule
// (placement.Decide), and two candidates, each granted by its own voter
// first, would split the votes for as long as both went on. A copy ahead
// within that tenure (this node lost part of its own history) waits for
// this node, which steps down for it once it wins and hears it.
func (pr *promotion) mayRetake(p int, own store.Position, regular []string, up func(string) bool) bool {
	tenure := pr.table.Get(p).Epoch
	var others []string
	for _, id := range regular {
		if id != pr.self && up(id) {
			others = append(others, id)
		}
	}
	now := time.Now()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if len(others) > 0 {
		a := pr.askLocked(p, others, now)
		select {
		case pr.wake <- struct{}{}:
		default:
		}
		for _, id := range others {
			if h, ok := a.heard[id]; ok && h.at.After(a.since) && h.pos.Compare(own) > 0 && h.pos.Epoch > tenure {
				pr.log.Debug("not taking a partition back: a copy is ahead", "partition", p, "copy", id, "at", h.pos, "own", own)
				return false
			}
		}
	}
	pr.checks.campaign(p, now)
	return true
}

// confirmation is whom a tenure's check asks: the regular copies of its
// list, or, when the list names no other (a grant taken back after a
// restart, before the table knew the partition's list), every member, of
// whom only those holding the partition count.
type confirmation struct {
	members  []string
	everyone bool
}

// confirmAsks is whom self asks to confirm a tenure whose list's regular
// copies are regular: those UP but self, or every member UP but self when
// regular names no other.
func confirmAsks(self string, regular []string, states map[string]cluster.State) confirmation {
	var c confirmation
	for _, id := range regular {
		if id != self && states[id] == cluster.Up {
			c.members = append(c.members, id)
		}
	}
	if slices.ContainsFunc(regular, func(id string) bool { return id != self }) {
		return c
	}
	c.everyone = true
	for _, id := range slices.Sorted(maps.Keys(states)) {
		if id != self && states[id] == cluster.Up {
			c.members = append(c.members, id)
		}
	}
	return c
}

// won is told of every tenure this node starts, with the table's entry
// before it (see tenureChecks.won).
func (pr *promotion) won(p int, epoch uint64, before shard.Assignment) {
	lists := pr.leases.NewestLists(p, epoch)
	pr.mu.Lock()
	registered := pr.checks.won(p, tenureCheck{epoch: epoch, won: time.Now(), previous: before.Master, lists: lists})
	pr.mu.Unlock()
	if !registered && pr.confirmed(p, epoch) {
		pr.writer.Whole(p)
	}
	if registered {
		select {
		case pr.wake <- struct{}{}:
		default:
		}
	}
}

// confirmed reports whether this node's tenure of p at epoch may take
// writes (see tenureChecks.confirmed).
func (pr *promotion) confirmed(p int, epoch uint64) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.checks.confirmed(p, epoch, time.Now())
}

// confirm asks the regular copies of each unconfirmed tenure again and
// confirms it, or steps down when a copy is ahead.
func (pr *promotion) confirm(ctx context.Context) {
	pr.mu.Lock()
	checks := pr.checks.due()
	pr.mu.Unlock()
	if len(checks) == 0 {
		return
	}
	states := pr.peers.States()
	byMember := map[string][]int{}
	everyone := map[int]bool{}      // partitions whose check asks every member
	tableList := map[int][]string{} // the regular copies the table names
	listsOnly := map[int]bool{}     // partitions this node holds nothing of
	asked := map[int][]string{}     // of those with no list kept: the members asked
	for p, c := range checks {
		if pr.leases.LastEpoch(p) != c.epoch {
			pr.mu.Lock()
			pr.checks.drop(p) // the tenure is over anyway
			pr.mu.Unlock()
			delete(checks, p)
			continue
		}
		if e, ok := pr.leases.Holds(p); !ok || e != c.epoch {
			// Lapsed, but it may be renewed at its epoch: the check
			// stays until then (a renewal does not confirm it).
			delete(checks, p)
			continue
		}
		// A node whose copy of p awaits a full copy (its store is new:
		// it may have lost the partition with its data directory; or it
		// threw its history away), or that holds nothing of p and has
		// seen nothing of it (no epoch in its history, a master's
		// batches or its tenures; a copy sent an empty partition counts
		// as that copy), counts as no copy, and the voters' lists decide
		// (lease.ConfirmHoldingNothing): a write acknowledged by a
		// majority was counted on a list a majority of the voters kept
		// before it (a tenure takes no write until then, and carries its
		// list only once confirmed), and the majority that granted this
		// tenure shares a voter with that one. A list that names this
		// node at this process's incarnation counts it all the same: it
		// was recorded before the partition held anything, so this
		// process was sent nothing (a replica whose master died before
		// its first batch). With no list kept, every member is asked
		// whether it holds anything.
		var regular []string
		if pr.writer.Recopying(p) || pr.seenNothing(p) {
			listsOnly[p] = true
		} else {
			regular = shard.WriteQuorum(pr.copies()).Regular(pr.table.Get(p).Responsible)
			tableList[p] = regular
		}
		// The list the previous master last counted writes on is one the
		// voters keep (the majority that granted this tenure shares a
		// voter with the one that kept it); this node's table may not
		// have heard of it. Its copies are asked too.
		regular = slices.Clone(regular)
		for _, l := range c.lists {
			for _, id := range l.Copies {
				if !slices.Contains(regular, id) {
					regular = append(regular, id)
				}
			}
		}
		var ask confirmation
		switch {
		case listsOnly[p] && len(c.lists) == 0:
			// Every member must answer, not only those up: a voter whose
			// store was emptied too keeps no list, and the copies of the
			// partition may be the ones down. Only a member lost for good
			// is not waited for.
			for _, id := range slices.Sorted(maps.Keys(states)) {
				if id == pr.self || pr.lost(id) {
					continue
				}
				asked[p] = append(asked[p], id)
				if states[id] == cluster.Up {
					ask.members = append(ask.members, id)
				}
			}
		case listsOnly[p]:
			for _, id := range regular { // the lists' copies alone
				if id != pr.self && states[id] == cluster.Up {
					ask.members = append(ask.members, id)
				}
			}
		default:
			ask = confirmAsks(pr.self, regular, states)
		}
		everyone[p] = ask.everyone
		for _, id := range ask.members {
			byMember[id] = append(byMember[id], p)
		}
	}
	heard := map[int]map[string]store.Position{}
	for p := range checks {
		heard[p] = map[string]store.Position{}
	}
	// Copies awaiting a full copy (api.PositionAnswer.Partial) may lack
	// writes their node acknowledged: they count for no list, unless a
	// voters' list names them at the incarnation of the process that
	// answered, and that process has taken nothing of the partition
	// (lease.NamedAtIncarnation: it acknowledged nothing). A check that
	// asks every member whether it holds anything (no list kept) takes
	// their answer, as holding nothing of what it must find: every
	// member not lost for good answers there, the copies that hold the
	// writes included.
	partial := map[int]map[string]bool{}
	askCtx, cancel := context.WithTimeout(ctx, pr.leaseTTL/3)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for m, ps := range byMember {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := pr.positionsOf(askCtx, m, ps)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range ps {
				pos, ok := got[p]
				switch {
				case !ok:
				case !pos.Partial:
					heard[p][m] = pos.Position
				case listsOnly[p] && len(checks[p].lists) == 0,
					lease.NamedAtIncarnation(m, pos.Incarnation, checks[p].lists):
					heard[p][m] = store.Position{}
				default:
					if partial[p] == nil {
						partial[p] = map[string]bool{}
					}
					partial[p][m] = true
				}
			}
		}()
	}
	wg.Wait()
	// Which members are gone for good, read once per member in this pass.
	goneSeen := map[string]bool{}
	gone := func(id string) bool {
		g, ok := goneSeen[id]
		if !ok {
			g = pr.lost(id)
			goneSeen[id] = g
		}
		return g
	}
	for p, c := range checks {
		// Copies whose lease is over (the previous master, or by this
		// node's voter record or the voters' answers) may be unable to
		// campaign (cut off from the voters): they never make this node
		// step down.
		own := pr.writer.Applied(p)
		l, a := pr.lapseOf(p), pr.table.Get(p)
		up, over := map[string]store.Position{}, map[string]store.Position{}
		for id, pos := range heard[p] {
			if everyone[p] && pos == (store.Position{}) {
				continue // asked as any member: it holds nothing of p
			}
			if id == c.previous || l.Over(id, a) {
				over[id] = pos
			} else {
				up[id] = pos
			}
		}
		// Confirmed on the table's list (as before the voters kept
		// lists: a write counted on it while the voters' list was not yet
		// taken is on a majority of it) and on the voters' list.
		var ok, stepDown bool
		var why string
		if listsOnly[p] {
			// This process acknowledged nothing of p if its copy is new
			// and untouched, or it has seen nothing of p; a copy that
			// threw its history away may have.
			var inc int64
			if pr.writer.Untouched(p) || pr.seenNothing(p) {
				inc = pr.incarnation
			}
			ok, stepDown, why = lease.ConfirmHoldingNothing(pr.self, inc, up, over, asked[p], c.lists, pr.copies(), gone)
		} else {
			ok, stepDown, why = lease.ConfirmOnLists(pr.self, own, up, over, tableList[p], everyone[p], c.lists, pr.copies(), gone)
		}
		switch {
		case ok:
			pr.settle(p, c.epoch)
		case stepDown:
			// No write was taken in this tenure (it was not confirmed),
			// so releasing the lease at once is safe; the release keeps
			// this node out of the next campaign rounds for a TTL, so the
			// copy ahead campaigns.
			pr.log.Warn("won a partition whose tenure is checked (by the promotion rule, a take-over or a retake), but a copy is ahead; stepping down so that it campaigns",
				"partition", p, "epoch", c.epoch, "why", why)
			pr.listAhead(p, c.epoch, up, own)
			pr.leases.Release(ctx, p)
			pr.mu.Lock()
			pr.checks.drop(p)
			delete(pr.asks, p) // answers heard before are stale: ask again
			pr.yielded[p] = c.epoch
			pr.mu.Unlock()
		default:
			pr.log.Debug("a tenure won by the promotion rule is not confirmed yet", "partition", p, "epoch", c.epoch, "why", why,
				"heard", heard[p], "partial", partial[p], "table", tableList[p], "lists", c.lists, "own", own)
		}
	}
}

// seenNothing reports whether this node has seen nothing of partition p:
// no epoch in its history, a master's batches or its tenures, and
// nothing applied.
func (pr *promotion) seenNothing(p int) bool {
	return pr.writer.NewestEpoch(p) == 0 && pr.writer.Applied(p) == (store.Position{})
}

// settle confirms this node's tenure of p at epoch: it may take writes
// once the voters keep its list, which it carries from now on (see
// Node.copyList).
func (pr *promotion) settle(p int, epoch uint64) {
	pr.mu.Lock()
	pr.checks.confirm(p, epoch)
	pr.mu.Unlock()
	pr.writer.Whole(p)
	pr.wakeReplicas() // its list is recorded now
	pr.leases.CarryList(p)
	pr.wakeTenures()
}

// listAhead gives the copy furthest ahead of own a regular slot in this
// tenure's list, right after this node, and gossips it, before this node
// yields: a copy the voters' list names but this node's table did not
// may not know it holds a regular copy, and would never campaign.
func (pr *promotion) listAhead(p int, epoch uint64, up map[string]store.Position, own store.Position) {
	ahead, best := "", own
	for _, id := range slices.Sorted(maps.Keys(up)) {
		if up[id].Compare(best) > 0 {
			ahead, best = id, up[id]
		}
	}
	a := pr.table.Get(p)
	if ahead == "" || a.Master != pr.self || a.Epoch != epoch || len(a.Responsible) > 1 && a.Responsible[1] == ahead {
		return
	}
	rest := slices.DeleteFunc(slices.Clone(a.Responsible), func(id string) bool { return id == pr.self || id == ahead })
	a.Responsible = append([]string{pr.self, ahead}, rest...)
	a.Revision++
	if pr.table.Merge(a) && pr.broadcast != nil {
		pr.broadcast([]shard.Assignment{a})
	}
}

// run asks the other members for their positions of the partitions Want
// is deciding, until ctx ends.
func (pr *promotion) run(ctx context.Context) {
	tick := time.NewTicker(max(pr.leaseTTL/12, 20*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-pr.wake:
		}
		pr.ask(ctx)
		pr.confirm(ctx)
		pr.queryVoters(ctx)
	}
}

// ask sends one question per member, covering every partition in a spell.
func (pr *promotion) ask(ctx context.Context) {
	now := time.Now()
	byMember := map[string][]int{}
	pr.mu.Lock()
	for p, a := range pr.asks {
		if now.Sub(a.lastAsked) > 2*pr.leaseTTL {
			delete(pr.asks, p) // the spell is over: a master is known again
			continue
		}
		for _, m := range a.members {
			byMember[m] = append(byMember[m], p)
		}
	}
	pr.mu.Unlock()
	if len(byMember) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pr.leaseTTL/3)
	defer cancel()
	var wg sync.WaitGroup
	for m, ps := range byMember {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			got, err := pr.positionsOf(ctx, m, ps)
			if err != nil {
				pr.log.Debug("could not learn a member's positions", "member", m, "err", err)
				return
			}
			pr.mu.Lock()
			defer pr.mu.Unlock()
			for p, pos := range got {
				if a := pr.asks[p]; a != nil {
					// A copy awaiting a full copy answers that it holds
					// nothing: it counts towards a campaign, as the
					// least current copy; the winner's check decides
					// whether it counts as a copy at all.
					a.heard[m] = heardPosition{pos: pos.Position, at: sent}
				}
			}
		}()
	}
	wg.Wait()
}

// positionsOf asks member how far it holds partitions ps.
func (pr *promotion) positionsOf(ctx context.Context, member string, ps []int) (map[int]api.PositionAnswer, error) {
	var out map[int]api.PositionAnswer
	err := callPeer(ctx, pr.peers, "member", member, "/internal/v1/positions", api.PositionsRequest{Partitions: ps}, &out)
	return out, err
}

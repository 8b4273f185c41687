package replicate

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/record"
)

// run is the sender of one replica: it ships queued changes of every
// partition in one request, catches up partitions that need it, and backs
// off while the replica does not answer.
func (s *Shipper) run(d *dest) {
	defer s.wg.Done()
	backoff := 50 * time.Millisecond
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-d.wake:
		case <-tick.C:
			if s.retireIfIdle(d) {
				return
			}
			s.mu.Lock()
			d.sweep = true
			s.mu.Unlock()
		}
		for {
			progressed, err := s.round(d)
			if err != nil {
				s.log.Debug("replica did not take a batch", "replica", d.id, "err", err)
				select {
				case <-s.ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, 2*time.Second)
				break
			}
			backoff = 50 * time.Millisecond
			if !progressed {
				break
			}
		}
	}
}

// retireIfIdle stops d's sender goroutine when its node replicates no
// partition this node masters (it left every responsible list, or this
// node masters nothing now) and nothing is queued or copying for it: a
// node replaced, drained or gone for good must not keep a goroutine.
// What is known of its copies stays: a master whose lease lapsed for a
// moment must still know, when it renews, how far a replica that is down
// acknowledged, or a newcomer could take that replica's slot before it
// holds what the replica held (placement.DecideReplacement).
func (s *Shipper) retireIfIdle(d *dest) bool {
	s.mu.Lock()
	parts, busy := d.busyLocked()
	s.mu.Unlock()
	if busy || s.read(reads{parts: parts}).replicates(d.id, parts) {
		return false
	}
	s.mu.Lock()
	if now, busy := d.busyLocked(); busy || len(now) != len(parts) {
		s.mu.Unlock()
		return false // something queued, or a partition new to it, since
	}
	d.running = false
	s.mu.Unlock()
	// What was read may have changed before the lock: if the node lists
	// the replica again now, the sender goes on, unless a Committed or
	// Ensure has started another meanwhile (it saw this one stopped).
	if s.read(reads{parts: parts}).replicates(d.id, parts) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !d.running {
			d.running = true
			return false
		}
		return true
	}
	s.log.Debug("replica sender stopped: it replicates nothing this node masters", "replica", d.id)
	return true
}

// round sends the queued changes of the partitions to the replica in one
// request, then catches up one partition that needs it (a catch-up sends
// the live changes of the other partitions between its chunks, so neither
// starves the other). It reports whether it sent anything.
func (s *Shipper) round(d *dest) (bool, error) {
	req, catchUp := s.live(d)
	if len(req.Batches) > 0 {
		if err := s.send(d, req); err != nil {
			return true, err
		}
	}
	if catchUp >= 0 {
		d.catchUpFrom = catchUp + 1 // the next catch-up is looked for after this one
		return true, s.catchUp(d, catchUp)
	}
	return len(req.Batches) > 0, nil
}

// flushLive sends the queued changes of the partitions that need no
// catch-up (between the chunks of a catch-up).
func (s *Shipper) flushLive(d *dest) error {
	if req, _ := s.live(d); len(req.Batches) > 0 {
		return s.send(d, req)
	}
	return nil
}

// live takes the queued changes of the partitions the replica can take as
// they are, as many as one request's bounds allow, and names a partition
// that needs a catch-up (-1: none). Both go round the partitions as a
// ring, each from where the previous one stopped, so that neither a
// partition with a long queue nor one whose catch-up keeps failing holds
// up the others.
func (s *Shipper) live(d *dest) (Request, int) {
	snap := s.read(reads{})
	s.mu.Lock()
	now := s.now()
	sweep := d.sweepLocked(now)
	for r := s.liveReadsLocked(d, snap, sweep); !r.empty(); r = s.liveReadsLocked(d, snap, sweep) {
		s.mu.Unlock()
		s.readMore(snap, r)
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	var req Request
	rm := newRoom(s.cfg.MaxBatchDocs, s.cfg.MaxBatchBytes)
	parts := make([]int, 0, len(d.parts))
	for p := range d.parts {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	ring := fromRing(parts, d.liveFrom)
	var catchUp []int
	cut := -1 // the first partition (index in ring) left with runs that did not fit
	for i, p := range ring {
		pr := d.parts[p]
		if pr.stage() == StageCopying {
			continue // its catch-up is streaming; what queues meanwhile follows it
		}
		if !sweep && s.idleLocked(pr, p) {
			continue // nothing for it: its view was not read
		}
		pr.recheck = false
		v := snap.parts[p]
		epoch, master := v.epoch, v.master
		if !master {
			// No longer master (a handoff, or the lease ran out): what was
			// committed while it was still goes out, the tail of its tenure,
			// but nothing is caught up from here any more.
			if pr.waiting() {
				pr.dropQueue()
				continue
			}
		} else if !slices.Contains(v.replicas, d.id) {
			pr.dropQueue()
			continue
		}
		if master && pr.stage() == StageStream {
			// The queue can bring the replica up to date only if it starts
			// where the replica is and reaches the master's history: a
			// commit that failed, or whose lease ran out, stored changes
			// (and used positions) that were never queued, and the writer
			// publishes a commit's position only after queuing it, so a
			// position beyond the last queued one means exactly that.
			last := maxPosition(s.committed[p], v.last)
			if len(pr.queue) == 0 && pr.acked.Compare(last) < 0 {
				pr.queueFallsShort()
			} else if len(pr.queue) > 0 && pr.queue[0].From.Compare(pr.acked) > 0 {
				pr.queueFallsShort()
			}
		}
		if pr.waiting() {
			if pr.rested(now) {
				catchUp = append(catchUp, p)
			}
			continue
		}
		if len(pr.queue) == 0 {
			if master && s.noticeDueLocked(pr, p, epoch) {
				// Nothing new to send, but the committed position moved
				// on (acknowledgements came in), or the replica has not
				// answered a batch of this tenure yet (it may hold changes
				// of an earlier one that this tenure never had: its answer
				// to the first batch keeps them, see Heard): say so alone.
				if !rm.takeHeader(wireBatchBase) {
					if cut < 0 {
						cut = i
					}
					// Not idle until the notice goes: a notice of a new
					// tenure leaves it looking idle (nothing counted at
					// the epoch yet), and a round that skips it could
					// move past it sweep after sweep.
					pr.recheck = true
					continue
				}
				req.Batches = append(req.Batches, ToWire(s.notice(pr, p, epoch, snap)))
			}
			continue
		}
		if rm.full() {
			if cut < 0 {
				cut = i
			}
			continue
		}
		batches, all := s.takeRuns(pr, p, &rm)
		for _, b := range batches {
			s.stampLocked(&b, snap) // the epoch it was committed at
			req.Batches = append(req.Batches, ToWire(b))
		}
		if !all && cut < 0 {
			cut = i
		}
	}
	if cut >= 0 {
		// The next request starts with the partition left waiting, or, if
		// it had this whole request, with the one after it.
		d.liveFrom = ring[cut]
		if cut == 0 && len(ring) > 1 {
			d.liveFrom = ring[1]
		}
	}
	if len(catchUp) == 0 {
		return req, -1
	}
	slices.Sort(catchUp)
	return req, fromRing(catchUp, d.catchUpFrom)[0]
}

// liveReadsLocked is what live decides from and snap lacks: the view of
// every partition it goes through (in a sweep, every partition; else
// those not idle), the tenure of every run queued and of every notice
// due, and the copies, which every batch's majority-committed position is
// counted against. Call with s.mu held; read it with s.mu free, then call
// again: what is queued, or the notices due, may have changed meanwhile.
func (s *Shipper) liveReadsLocked(d *dest, snap *snapshot, sweep bool) reads {
	r := reads{copies: snap.lacksCopies()}
	need := func(p int, epoch uint64) {
		k := tenureOf{p, epoch}
		if _, ok := snap.tenures[k]; !ok && !slices.Contains(r.tenures, k) {
			r.tenures = append(r.tenures, k)
		}
	}
	for p, pr := range d.parts {
		if pr.stage() == StageCopying || !sweep && s.idleLocked(pr, p) {
			continue // live skips it
		}
		v, ok := snap.parts[p]
		if !ok {
			r.parts = append(r.parts, p)
			r.copies = true
		} else if (!v.master && pr.waiting()) || (v.master && !slices.Contains(v.replicas, d.id)) {
			continue // live drops its queue
		}
		for _, q := range pr.queue {
			need(p, q.Epoch)
		}
		if ok && v.master && len(pr.queue) == 0 && s.noticeDueLocked(pr, p, v.epoch) {
			need(p, v.epoch)
		}
	}
	return r
}

// sweepEvery is how often a sender busy with some partitions reads the
// view of all the others too (see idleLocked).
const sweepEvery = 50 * time.Millisecond

// sweepLocked says whether this round reads the view of every partition
// the replica holds, idle ones included: when the sender's tick or
// Ensure asked for it, or sweepEvery after the last sweep. Call with s.mu
// held.
func (d *dest) sweepLocked(now time.Time) bool {
	if !d.sweep && now.Before(d.sweepAt) {
		return false
	}
	d.sweep, d.sweepAt = false, now.Add(sweepEvery)
	return true
}

// idleLocked says whether partition p has nothing for the replica as far
// as the shipper knows without reading the node: nothing queued, no
// catch-up or copy pending, every run handed to Committed acknowledged,
// no majority-committed position or tenure the replica has not been
// told, and no answer taken in since a round last read its view (an
// answer says where the replica is, and only the view says whether that
// is where the master's history ends). A round leaves an idle partition
// out unless it sweeps (sweepLocked): its view costs locks of the
// node's (lease, table, writer) per partition per round, and with many
// partitions and small batches reading every one's in every round cost
// more than the batches.
// What only a view shows of an idle partition (a tenure begun, a commit
// stored without a run: one that failed or whose lease ran out) is found
// by the next sweep. Call with s.mu held.
func (s *Shipper) idleLocked(pr *progress, p int) bool {
	if pr.recheck || len(pr.queue) > 0 || pr.stage() != StageStream || pr.acked.Compare(s.committed[p]) < 0 {
		return false
	}
	h := s.majority[p]
	return h.pos.Compare(pr.told) <= 0 && pr.heard >= h.epoch
}

// noticeDueLocked says whether a notice may be due to a replica with
// nothing queued of partition p, mastered at epoch: it has not answered
// a batch of this tenure yet (it may hold changes of an earlier one that
// this tenure never had: its answer to the first batch keeps them, see
// Heard), or the majority-committed position moved on (noticeLocked).
func (s *Shipper) noticeDueLocked(pr *progress, p int, epoch uint64) bool {
	return pr.heard < epoch || s.noticeLocked(pr, p, epoch)
}

// noticeLocked says whether the replica, up to date with the queue, is to
// be told the partition's majority-committed position alone, this node
// mastering it at epoch: it moved on since the replica last took one. The
// position moves on acknowledgements, found as send reads them (the
// position kept is read here, not counted again for every partition of
// every round), so a replica gets at most one notice per partition per
// round of them.
func (s *Shipper) noticeLocked(pr *progress, p int, epoch uint64) bool {
	h := s.majority[p]
	return h.epoch == epoch && h.pos.Compare(pr.told) > 0
}

// notice is a batch of the master's epoch that carries the
// majority-committed position alone: no documents, from and up to the
// replica's acknowledged position (it changes nothing the replica holds).
// Call with s.mu held.
func (s *Shipper) notice(pr *progress, p int, epoch uint64, snap *snapshot) record.Batch {
	b := record.Batch{Partition: p, Epoch: epoch, From: pr.acked, UpTo: pr.acked}
	s.stampLocked(&b, snap)
	return b
}

// fromRing returns the sorted partitions as a ring starting at the first
// one not below start.
func fromRing(sorted []int, start int) []int {
	i, _ := slices.BinarySearch(sorted, start)
	return append(slices.Clip(sorted[i:]), sorted[:i]...)
}

// takeRuns takes the queued runs of partition p that fit in rm, merged
// while they follow on. A run that does not fit whole gives the documents
// that do, in position order, as a batch that leaves the replica's
// position where the run starts (only the run's last documents move it,
// as in a catch-up); the rest stays queued. all says whether the queue
// was emptied. The batches are not stamped yet (stampLocked). Call with
// s.mu held.
func (s *Shipper) takeRuns(pr *progress, p int, rm *room) (out []record.Batch, all bool) {
	var cur *queuedRun
	for len(pr.queue) > 0 {
		q := pr.queue[0]
		if q.UpTo.Compare(pr.acked) <= 0 {
			pr.queue = pr.queue[1:] // already held
			pr.queued -= len(q.Docs)
			continue
		}
		follows := cur != nil && cur.Epoch == q.Epoch && cur.UpTo == q.From
		header := 0
		if !follows {
			header = wireBatchBase
		}
		n := rm.take(header, q.sizes)
		if n == 0 && len(q.Docs) > 0 {
			break
		}
		piece := q
		if n < len(q.Docs) {
			piece.Docs, piece.sizes, piece.UpTo = q.Docs[:n], q.sizes[:n], q.From
			pr.queue[0].Docs, pr.queue[0].sizes = q.Docs[n:], q.sizes[n:]
		} else {
			pr.queue = pr.queue[1:]
		}
		pr.queued -= n
		if follows {
			*cur = mergeRuns(*cur, piece)
		} else {
			if cur != nil {
				out = append(out, cur.Batch)
			}
			cur = &piece
		}
		if n < len(q.Docs) {
			break
		}
	}
	if cur != nil {
		out = append(out, cur.Batch)
	}
	return out, len(pr.queue) == 0
}

// mergeRuns joins two runs of a partition's history that follow on (a.UpTo
// is b.From, same epoch) into one: the latest state of every document
// changed in (a.From, b.UpTo], in position order. The replica then applies
// one run, in one commit, instead of one per group commit of the master.
func mergeRuns(a, b queuedRun) queuedRun {
	type sized struct {
		doc  *record.Doc
		size int
	}
	latest := make(map[string]sized, len(a.Docs)+len(b.Docs))
	for i, d := range a.Docs {
		latest[d.Key] = sized{d, a.sizes[i]}
	}
	for i, d := range b.Docs {
		latest[d.Key] = sized{d, b.sizes[i]}
	}
	all := make([]sized, 0, len(latest))
	for _, e := range latest {
		all = append(all, e)
	}
	slices.SortFunc(all, func(x, y sized) int { return x.doc.Pos.Compare(y.doc.Pos) })
	a.Docs, a.sizes = make([]*record.Doc, len(all)), make([]int, len(all))
	for i, e := range all {
		a.Docs[i], a.sizes[i] = e.doc, e.size
	}
	a.UpTo = b.UpTo
	return a
}

func maxPosition(a, b record.Position) record.Position {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

// send delivers a request and records what the replica answered.
func (s *Shipper) send(d *dest, req Request) error {
	var parts []int // the partitions sent, each once
	for _, b := range req.Batches {
		if !slices.Contains(parts, b.Partition) {
			parts = append(parts, b.Partition)
		}
	}
	// What each partition's majority-committed position is counted from
	// before the answers are taken in (read before the request goes, so
	// that they are taken in as soon as they come), and after (read again
	// then: the answers came in after what was read before).
	before := s.read(reads{parts: parts, copies: true})
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	resp, err := s.cfg.Transport.Send(ctx, d.id, req)
	if err == nil && len(resp.Results) != len(req.Batches) {
		err = fmt.Errorf("replica %s answered %d results for %d batches", d.id, len(resp.Results), len(req.Batches))
	}
	for i := 0; err == nil && i < len(resp.Results); i++ {
		// One result per batch, in order: one that names another
		// partition acknowledges nothing (it could count the replica for
		// a partition it was never sent).
		if resp.Results[i].Partition != req.Batches[i].Partition {
			err = fmt.Errorf("replica %s answered partition %d for batch %d of partition %d", d.id, resp.Results[i].Partition, i, req.Batches[i].Partition)
		}
	}
	s.mu.Lock()
	if err != nil {
		d.lastError = logsafe.ClipTo(err.Error(), 300)
		// What was in flight is unknown: catch those partitions up.
		for _, b := range req.Batches {
			if pr := d.parts[b.Partition]; pr != nil {
				pr.failed()
			}
		}
		s.mu.Unlock()
		return err
	}
	var diverged []Result
	var refused error
	was := map[int]record.Position{} // each partition's majority-committed position before these answers
	for _, p := range parts {
		was[p], _ = s.majorityLocked(p, before)
	}
	seq := s.seq.Add(1) // these answers' number (see view.go)
	for i, r := range resp.Results {
		pr := d.parts[r.Partition]
		if pr == nil {
			continue
		}
		pr.recheck = true // what the answer says is weighed against the view in the next round
		switch r.Code {
		case CodeOK, CodeGap, CodeFullCopy, CodeDiverged:
			pr.answered(req.Batches[i].Epoch, seq) // each of these sets acked
		}
		switch r.Code {
		case CodeOK:
			pr.applied(r.Applied, s.committed[r.Partition], req.Batches[i].Committed)
		case CodeGap:
			pr.gap(r.Applied)
		case CodeFullCopy:
			pr.askedForFullCopy(r.Applied)
		case CodeDiverged:
			pr.diverged(r.Applied)
			diverged = append(diverged, r)
		case CodeStaleEpoch, CodeIsMaster:
			// This node is no longer the master it thinks it is; its lease
			// will say so. Stop shipping this partition there.
			pr.refusedTheMaster()
			refused = fmt.Errorf("replica %s refused partition %d: %s (its epoch %d)", d.id, r.Partition, r.Code, r.Epoch)
		default:
			pr.failed()
			refused = fmt.Errorf("replica %s could not apply partition %d: %s", d.id, r.Partition, logsafe.ClipTo(r.Error, 300))
		}
	}
	d.lastError = ""
	if refused != nil {
		d.lastError = refused.Error()
	}
	s.changed.Broadcast()
	s.mu.Unlock()
	after := s.read(reads{parts: parts, copies: true})
	s.mu.Lock()
	moved := false
	for _, p := range parts {
		if now, _ := s.majorityLocked(p, after); now.Compare(was[p]) > 0 {
			moved = true
			// The other replicas are told too (this one is, by the
			// round that follows its answer).
			for _, o := range s.dests {
				if o != d && o.parts[p] != nil {
					o.poke()
				}
			}
		}
	}
	if moved {
		// A majority-committed position kept here wakes those waiting
		// for it (WaitMajorityHeld) that counted before it was.
		s.changed.Broadcast()
	}
	s.mu.Unlock()
	if refused != nil {
		// Back off rather than retry at once.
		s.log.Warn("replica refused a batch", "err", refused)
		return refused
	}
	for _, r := range diverged {
		if err := s.restore(d, r.Partition, r.Applied, r.Diverged); err != nil {
			return err
		}
	}
	return nil
}

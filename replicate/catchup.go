package replicate

import (
	"context"
	"errors"

	"github.com/shoal-db/shoal/record"
)

// chaseChunks bounds the chunks a catch-up reads past its target before
// it gives up on writes that outrun it (a chunk is MaxBatchDocs documents
// at most: with the defaults, tens of thousands of changes).
const chaseChunks = 64

// restoreChunk bounds the documents of one restore request (and
// MaxBatchBytes their bytes): the embedded store replaces documents one at
// a time, each a scan of the partition.
const restoreChunk = 50

// restore sends a replica that rolled back changes this master's states of
// those documents (or that it has none), so that the replica then holds the
// history up to agreed, the position it answered its history agrees with
// this master's up to (which may be before this master's epoch start: its
// history may have left the replica's in an earlier tenure); catch-up
// follows from there. Each batch carries this master's tombstone horizon,
// which the replica takes before it removes the absent keys.
func (s *Shipper) restore(d *dest, p int, agreed record.Position, keys []string) error {
	epoch, master := s.cfg.Mastership.Epoch(p)
	if !master {
		return nil
	}
	s.log.Info("restoring a replica's rolled back documents", "replica", d.id, "partition", p, "documents", len(keys),
		"agreed", agreed)
	var b record.Batch
	var rm room
	next := func() {
		b = record.Batch{Partition: p, Epoch: epoch, From: agreed, UpTo: agreed, Restore: true}
		s.stamp(&b)
		rm = newRoom(min(restoreChunk, s.cfg.MaxBatchDocs), s.cfg.MaxBatchBytes-wireBatchBase)
	}
	flush := func() error {
		if len(b.Docs) == 0 && len(b.Absent) == 0 {
			return nil
		}
		// An absent key may be one whose tombstone this master purged:
		// the replica takes the horizon, read after the keys were (a
		// purge raises it before it removes a tombstone), with them.
		b.Horizon = s.horizon(p)
		err := s.send(d, Request{Batches: []WireBatch{ToWire(b)}})
		next()
		return err
	}
	next()
	for _, k := range keys {
		doc, err := s.cfg.Source.Get(s.ctx, p, k)
		absent := errors.Is(err, record.ErrNotFound)
		if err != nil && !absent {
			return err
		}
		size := quotedSize(k) + 1
		if !absent {
			size = docWireSize(doc)
		}
		if rm.take(0, []int{size}) == 0 {
			if err := flush(); err != nil {
				return err
			}
			rm.take(0, []int{size})
		}
		if absent {
			b.Absent = append(b.Absent, k)
		} else {
			b.Docs = append(b.Docs, doc)
		}
	}
	return flush()
}

// catchUp streams a partition's documents after the replica's acknowledged
// position, in position order, to the end of the partition; only the
// final chunk moves the replica, to the master's last committed position
// S noted first. A replica behind the horizon gets a full copy instead.
func (s *Shipper) catchUp(d *dest, p int) error {
	epoch, master := s.cfg.Mastership.Epoch(p)
	if !master {
		return nil
	}
	s.mu.Lock()
	pr := d.parts[p]
	known, acked, heard := pr.known, pr.acked, pr.heard
	s.mu.Unlock()
	if !known || heard < epoch {
		// Probe: an empty batch from the zero position learns where the
		// replica is (it answers "gap" with its applied position, or ok).
		// A replica known from an earlier tenure is asked again before
		// anything is copied to it: it may hold more than it last
		// acknowledged here (it mastered the partition in between), and
		// a catch-up from there would send it all of that again, each
		// document a lookup on its side (seeds 9724 and 9814: chunks of
		// them timed out under load for minutes).
		probe := record.Batch{Partition: p, Epoch: epoch}
		s.stamp(&probe)
		if err := s.send(d, Request{Batches: []WireBatch{ToWire(probe)}}); err != nil {
			s.catchUpFailed(pr)
			return err
		}
		return nil
	}
	horizon := s.horizon(p)
	s.mu.Lock()
	full := pr.needsFullCopy(horizon)
	s.mu.Unlock()
	var toCopy int64
	if acked.Compare(s.cfg.Source.Last(p)) < 0 {
		from := acked
		if full {
			from = record.Position{}
		}
		// Only for display, and before the queue takes runs again, which
		// it would fill meanwhile (a count on FerretDB reads a whole
		// collection).
		toCopy, _ = s.cfg.Source.Count(s.ctx, p, from)
	}
	// The queue takes runs again before the target is read: a commit
	// handed over after this follows the copy in the queue, and the
	// writer publishes a commit's position only after handing it over,
	// so one before it is at or before the target (but for a commit
	// handed over just before and published just after the read: the
	// queue then falls short, and another catch-up follows). A commit
	// between reading the target and queueing again (which this order
	// used to be, with the count between them) was in neither the
	// copy's claim nor the queue: the replica, moved to the target,
	// needed another catch-up. Under a steady write load nearly every
	// catch-up on FerretDB met one, and its replicas went from catch-up
	// to catch-up.
	s.mu.Lock()
	pr.copyStarted(toCopy)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		pr.copyEnded()
		s.mu.Unlock()
	}()
	target := s.cfg.Source.Last(p)
	if full {
		return s.fullCopy(d, pr, p, epoch, acked, target)
	}
	from := acked
	// The scan reads each document's latest state, at its latest position,
	// and the final chunk claims the target. A document overwritten after
	// the target, while the scan had not reached it, has left its place at
	// or before the target for one after it: its state at the target is
	// gone, and only a newer state can stand for it, or the replica holds
	// the target by its own account without the version written there,
	// which the master then counts as majority-held (seed 6018). Such a
	// document only ever moves ahead of the scan, to the newest position,
	// so the scan goes on past the target to the end of the partition
	// (a scan that returns fewer than it asked for, every one of them sent)
	// and catches it wherever it went. Cutting at any position short of
	// the end misses one that moved again past it, however recently that
	// position was read. Writes that outrun the scan for ChaseChunks
	// chunks past the target end this catch-up without the claim; the
	// next one starts over, after a rest.
	chased := 0
	for {
		limit := s.scanLimit(pr)
		past := from.Compare(target) >= 0 // this chunk reads only after the target
		docs, err := s.cfg.Source.Scan(s.ctx, p, from, limit)
		if err != nil {
			s.scanFailed(pr, limit)
			return err
		}
		sizes := s.scanned(pr, limit, docs)
		end := len(docs) < limit
		rm := newRoom(s.cfg.MaxBatchDocs, s.cfg.MaxBatchBytes-wireBatchBase)
		if n := rm.take(0, sizes); n < len(docs) {
			docs, end = docs[:n], false
		}
		if past && !end {
			if chased++; chased > s.cfg.ChaseChunks {
				s.log.Info("writes outran a catch-up past its target; it starts over after a rest", "replica", d.id,
					"partition", p, "target", target, "at", from)
				s.catchUpFailed(pr) // the replica's other partitions get their turn meanwhile
				return nil
			}
		}
		last := end
		upTo := acked
		if last {
			upTo = target
			if behindHorizon(acked, s.horizon(p)) {
				// Tombstones after acked were purged while streaming: some
				// deletes may be missing. Start over, with a full copy.
				s.mu.Lock()
				pr.startOver()
				s.mu.Unlock()
				return nil
			}
		}
		b := record.Batch{Partition: p, Epoch: epoch, From: acked, UpTo: upTo, Docs: docs}
		s.stamp(&b)
		if ok, err := s.sendChunk(d, pr, b); !ok {
			return err
		}
		if last {
			s.log.Debug("replica caught up", "replica", d.id, "partition", p, "at", target)
			s.mu.Lock()
			pr.caughtUp(false)
			s.mu.Unlock()
			return nil
		}
		if err := s.flushLive(d); err != nil {
			return err
		}
		from = docs[len(docs)-1].Pos
	}
}

// behindHorizon says whether a replica acknowledged at acked must get a
// full copy: deletes after acked may be missing from the log.
func behindHorizon(acked, horizon record.Position) bool { return acked.Compare(horizon) < 0 }

func (s *Shipper) horizon(p int) record.Position {
	return s.cfg.Source.Horizon(p)
}

// sendChunk sends one chunk of a catch-up or full copy; ok is false when
// it failed or the replica refused it (the next round starts over).
func (s *Shipper) sendChunk(d *dest, pr *progress, b record.Batch) (ok bool, err error) {
	if err := s.send(d, Request{Batches: []WireBatch{ToWire(b)}}); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && len(b.Docs) > 1 {
			s.chunkTooSlow(pr, len(b.Docs))
		} else {
			s.catchUpFailed(pr)
		}
		return false, err
	}
	var bytes int64
	for _, doc := range b.Docs {
		bytes += int64(doc.Size)
	}
	if s.cfg.Observer != nil && len(b.Docs) > 0 {
		s.cfg.Observer.Copied(d.id, b.Partition, len(b.Docs), bytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return pr.chunkDelivered(len(b.Docs)), nil
}

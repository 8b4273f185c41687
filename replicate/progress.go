package replicate

import (
	"fmt"
	"time"

	"github.com/shoal-db/shoal/record"
)

// Stage is where one replica's copy of one partition stands, as its master
// sees it. It decides what the sender does for it next, in the manner of
// the progress tracker of etcd's raft (probe, replicate, snapshot). A new
// copy starts in probe; then:
//
//   - probe -> stream: the replica applied a batch (a probe is an empty
//     batch, sent when its turn comes);
//   - probe or stream -> catch-up: the queue falls short (it overflowed, a
//     send was lost, or the replica found a gap, diverged, asked for a
//     full copy, refused or failed a batch);
//   - catch-up -> copying: its turn came and its rest after failures is
//     over;
//   - copying -> stream when the copy reached its target, -> catch-up when
//     it failed or was cut short.
//
// All transitions are the methods below; the Shipper calls them with its
// lock held.
type Stage int

const (
	// StageProbe: where the replica is is not known yet; an empty batch
	// asks it (the replica answers "gap" with its position, or ok). A copy
	// known from an earlier tenure but not heard from in this one is in
	// catch-up, and its catch-up starts with the same probe (catchUp).
	StageProbe Stage = iota
	// StageStream: the queue of live runs starts where the replica is and
	// reaches the master's history; the sender ships from it.
	StageStream
	// StageCatchUp: the queue cannot bring the replica up to date; the
	// next catch-up from the store does (a full copy when the replica
	// asked for one or is behind the tombstone horizon), once the
	// partition has rested after failures in a row.
	StageCatchUp
	// StageCopying: a catch-up or full copy is streaming from the store;
	// what queues meanwhile follows it.
	StageCopying
)

func (st Stage) String() string {
	switch st {
	case StageProbe:
		return "probe"
	case StageStream:
		return "stream"
	case StageCatchUp:
		return "catch-up"
	case StageCopying:
		return "copying"
	}
	return fmt.Sprintf("Stage(%d)", int(st))
}

// progress is what the master knows of one replica's copy of one partition.
// Its stage is changed only by the methods in this file.
type progress struct {
	acked record.Position // the replica holds the history up to here
	known bool            // acked has been learned from the replica
	// ackedAt numbers the answer that last set acked (Shipper.seq): a
	// count from what was read before it leaves it out (view.go).
	ackedAt uint64
	// heard is the newest epoch of a batch of this node's the replica
	// answered after checking it (see Heard).
	heard uint64
	// told is the newest majority-committed position the replica took
	// with a batch: a notice goes out when the partition's is newer.
	told record.Position
	// recheck: an answer came in since a round last read the
	// partition's view, so the next round reads it, idle or not (see
	// Shipper.idleLocked).
	recheck bool
	catchUp bool // the queue cannot bring it up to date
	queue   []queuedRun
	queued  int // documents in queue
	// behindSince is when the oldest change the replica has not
	// acknowledged was committed (zero when it is up to date).
	behindSince time.Time
	// A catch-up or full copy in progress: documents delivered, of how
	// many (0: not counted). catchUp set meanwhile cuts it short.
	copying        bool
	copied, toCopy int64
	forceFull      bool // the replica asked for a full copy
	// scanLimit is how many documents the next scan of a catch-up or full
	// copy asks for (0: the partition's sizes are not known yet).
	scanLimit int
	// chunkCeiling: after a chunk the replica did not take in time, the
	// most documents a chunk asks for until a catch-up completes (0: no
	// ceiling but MaxBatchDocs).
	chunkCeiling int
	// failures counts the catch-ups of this partition that failed in a
	// row; until restUntil it is not picked for another, so that the
	// replica's other partitions proceed meanwhile.
	failures  int
	restUntil time.Time
}

// stage is where the copy stands (see Stage).
func (pr *progress) stage() Stage {
	switch {
	case pr.copying:
		return StageCopying
	case !pr.known:
		return StageProbe
	case pr.catchUp:
		return StageCatchUp
	}
	return StageStream
}

// waiting says whether the copy waits for a catch-up or a probe (it is
// neither streaming nor being copied).
func (pr *progress) waiting() bool {
	st := pr.stage()
	return st == StageProbe || st == StageCatchUp
}

// rested says whether a partition waiting for a catch-up may have one at
// now: its rest after failures in a row is over.
func (pr *progress) rested(now time.Time) bool { return !now.Before(pr.restUntil) }

// queueFallsShort: the queue does not start where the replica is, or does
// not reach the master's history; only a catch-up brings it up to date.
func (pr *progress) queueFallsShort() { pr.catchUp = true }

// enqueue queues a committed run of n documents for a streaming (or
// probed) replica; past max queued documents the queue is dropped and the
// replica caught up from the store, which holds it all.
func (pr *progress) enqueue(run queuedRun, n, max int, now time.Time) {
	if pr.behindSince.IsZero() {
		pr.behindSince = now
	}
	if pr.catchUp {
		return
	}
	if pr.queued+n > max {
		pr.dropQueue()
		pr.catchUp = true
		return
	}
	pr.queue = append(pr.queue, run)
	pr.queued += n
}

// dropQueue forgets the queued runs (a catch-up brings what they held).
func (pr *progress) dropQueue() { pr.queue, pr.queued = nil, 0 }

// answered records that the replica checked a batch of epoch, in the
// answer numbered seq (Shipper.seq), which sets acked.
func (pr *progress) answered(epoch, seq uint64) {
	pr.heard = max(pr.heard, epoch)
	pr.ackedAt = seq
}

// applied: the replica applied a batch and holds the history up to
// applied; it is up to date once that reaches committed, and it took the
// majority-committed position told.
func (pr *progress) applied(applied, committed, told record.Position) {
	pr.acked, pr.known = applied, true
	if pr.acked.Compare(committed) >= 0 {
		pr.behindSince = time.Time{}
	}
	pr.told = maxPosition(pr.told, told)
}

// gap: the batch did not start where the replica is (applied).
func (pr *progress) gap(applied record.Position) {
	pr.acked, pr.known, pr.catchUp = applied, true, true
}

// askedForFullCopy: the replica cannot be caught up by changes (it is
// behind the tombstone horizon by its own account).
func (pr *progress) askedForFullCopy(applied record.Position) {
	pr.acked, pr.known, pr.catchUp, pr.forceFull = applied, true, true, true
	pr.dropQueue()
}

// diverged: the replica holds changes the master's history does not; it
// rolled them back to applied, and the documents they touched are
// restored from the master.
func (pr *progress) diverged(applied record.Position) {
	pr.acked, pr.known, pr.catchUp = applied, true, true
	pr.dropQueue()
}

// refusedTheMaster: the replica knows of a later master (or is the
// master); nothing more is shipped from this tenure's queue.
func (pr *progress) refusedTheMaster() {
	pr.dropQueue()
	pr.catchUp = true
}

// failed: the replica could not apply a batch, or the request's fate is
// unknown (it failed in flight); the next catch-up starts from what the
// replica holds.
func (pr *progress) failed() { pr.catchUp = true }

// copyStarted: a catch-up or full copy of toCopy documents (0: not
// counted) begins; everything up to its target comes from the store.
func (pr *progress) copyStarted(toCopy int64) {
	pr.dropQueue()
	pr.catchUp = false
	pr.copying, pr.copied, pr.toCopy = true, 0, toCopy
}

// chunkDelivered: a chunk of n documents was delivered; false if the copy was
// cut short meanwhile (a failure, a gap: the next round starts over).
func (pr *progress) chunkDelivered(n int) (goOn bool) {
	pr.copied += int64(n)
	return !pr.catchUp
}

// copyEnded: the catch-up or full copy is over, done or not.
func (pr *progress) copyEnded() { pr.copying = false }

// copyFailed: the catch-up failed or gave up at now; a later round
// catches the partition up again once it has rested (longer after each
// failure in a row), so that the replica's other partitions proceed
// meanwhile.
func (pr *progress) copyFailed(now time.Time) {
	pr.catchUp = true
	pr.failures++
	pr.restUntil = now.Add(restAfter(pr.failures))
}

// startOver: the next round catches the partition up again at once (it
// fell behind the tombstone horizon while streaming: a full copy).
func (pr *progress) startOver() { pr.catchUp = true }

// caughtUp: the copy reached its target; full says it was a full copy
// (which the replica no longer needs). Failures in a row end.
func (pr *progress) caughtUp(full bool) {
	if full {
		pr.forceFull = false
	}
	pr.failures, pr.restUntil = 0, time.Time{}
	pr.chunkCeiling = 0
}

// needsFullCopy says whether the next copy must be a full one, given the
// master's tombstone horizon.
func (pr *progress) needsFullCopy(horizon record.Position) bool {
	return pr.forceFull || behindHorizon(pr.acked, horizon)
}

// queuedRun is a committed run waiting for a replica, with the encoded
// size of each of its documents (bounded once, for every replica).
type queuedRun struct {
	record.Batch
	sizes []int
}

type dest struct {
	id    string
	wake  chan struct{}
	parts map[int]*progress
	// running: its sender goroutine runs. A sender with nothing to do for
	// long stops (retireIfIdle); its progress stays, and the next
	// Committed or Ensure that needs it starts it again.
	running bool
	// Where the next request starts taking live runs, and where the next
	// catch-up is looked for, in the ring of partitions (read and written
	// by the sender only).
	liveFrom, catchUpFrom int
	// sweep: the next round reads the view of every partition, idle ones
	// included (the sender's tick and Ensure ask for one); sweepAt: when
	// one is due anyway (see sweepLocked).
	sweep   bool
	sweepAt time.Time
	// lastError is why the last request to the replica failed ("" once
	// one succeeded), for logs that explain a wait (Shipper.Copy).
	lastError string
}

// busyLocked lists the partitions d replicates, and says whether any of
// them has something queued or a copy streaming; call with s.mu held.
func (d *dest) busyLocked() (parts []int, busy bool) {
	for p, pr := range d.parts {
		if pr.stage() == StageCopying || len(pr.queue) > 0 {
			return nil, true
		}
		parts = append(parts, p)
	}
	return parts, false
}

func (d *dest) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// scanLimit is how many documents the next scan of pr's partition asks for.
func (s *Shipper) scanLimit(pr *progress) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := pr.scanLimit
	if limit <= 0 {
		limit = firstScan
	}
	if pr.chunkCeiling > 0 {
		limit = min(limit, pr.chunkCeiling)
	}
	return min(limit, s.cfg.MaxBatchDocs)
}

// scanned learns from a scan that asked for limit documents what the next
// one asks for, and returns the sizes of the documents read.
func (s *Shipper) scanned(pr *progress, limit int, docs []*record.Doc) []int {
	sizes := scanSizes(docs)
	s.mu.Lock()
	pr.scanLimit = nextScanLimit(limit, sizes, s.cfg.MaxBatchDocs, s.cfg.MaxBatchBytes)
	s.mu.Unlock()
	return sizes
}

// scanFailed has the next scan ask for half as many documents (the store,
// or its driver, may refuse an answer that large) after a rest.
func (s *Shipper) scanFailed(pr *progress, limit int) {
	s.mu.Lock()
	pr.scanLimit = max(1, limit/2)
	s.mu.Unlock()
	s.catchUpFailed(pr)
}

// chunkTooSlow: the replica did not take a chunk of docs documents in
// time. The catch-up starts over, after a rest, with chunks of at most
// half as many, which do not grow past that until a catch-up completes: it
// restarts from the replica's position, and a chunk size that grew back
// would meet the same wall every time (a loaded embedded store looks each
// document it already holds up with a scan).
func (s *Shipper) chunkTooSlow(pr *progress, docs int) {
	s.mu.Lock()
	pr.chunkCeiling = max(1, docs/2)
	pr.scanLimit = pr.chunkCeiling
	s.mu.Unlock()
	s.catchUpFailed(pr)
}

// catchUpFailed has a later round catch the partition up again, after a
// rest (progress.copyFailed).
func (s *Shipper) catchUpFailed(pr *progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr.copyFailed(s.now())
}

// restAfter is how long a partition whose catch-up failed failures times
// in a row waits before the next: 100 ms, doubling, at most 2 s (as long
// as the sender backs off when its replica does not answer at all).
func restAfter(failures int) time.Duration {
	return min(100*time.Millisecond<<min(max(failures-1, 0), 5), 2*time.Second)
}

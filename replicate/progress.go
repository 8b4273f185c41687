package replicate

import (
	"time"

	"github.com/shoal-db/shoal/store"
)

// progress is what the master knows of one replica's copy of one partition.
type progress struct {
	acked store.Position // the replica holds the history up to here
	known bool           // acked has been learned from the replica
	// heard is the newest epoch of a batch of this node's the replica
	// answered after checking it (see Heard).
	heard uint64
	// told is the newest majority-committed position the replica took
	// with a batch: a notice goes out when the partition's is newer.
	told    store.Position
	catchUp bool // the queue cannot bring it up to date
	queue   []queuedRun
	queued  int // documents in queue
	// behindSince is when the oldest change the replica has not
	// acknowledged was committed (zero when it is up to date).
	behindSince time.Time
	// A catch-up or full copy in progress: documents delivered, of how
	// many (0: not counted).
	copying        bool
	copied, toCopy int64
	forceFull      bool // the replica asked for a full copy
	// scanLimit is how many documents the next scan of a catch-up or full
	// copy asks for (0: the partition's sizes are not known yet).
	scanLimit int
	// failures counts the catch-ups of this partition that failed in a
	// row; until restUntil it is not picked for another, so that the
	// replica's other partitions proceed meanwhile.
	failures  int
	restUntil time.Time
}

// queuedRun is a committed run waiting for a replica, with the encoded
// size of each of its documents (bounded once, for every replica).
type queuedRun struct {
	store.Batch
	sizes []int
}

type dest struct {
	id    string
	wake  chan struct{}
	parts map[int]*progress
	// Where the next request starts taking live runs, and where the next
	// catch-up is looked for, in the ring of partitions (read and written
	// by the sender only).
	liveFrom, catchUpFrom int
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
	if pr.scanLimit <= 0 {
		return min(firstScan, s.cfg.MaxBatchDocs)
	}
	return min(pr.scanLimit, s.cfg.MaxBatchDocs)
}

// scanned learns from a scan that asked for limit documents what the next
// one asks for, and returns the sizes of the documents read.
func (s *Shipper) scanned(pr *progress, limit int, docs []*store.Doc) []int {
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

// catchUpFailed has a later round catch the partition up again, once it
// has rested (longer after each failure in a row), so that the replica's
// other partitions are caught up meanwhile.
func (s *Shipper) catchUpFailed(pr *progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr.catchUp = true
	pr.failures++
	pr.restUntil = time.Now().Add(restAfter(pr.failures))
}

// caughtUp ends a partition's failures in a row.
func (s *Shipper) caughtUp(pr *progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr.failures, pr.restUntil = 0, time.Time{}
}

// restAfter is how long a partition whose catch-up failed failures times
// in a row waits before the next: 100 ms, doubling, at most 2 s (as long
// as the sender backs off when its replica does not answer at all).
func restAfter(failures int) time.Duration {
	return min(100*time.Millisecond<<min(max(failures-1, 0), 5), 2*time.Second)
}

// retryCatchUp has the next round catch the partition up again.
func (s *Shipper) retryCatchUp(pr *progress) {
	s.mu.Lock()
	pr.catchUp = true
	s.mu.Unlock()
}

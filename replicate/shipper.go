// Package replicate copies each partition's history from its master to its
// replicas. The documents are the log: every stored document carries the
// position of its last change, so a replica that is behind (restarted,
// newly chosen, or whose queue overflowed) is caught up by streaming the
// partition's documents after the position it acknowledged, in position
// order. The in-memory queues of live changes are only a cache of that log.
// A replica behind the master's tombstone horizon (deletes it has not seen
// whose tombstones were purged) gets a full copy of the partition instead,
// in key order.
package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// Request is what a sender ships to one replica in one call: runs of
// history of any number of partitions.
type Request struct {
	Batches []WireBatch `json:"batches"`
}

// WireBatch is a store.Batch on the wire.
type WireBatch struct {
	Partition  int                `json:"p"`
	Epoch      uint64             `json:"e"`
	EpochStart store.Position     `json:"start"`
	Epochs     []store.EpochStart `json:"epochs,omitempty"` // the master's epoch chain
	From       store.Position     `json:"from"`
	UpTo       store.Position     `json:"upto"`
	Docs       []WireDoc          `json:"docs,omitempty"`
	Restore    bool               `json:"restore,omitempty"`
	Absent     []string           `json:"absent,omitempty"`
	Full       bool               `json:"full,omitempty"`
	KeyFrom    string             `json:"kfrom,omitempty"`
	KeyTo      string             `json:"kto,omitempty"`
	Horizon    store.Position     `json:"horizon,omitzero"`
	// Committed is the master's majority-committed position of the
	// partition when it sent the batch (see Shipper.MajorityHeld); a
	// batch with no documents from and up to the replica's acknowledged
	// position carries it alone.
	Committed store.Position `json:"commit,omitzero"`
}

// WireDoc is a document state on the wire.
type WireDoc struct {
	User    string         `json:"u"`
	Coll    string         `json:"c"`
	ID      string         `json:"d"`
	Version int64          `json:"v"`
	Pos     store.Position `json:"pos"`
	Deleted bool           `json:"x,omitempty"`
	Updated time.Time      `json:"t"`
	Body    map[string]any `json:"b,omitempty"`
}

// Response answers a Request: one result per batch, in order.
type Response struct {
	Results []Result `json:"results"`
}

// Result is a replica's answer for one batch.
type Result struct {
	Partition int            `json:"p"`
	Applied   store.Position `json:"applied"`
	Epoch     uint64         `json:"epoch"`
	// Code is "ok", "gap" (catch up from Applied), "full-copy" (send a full
	// copy: the replica's copy cannot be trusted), "diverged" (the replica
	// kept changes this master never had in its rollback collection:
	// restore Diverged, then catch up), "stale-epoch" (this master is
	// behind: Epoch is the newest the replica has seen), "is-master", or
	// "error".
	Code     string   `json:"code"`
	Error    string   `json:"error,omitempty"`
	Diverged []string `json:"diverged,omitempty"`
}

// ToWire converts a batch for sending.
func ToWire(b store.Batch) WireBatch {
	w := WireBatch{Partition: b.Partition, Epoch: b.Epoch, EpochStart: b.EpochStart, Epochs: b.Epochs, From: b.From, UpTo: b.UpTo,
		Docs: make([]WireDoc, len(b.Docs)), Restore: b.Restore, Absent: b.Absent,
		Full: b.Full, KeyFrom: b.KeyFrom, KeyTo: b.KeyTo, Horizon: b.Horizon, Committed: b.Committed}
	for i, d := range b.Docs {
		w.Docs[i] = WireDoc{User: d.User, Coll: d.Coll, ID: d.ID, Version: d.Version, Pos: d.Pos, Deleted: d.Deleted, Updated: d.Updated,
			Body: d.Body}
	}
	return w
}

// FromWire converts a received batch; body numbers arrive as float64 from
// JSON and are normalised by the caller's decoder (see api).
func FromWire(w WireBatch) store.Batch {
	b := store.Batch{Partition: w.Partition, Epoch: w.Epoch, EpochStart: w.EpochStart, Epochs: w.Epochs, From: w.From, UpTo: w.UpTo,
		Docs: make([]*store.Doc, len(w.Docs)), Restore: w.Restore, Absent: w.Absent,
		Full: w.Full, KeyFrom: w.KeyFrom, KeyTo: w.KeyTo, Horizon: w.Horizon, Committed: w.Committed}
	for i, d := range w.Docs {
		b.Docs[i] = &store.Doc{Key: store.DocKey(d.User, d.Coll, d.ID), User: d.User, Coll: d.Coll, ID: d.ID, Version: d.Version,
			Pos: d.Pos, Deleted: d.Deleted, Updated: d.Updated, Body: d.Body, Size: approxSize(d.Body)}
	}
	return b
}

// Apply answers a request on the replica's side. The batches of each
// partition are applied in order, the partitions side by side (each has
// its own writer); the positions they reach are then made durable in one
// store write, before the answer says so.
func Apply(ctx context.Context, w *store.Writer, req Request) Response {
	out := Response{Results: make([]Result, len(req.Batches))}
	byPartition := map[int][]int{} // partition -> indexes of its batches, in order
	for i, wb := range req.Batches {
		byPartition[wb.Partition] = append(byPartition[wb.Partition], i)
	}
	var wg sync.WaitGroup
	for _, idx := range byPartition {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range idx {
				out.Results[i] = result(req.Batches[i].Partition, w.Apply(ctx, FromWire(req.Batches[i])))
			}
		}()
	}
	wg.Wait()
	if err := w.SyncApplied(ctx); err != nil {
		for i := range out.Results {
			if r := &out.Results[i]; r.Code == "ok" {
				r.Code, r.Error = "error", err.Error()
			}
		}
	}
	return out
}

// result turns the outcome of one batch into its answer.
func result(partition int, r store.ApplyResult) Result {
	res := Result{Partition: partition, Applied: r.Applied, Epoch: r.Epoch, Code: "ok"}
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, store.ErrGap):
		res.Code = "gap"
	case errors.Is(r.Err, store.ErrDiverged):
		res.Code, res.Diverged = "diverged", r.Diverged
	case errors.Is(r.Err, store.ErrStaleEpoch):
		res.Code = "stale-epoch"
	case errors.Is(r.Err, store.ErrIsMaster):
		res.Code = "is-master"
	case errors.Is(r.Err, store.ErrNeedsFullCopy):
		res.Code = "full-copy"
	default:
		res.Code, res.Error = "error", r.Err.Error()
	}
	return res
}

// Config wires a Shipper to its node.
type Config struct {
	// Replicas returns the replicas of a partition this node masters (none
	// when it does not): the responsible list after the master, in order.
	Replicas func(partition int) []string
	// Copies is how many copies each partition should have (the
	// replication factor, or fewer when the cluster has fewer nodes that
	// can hold one): the majority-committed position counts against it,
	// as write concerns do (see Counted). Nil: the master and the
	// replicas listed.
	Copies func() int
	// Send delivers a request to a replica.
	Send func(ctx context.Context, replica string, req Request) (Response, error)
	// Scan reads a partition's documents after a position, in position
	// order (catch-up).
	Scan func(ctx context.Context, partition int, after store.Position, limit int) ([]*store.Doc, error)
	// ScanKeys reads up to limit of a partition's documents with a key
	// after afterKey ("" = from the first), in key order (full copy).
	ScanKeys func(ctx context.Context, partition int, afterKey string, limit int) ([]*store.Doc, error)
	// Horizon is the highest position of a tombstone the master purged from
	// a partition: a replica acknowledged before it gets a full copy. Nil
	// means tombstones are never purged.
	Horizon func(partition int) store.Position
	// OnFullCopy, if set, is told of every full copy started (metrics).
	OnFullCopy func(partition int)
	// Count, if set, counts a partition's documents after a position (the
	// zero position: all), so a copy in progress shows how much is left.
	Count func(ctx context.Context, partition int, after store.Position) (int64, error)
	// OnCopied, if set, is told of every chunk a catch-up or full copy
	// delivered: its documents and their approximate bytes (metrics).
	OnCopied func(replica string, partition int, docs int, bytes int64)
	// Last is the master's newest committed position of a partition.
	Last func(partition int) store.Position
	// Epoch is the epoch this node masters a partition at (ok false: not
	// master).
	Epoch func(partition int) (uint64, bool)
	// EpochStart is the position this node's given epoch of a partition
	// started from.
	EpochStart func(partition int, epoch uint64) store.Position
	// Epochs, if set, is the epoch chain this node's given epoch of a
	// partition follows (its tenure last, starting at EpochStart), carried
	// by every batch: a replica tells from it which of its changes, of any
	// older epoch, the master's history does not contain. Nil: batches
	// carry the epoch start alone.
	Epochs func(partition int, epoch uint64) []store.EpochStart
	// Get reads the master's current state of a document (ErrNotFound: no
	// record), to restore a replica after a rollback.
	Get func(ctx context.Context, partition int, key string) (*store.Doc, error)
	// MaxQueued bounds the changes queued per replica and partition; past
	// it the queue is dropped and the replica caught up from the store.
	MaxQueued int
	// MaxBatchDocs bounds the documents of one request: a live batch, a
	// chunk of a catch-up or of a full copy, a restore (default
	// DefaultMaxBatchDocs).
	MaxBatchDocs int
	// MaxBatchBytes bounds the encoded bytes of one request, as estimated
	// before encoding (default DefaultMaxBatchBytes); it must stay well
	// under the replica's body cap. A document larger than it goes alone.
	MaxBatchBytes int
	// ChaseChunks bounds the chunks a catch-up reads past its target
	// before it gives up on writes that outrun it (default chaseChunks).
	ChaseChunks int
	Logger      *slog.Logger
}

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

// Shipper replicates every partition this node masters: one sender
// goroutine per replica node batches the changes of all partitions it
// replicates there; each replica's progress per partition is tracked like
// raft tracks followers.
type Shipper struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	changed   *sync.Cond // signalled on every ack
	dests     map[string]*dest
	committed map[int]store.Position // newest position handed to Committed, per partition
	majority  map[int]heldAt         // the majority-committed position found, per partition
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// heldAt is a majority-committed position found in a tenure: it stays
// committed for the rest of the tenure even if an acknowledgement it was
// counted from goes (a replica replaced, or one that lost its copy).
type heldAt struct {
	epoch uint64
	pos   store.Position
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

// New creates a shipper.
func New(cfg Config) *Shipper {
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 10000
	}
	if cfg.MaxBatchDocs <= 0 {
		cfg.MaxBatchDocs = DefaultMaxBatchDocs
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.ChaseChunks <= 0 {
		cfg.ChaseChunks = chaseChunks
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Shipper{cfg: cfg, log: cfg.Logger, dests: map[string]*dest{}, committed: map[int]store.Position{}, majority: map[int]heldAt{}}
	s.changed = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Close stops every sender.
func (s *Shipper) Close() {
	s.cancel()
	s.mu.Lock()
	s.changed.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

// destLocked returns (starting if needed) the sender of replica id.
func (s *Shipper) destLocked(id string) *dest {
	d := s.dests[id]
	if d == nil {
		d = &dest{id: id, wake: make(chan struct{}, 1), parts: map[int]*progress{}}
		s.dests[id] = d
		s.wg.Add(1)
		go s.run(d)
	}
	return d
}

func (d *dest) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Committed queues a committed run of a partition's history for each of
// its replicas. It never blocks.
func (s *Shipper) Committed(b store.Batch) {
	replicas := s.cfg.Replicas(b.Partition)
	var run queuedRun
	if len(replicas) > 0 {
		run = queuedRun{Batch: b, sizes: wireSizes(b.Docs)} // outside the lock
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.UpTo.Compare(s.committed[b.Partition]) > 0 {
		s.committed[b.Partition] = b.UpTo
	}
	for _, r := range replicas {
		d := s.destLocked(r)
		pr := d.parts[b.Partition]
		if pr == nil {
			pr = &progress{}
			d.parts[b.Partition] = pr
		}
		if pr.behindSince.IsZero() {
			pr.behindSince = time.Now()
		}
		if !pr.catchUp {
			if pr.queued+len(b.Docs) > s.cfg.MaxQueued {
				// Overflow: the store has it all; catch up from there.
				pr.queue, pr.queued, pr.catchUp = nil, 0, true
			} else {
				pr.queue = append(pr.queue, run)
				pr.queued += len(b.Docs)
			}
		}
		d.poke()
	}
}

// Ensure makes sure every replica of the partitions this node masters has
// a sender and progress, so a new or restarted replica is caught up, and
// every replica hears of a new tenure, even when no write arrives. Call it
// periodically.
func (s *Shipper) Ensure(partitions int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := 0; p < partitions; p++ {
		epoch, ok := s.cfg.Epoch(p)
		if !ok {
			continue
		}
		for _, r := range s.cfg.Replicas(p) {
			d := s.destLocked(r)
			pr := d.parts[p]
			if pr == nil {
				pr = &progress{}
				d.parts[p] = pr
			}
			if !pr.known || pr.acked.Compare(s.cfg.Last(p)) < 0 || pr.heard < epoch {
				d.poke()
			}
		}
	}
}

// Acked returns the position replica has acknowledged for partition.
func (s *Shipper) Acked(replica string, partition int) (store.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.dests[replica]; d != nil {
		if pr := d.parts[partition]; pr != nil && pr.known {
			return pr.acked, true
		}
	}
	return store.Position{}, false
}

// Heard reports whether replica has answered a batch of partition at
// epoch (this node's tenure) after checking it against its own history:
// the first batch of a newer master moves what the replica holds that
// the master never had (a former master's w=1 writes) to its rollback
// collection, and any answer but a refusal (stale epoch, is master, an
// error) says that check is done. A replica leaving the cluster is kept
// until then (see internal/node's chooseReplicas).
func (s *Shipper) Heard(replica string, partition int, epoch uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.dests[replica]; d != nil {
		if pr := d.parts[partition]; pr != nil {
			return pr.heard >= epoch
		}
	}
	return false
}

// wakeWhenDone wakes every wait on s.changed when ctx ends, so that a
// waiter sees ctx's end; call the result to stop.
func (s *Shipper) wakeWhenDone(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
}

// WaitReplicated waits until need of replicas hold partition's history up
// to pos, or ctx ends; it returns how many do.
func (s *Shipper) WaitReplicated(ctx context.Context, partition int, pos store.Position, replicas func() []string, need int) (int, error) {
	defer s.wakeWhenDone(ctx)()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		have := 0
		for _, r := range replicas() {
			if d := s.dests[r]; d != nil {
				if pr := d.parts[partition]; pr != nil && pr.known && pr.acked.Compare(pos) >= 0 {
					have++
				}
			}
		}
		if have >= need {
			return have, nil
		}
		if err := ctx.Err(); err != nil {
			return have, err
		}
		if s.ctx.Err() != nil {
			return have, errors.New("shutting down")
		}
		s.changed.Wait()
	}
}

// MajorityHeld returns the partition's majority-committed position while
// this node masters it (the zero position when it does not): the newest
// position of its history that a majority of the partition's copies hold,
// the master included, counting replicas as write concern "majority"
// does (shard.WriteQuorum of Copies).
//
// Only a position of the current tenure's epoch is established by
// counting, as raft commits only entries of the leader's term: a
// replica's acknowledgement of an older epoch's position does not make it
// majority-held for good. (The promotion rule prefers the copy with the
// newest position; a copy that holds a later epoch's change this master
// never had could still win over a majority holding an older position,
// and roll it back.) Once a position of the epoch is majority-held,
// everything before it in this master's history is committed too. So a
// new tenure has no majority-committed position until its first write
// reaches a majority; a partition of one copy has its master's whole
// history.
//
// The position never moves back within a tenure and is never past the
// master's last committed position.
func (s *Shipper) MajorityHeld(partition int) store.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.majorityLocked(partition)
}

// majorityLocked is MajorityHeld; call with s.mu held.
func (s *Shipper) majorityLocked(p int) store.Position {
	epoch, master := s.cfg.Epoch(p)
	if !master {
		return store.Position{}
	}
	replicas := s.cfg.Replicas(p)
	total := 1 + len(replicas)
	if s.cfg.Copies != nil {
		total = max(s.cfg.Copies(), 1)
	}
	q := shard.WriteQuorum(total)
	held := majority(s.cfg.Last(p), epoch, s.ackedLocked(p, q.Replicas(replicas)), q.MajorityReplicas())
	if h := s.majority[p]; h.epoch == epoch && h.pos.Compare(held) > 0 {
		return h.pos
	}
	s.majority[p] = heldAt{epoch: epoch, pos: held}
	return held
}

// ackedLocked lists the positions the replicas have acknowledged of
// partition p (those not heard from yet are left out).
func (s *Shipper) ackedLocked(p int, replicas []string) []store.Position {
	var acked []store.Position
	for _, r := range replicas {
		if d := s.dests[r]; d != nil {
			if pr := d.parts[p]; pr != nil && pr.known {
				acked = append(acked, pr.acked)
			}
		}
	}
	return acked
}

// majority is the newest position a master at epoch, whose history ends
// at last, knows need of the replicas hold besides itself, given what the
// counted replicas acknowledged: the need-th newest acknowledgement, if it
// is of the epoch (see MajorityHeld), at most last.
func majority(last store.Position, epoch uint64, acked []store.Position, need int) store.Position {
	if need <= 0 {
		return last
	}
	if len(acked) < need {
		return store.Position{}
	}
	acked = slices.Clone(acked)
	slices.SortFunc(acked, func(a, b store.Position) int { return b.Compare(a) })
	held := acked[need-1]
	if held.Compare(last) > 0 {
		held = last
	}
	if held.Epoch != epoch {
		return store.Position{}
	}
	return held
}

// WaitMajorityHeld waits until the partition's majority-committed position
// (MajorityHeld) reaches pos, or ctx ends; it returns the position.
func (s *Shipper) WaitMajorityHeld(ctx context.Context, partition int, pos store.Position) (store.Position, error) {
	defer s.wakeWhenDone(ctx)()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		held := s.majorityLocked(partition)
		if held.Compare(pos) >= 0 {
			return held, nil
		}
		if err := ctx.Err(); err != nil {
			return held, err
		}
		if s.ctx.Err() != nil {
			return held, errors.New("shutting down")
		}
		s.changed.Wait()
	}
}

// Lag reports, per replica and partition this node masters, the
// acknowledged position and how far it is behind in changes.
type Lag struct {
	Replica   string         `json:"replica"`
	Partition int            `json:"partition"`
	Acked     store.Position `json:"acked"`
	Behind    uint64         `json:"behind"`
	// LagMs is how long ago the oldest change the replica has not
	// acknowledged was committed (0 when it is up to date).
	LagMs   int64 `json:"lag_ms"`
	CatchUp bool  `json:"catching_up"`
	// Copying: a catch-up or full copy is streaming documents to the
	// replica; Copied of ToCopy are delivered (ToCopy 0: not counted).
	Copying bool  `json:"copying,omitempty"`
	Copied  int64 `json:"copied,omitempty"`
	ToCopy  int64 `json:"to_copy,omitempty"`
}

// Lags lists the progress of every replica.
func (s *Shipper) Lags() []Lag {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Lag
	for _, d := range s.dests {
		for p, pr := range d.parts {
			if _, ok := s.cfg.Epoch(p); !ok || !slices.Contains(s.cfg.Replicas(p), d.id) {
				continue // not master, or no longer a replica there
			}
			last := s.cfg.Last(p)
			l := Lag{Replica: d.id, Partition: p, Acked: pr.acked, CatchUp: pr.catchUp || !pr.known || pr.copying,
				Copying: pr.copying, Copied: pr.copied, ToCopy: pr.toCopy}
			if !pr.behindSince.IsZero() {
				l.LagMs = time.Since(pr.behindSince).Milliseconds()
			}
			if last.Seq > pr.acked.Seq {
				l.Behind = last.Seq - pr.acked.Seq
			}
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b Lag) int {
		if a.Partition != b.Partition {
			return a.Partition - b.Partition
		}
		if a.Replica < b.Replica {
			return -1
		}
		return 1
	})
	return out
}

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
	s.mu.Lock()
	defer s.mu.Unlock()
	var req Request
	rm := newRoom(s.cfg.MaxBatchDocs, s.cfg.MaxBatchBytes)
	parts := make([]int, 0, len(d.parts))
	for p := range d.parts {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	ring := fromRing(parts, d.liveFrom)
	now := time.Now()
	var catchUp []int
	cut := -1 // the first partition (index in ring) left with runs that did not fit
	for i, p := range ring {
		pr := d.parts[p]
		if pr.copying {
			continue // its catch-up is streaming; what queues meanwhile follows it
		}
		epoch, master := s.cfg.Epoch(p)
		if !master {
			// No longer master (a handoff, or the lease ran out): what was
			// committed while it was still goes out, the tail of its tenure,
			// but nothing is caught up from here any more.
			if !pr.known || pr.catchUp {
				pr.queue, pr.queued = nil, 0
				continue
			}
		} else if !slices.Contains(s.cfg.Replicas(p), d.id) {
			pr.queue, pr.queued = nil, 0
			continue
		}
		if master && pr.known && !pr.catchUp {
			// The queue can bring the replica up to date only if it starts
			// where the replica is and reaches the master's history: a
			// commit that failed, or whose lease ran out, stored changes
			// (and used positions) that were never queued, and the writer
			// publishes a commit's position only after queuing it, so a
			// position beyond the last queued one means exactly that.
			last := maxPosition(s.committed[p], s.cfg.Last(p))
			if len(pr.queue) == 0 && pr.acked.Compare(last) < 0 {
				pr.catchUp = true
			} else if len(pr.queue) > 0 && pr.queue[0].From.Compare(pr.acked) > 0 {
				pr.catchUp = true
			}
		}
		if !pr.known || pr.catchUp {
			if !now.Before(pr.restUntil) {
				catchUp = append(catchUp, p)
			}
			continue
		}
		if len(pr.queue) == 0 {
			if master && (pr.heard < epoch || s.noticeLocked(pr, p, epoch)) {
				// Nothing new to send, but the committed position moved
				// on (acknowledgements came in), or the replica has not
				// answered a batch of this tenure yet (it may hold changes
				// of an earlier one that this tenure never had: its answer
				// to the first batch keeps them, see Heard): say so alone.
				if !rm.takeHeader(wireBatchBase) {
					if cut < 0 {
						cut = i
					}
					continue
				}
				req.Batches = append(req.Batches, ToWire(s.notice(pr, p, epoch)))
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
		req.Batches = append(req.Batches, batches...)
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
func (s *Shipper) notice(pr *progress, p int, epoch uint64) store.Batch {
	b := store.Batch{Partition: p, Epoch: epoch, From: pr.acked, UpTo: pr.acked}
	s.stampLocked(&b)
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
// was emptied.
func (s *Shipper) takeRuns(pr *progress, p int, rm *room) (out []WireBatch, all bool) {
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
				out = append(out, ToWire(cur.Batch))
			}
			s.stampLocked(&piece.Batch) // the epoch it was committed at
			cur = &piece
		}
		if n < len(q.Docs) {
			break
		}
	}
	if cur != nil {
		out = append(out, ToWire(cur.Batch))
	}
	return out, len(pr.queue) == 0
}

// mergeRuns joins two runs of a partition's history that follow on (a.UpTo
// is b.From, same epoch) into one: the latest state of every document
// changed in (a.From, b.UpTo], in position order. The replica then applies
// one run, in one commit, instead of one per group commit of the master.
func mergeRuns(a, b queuedRun) queuedRun {
	type sized struct {
		doc  *store.Doc
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
	a.Docs, a.sizes = make([]*store.Doc, len(all)), make([]int, len(all))
	for i, e := range all {
		a.Docs[i], a.sizes[i] = e.doc, e.size
	}
	a.UpTo = b.UpTo
	return a
}

func maxPosition(a, b store.Position) store.Position {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

// send delivers a request and records what the replica answered.
func (s *Shipper) send(d *dest, req Request) error {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	resp, err := s.cfg.Send(ctx, d.id, req)
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
		// What was in flight is unknown: catch those partitions up.
		for _, b := range req.Batches {
			if pr := d.parts[b.Partition]; pr != nil {
				pr.catchUp = true
			}
		}
		s.mu.Unlock()
		return err
	}
	var diverged []Result
	var refused error
	before := map[int]store.Position{} // each partition's majority-committed position before these answers
	for _, r := range resp.Results {
		if _, ok := before[r.Partition]; !ok {
			before[r.Partition] = s.majorityLocked(r.Partition)
		}
	}
	for i, r := range resp.Results {
		pr := d.parts[r.Partition]
		if pr == nil {
			continue
		}
		switch r.Code {
		case "ok", "gap", "full-copy", "diverged":
			pr.heard = max(pr.heard, req.Batches[i].Epoch)
		}
		switch r.Code {
		case "ok":
			pr.acked, pr.known = r.Applied, true
			if pr.acked.Compare(s.committed[r.Partition]) >= 0 {
				pr.behindSince = time.Time{}
			}
			pr.told = maxPosition(pr.told, req.Batches[i].Committed)
		case "gap":
			pr.acked, pr.known, pr.catchUp = r.Applied, true, true
		case "full-copy":
			pr.acked, pr.known, pr.catchUp, pr.forceFull = r.Applied, true, true, true
			pr.queue, pr.queued = nil, 0
		case "diverged":
			pr.acked, pr.known, pr.catchUp = r.Applied, true, true
			pr.queue, pr.queued = nil, 0
			diverged = append(diverged, r)
		case "stale-epoch", "is-master":
			// This node is no longer the master it thinks it is; its lease
			// will say so. Stop shipping this partition there.
			pr.queue, pr.queued, pr.catchUp = nil, 0, true
			refused = fmt.Errorf("replica %s refused partition %d: %s (its epoch %d)", d.id, r.Partition, r.Code, r.Epoch)
		default:
			pr.catchUp = true
			refused = fmt.Errorf("replica %s could not apply partition %d: %s", d.id, r.Partition, logsafe.ClipTo(r.Error, 300))
		}
	}
	for p, was := range before {
		if s.majorityLocked(p).Compare(was) > 0 {
			// The other replicas are told too (this one is, by the
			// round that follows its answer).
			for _, o := range s.dests {
				if o != d && o.parts[p] != nil {
					o.poke()
				}
			}
		}
	}
	s.changed.Broadcast()
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

// stamp sets a batch's epoch start and chain, those of its epoch on this
// node, and the majority-committed position it carries.
func (s *Shipper) stamp(b *store.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stampLocked(b)
}

// stampLocked is stamp; call with s.mu held.
func (s *Shipper) stampLocked(b *store.Batch) {
	b.EpochStart = s.cfg.EpochStart(b.Partition, b.Epoch)
	if s.cfg.Epochs != nil {
		b.Epochs = s.cfg.Epochs(b.Partition, b.Epoch)
	}
	b.Committed = s.committedLocked(b)
}

// committedLocked is the majority-committed position a batch carries: the
// partition's, if the batch is of the tenure it was found in (a run left
// from an earlier tenure carries none: its history need not be this
// tenure's).
func (s *Shipper) committedLocked(b *store.Batch) store.Position {
	held := s.majorityLocked(b.Partition)
	if s.majority[b.Partition].epoch != b.Epoch {
		return store.Position{}
	}
	return held
}

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
// follows from there.
func (s *Shipper) restore(d *dest, p int, agreed store.Position, keys []string) error {
	epoch, master := s.cfg.Epoch(p)
	if !master {
		return nil
	}
	s.log.Info("restoring a replica's rolled back documents", "replica", d.id, "partition", p, "documents", len(keys),
		"agreed", agreed)
	var b store.Batch
	var rm room
	next := func() {
		b = store.Batch{Partition: p, Epoch: epoch, From: agreed, UpTo: agreed, Restore: true}
		s.stamp(&b)
		rm = newRoom(min(restoreChunk, s.cfg.MaxBatchDocs), s.cfg.MaxBatchBytes-wireBatchBase)
	}
	flush := func() error {
		if len(b.Docs) == 0 && len(b.Absent) == 0 {
			return nil
		}
		err := s.send(d, Request{Batches: []WireBatch{ToWire(b)}})
		next()
		return err
	}
	next()
	for _, k := range keys {
		doc, err := s.cfg.Get(s.ctx, p, k)
		absent := errors.Is(err, store.ErrNotFound)
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
	epoch, master := s.cfg.Epoch(p)
	if !master {
		return nil
	}
	s.mu.Lock()
	pr := d.parts[p]
	known, acked := pr.known, pr.acked
	s.mu.Unlock()
	if !known {
		// Probe: an empty batch from the zero position learns where the
		// replica is (it answers "gap" with its applied position, or ok).
		probe := store.Batch{Partition: p, Epoch: epoch}
		s.stamp(&probe)
		if err := s.send(d, Request{Batches: []WireBatch{ToWire(probe)}}); err != nil {
			s.catchUpFailed(pr)
			return err
		}
		return nil
	}
	target := s.cfg.Last(p)
	s.mu.Lock()
	full := pr.forceFull || behindHorizon(acked, s.horizon(p))
	s.mu.Unlock()
	var toCopy int64
	if s.cfg.Count != nil && acked.Compare(target) < 0 {
		from := acked
		if full {
			from = store.Position{}
		}
		toCopy, _ = s.cfg.Count(s.ctx, p, from) // only for display
	}
	s.mu.Lock()
	pr.queue, pr.queued = nil, 0 // everything up to target comes from the store
	pr.catchUp = false
	pr.copying, pr.copied, pr.toCopy = true, 0, toCopy
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		pr.copying = false
		s.mu.Unlock()
	}()
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
		docs, err := s.cfg.Scan(s.ctx, p, from, limit)
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
				s.retryCatchUp(pr)
				return nil
			}
		}
		b := store.Batch{Partition: p, Epoch: epoch, From: acked, UpTo: upTo, Docs: docs}
		s.stamp(&b)
		if ok, err := s.sendChunk(d, pr, b); !ok {
			return err
		}
		if last {
			s.log.Debug("replica caught up", "replica", d.id, "partition", p, "at", target)
			s.caughtUp(pr)
			return nil
		}
		if err := s.flushLive(d); err != nil {
			return err
		}
		from = docs[len(docs)-1].Pos
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

// behindHorizon says whether a replica acknowledged at acked must get a
// full copy: deletes after acked may be missing from the log.
func behindHorizon(acked, horizon store.Position) bool { return acked.Compare(horizon) < 0 }

func (s *Shipper) horizon(p int) store.Position {
	if s.cfg.Horizon == nil {
		return store.Position{}
	}
	return s.cfg.Horizon(p)
}

// retryCatchUp has the next round catch the partition up again.
func (s *Shipper) retryCatchUp(pr *progress) {
	s.mu.Lock()
	pr.catchUp = true
	s.mu.Unlock()
}

// sendChunk sends one chunk of a catch-up or full copy; ok is false when
// it failed or the replica refused it (the next round starts over).
func (s *Shipper) sendChunk(d *dest, pr *progress, b store.Batch) (ok bool, err error) {
	if err := s.send(d, Request{Batches: []WireBatch{ToWire(b)}}); err != nil {
		s.catchUpFailed(pr)
		return false, err
	}
	var bytes int64
	for _, doc := range b.Docs {
		bytes += int64(doc.Size)
	}
	if s.cfg.OnCopied != nil && len(b.Docs) > 0 {
		s.cfg.OnCopied(d.id, b.Partition, len(b.Docs), bytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pr.copied += int64(len(b.Docs))
	return !pr.catchUp, nil
}

// fullCopy sends a replica every document and tombstone of a partition in
// key order, in chunks that each replace the replica's copy of a key range;
// only the final chunk moves the replica to target. Interrupted, it starts
// over from the first key: the replica's position has not moved.
func (s *Shipper) fullCopy(d *dest, pr *progress, p int, epoch uint64, acked, target store.Position) error {
	s.log.Info("replica is behind the tombstone horizon: sending a full copy", "replica", d.id, "partition", p,
		"acked", acked, "horizon", s.horizon(p), "target", target)
	if s.cfg.OnFullCopy != nil {
		s.cfg.OnFullCopy(p)
	}
	after := ""
	for {
		limit := s.scanLimit(pr)
		docs, err := s.cfg.ScanKeys(s.ctx, p, after, limit)
		if err != nil {
			s.scanFailed(pr, limit)
			return err
		}
		sizes := s.scanned(pr, limit, docs)
		more := len(docs) == limit
		keyTo := 0 // the header names the chunk's last key
		for _, doc := range docs {
			keyTo = max(keyTo, quotedSize(doc.Key))
		}
		rm := newRoom(s.cfg.MaxBatchDocs, s.cfg.MaxBatchBytes-wireBatchBase-quotedSize(after)-keyTo)
		if n := rm.take(0, sizes); n < len(docs) {
			docs, more = docs[:n], true
		}
		// Read after the scan: it covers every tombstone the scan missed.
		b, last := fullCopyChunk(p, epoch, after, docs, more, acked, target, s.horizon(p))
		s.stamp(&b)
		if ok, err := s.sendChunk(d, pr, b); !ok {
			return err
		}
		if last {
			s.log.Info("full copy done", "replica", d.id, "partition", p, "at", target)
			s.mu.Lock()
			pr.forceFull = false
			s.mu.Unlock()
			s.caughtUp(pr)
			return nil
		}
		if err := s.flushLive(d); err != nil {
			return err
		}
		after = b.KeyTo
	}
}

// fullCopyChunk builds the chunk of a full copy that follows the key after,
// from the documents scanned after it, in key order: while more may follow
// them it covers up to the last of them; otherwise it covers to the end
// and, being the final chunk, carries the target position.
func fullCopyChunk(p int, epoch uint64, after string, docs []*store.Doc, more bool, acked, target, horizon store.Position) (store.Batch, bool) {
	b := store.Batch{Partition: p, Epoch: epoch, UpTo: acked, Docs: docs, Full: true, KeyFrom: after, Horizon: horizon}
	if !more {
		b.UpTo = target
		return b, true
	}
	b.KeyTo = docs[len(docs)-1].Key
	return b, false
}

// DecodeRequest reads a request, keeping integers exact: document bodies
// hold int64 and float64 values, and JSON would turn every number into a
// float64.
func DecodeRequest(r io.Reader) (Request, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Request{}, err
	}
	for i := range req.Batches {
		for j := range req.Batches[i].Docs {
			if b := req.Batches[i].Docs[j].Body; b != nil {
				req.Batches[i].Docs[j].Body = normalize(b).(map[string]any)
			}
		}
	}
	return req, nil
}

// normalize turns json.Number values into int64 (when the literal is an
// integer that fits) or float64, as documents hold them.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}

// approxSize estimates a body's encoded size for the replica's cache budget.
func approxSize(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 8
		for k, e := range x {
			n += len(k) + 4 + approxSize(e)
		}
		return n
	case []any:
		n := 8
		for _, e := range x {
			n += approxSize(e)
		}
		return n
	case string:
		return len(x) + 4
	}
	return 8
}

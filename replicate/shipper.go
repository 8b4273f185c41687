package replicate

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoal-db/shoal/api/wire"
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/shard"
)

// Mastership is what the shipper asks of the node about the partitions it
// masters.
type Mastership interface {
	// Epoch is the epoch this node masters a partition at and may write
	// (ok false: not master, or not writable yet).
	Epoch(partition int) (epoch uint64, ok bool)
	// Replicas returns the replicas of a partition this node masters (none
	// when it does not): the responsible list after the master, in order.
	Replicas(partition int) []string
	// Copies is how many copies each partition should have (the
	// replication factor, or fewer when the cluster has fewer nodes that
	// can hold one): the majority-committed position counts against it,
	// as write concerns do (shard.WriteQuorum). 0: the master and the
	// replicas listed.
	Copies() int
	// Counted returns those of replicas (a partition's, as Replicas
	// listed them while this node mastered it at epoch) whose
	// acknowledgements count towards its majority now, in order; the
	// others are still shipped to. A copy does not count while the master
	// is deciding to replace it, or while a list of copies that does not
	// name it may be kept by the lease voters (a write held by such a copy
	// could be on no copy of the list a node taking over reads). It may
	// return replicas itself when all count.
	Counted(partition int, epoch uint64, replicas []string) []string
}

// Source is the master's copy of its partitions: the log replicas are
// shipped and caught up from.
type Source interface {
	// Last is the master's newest committed position of a partition.
	Last(partition int) record.Position
	// EpochStart is the position this node's given epoch of a partition
	// started from.
	EpochStart(partition int, epoch uint64) record.Position
	// Epochs is the epoch chain this node's given epoch of a partition
	// follows (its tenure last, starting at EpochStart), carried by every
	// batch: a replica tells from it which of its changes, of any older
	// epoch, the master's history does not contain. Nil: batches carry
	// the epoch start alone.
	Epochs(partition int, epoch uint64) []record.EpochStart
	// Horizon is the highest position of a tombstone the master purged
	// from a partition (zero: none): a replica acknowledged before it gets
	// a full copy.
	Horizon(partition int) record.Position
	// Get reads the master's current state of a document (ErrNotFound: no
	// record), to restore a replica after a rollback.
	Get(ctx context.Context, partition int, key string) (*record.Doc, error)
	// Scan reads a partition's documents after a position, in position
	// order (catch-up).
	Scan(ctx context.Context, partition int, after record.Position, limit int) ([]*record.Doc, error)
	// ScanKeys reads up to limit of a partition's documents with a key
	// after afterKey ("" = from the first), in key order (full copy).
	ScanKeys(ctx context.Context, partition int, afterKey string, limit int) ([]*record.Doc, error)
	// Count counts a partition's documents after a position (the zero
	// position: all), so a copy in progress shows how much is left; only
	// for display.
	Count(ctx context.Context, partition int, after record.Position) (int64, error)
}

// Transport delivers a request to a replica.
type Transport interface {
	Send(ctx context.Context, replica string, req Request) (Response, error)
}

// Observer is told of copies, for metrics.
type Observer interface {
	// FullCopyStarted: a full copy of a partition began.
	FullCopyStarted(partition int)
	// Copied: a chunk of a catch-up or full copy delivered docs documents
	// of about bytes to replica.
	Copied(replica string, partition int, docs int, bytes int64)
}

// Config wires a Shipper to its node. The shipper never calls its
// interfaces with its own lock held (see view.go), so they may take the
// node's locks.
type Config struct {
	Mastership Mastership
	Source     Source
	Transport  Transport
	Observer   Observer // nil: nobody is told
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
	// Now is the clock (nil: time.Now); tests pass a fake one.
	Now func() time.Time
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
	committed map[int]record.Position // newest position handed to Committed, per partition
	majority  map[int]heldAt          // the majority-committed position found, per partition
	// seq numbers the answers taken in (progress.ackedAt) and the
	// majority-committed positions kept (heldAt.at); it moves under mu
	// and is read without it, before a snapshot is read (view.go).
	seq    atomic.Uint64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// heldAt is a majority-committed position found in a tenure: it stays
// committed for the rest of the tenure even if an acknowledgement it was
// counted from goes (a replica replaced, or one that lost its copy).
type heldAt struct {
	epoch uint64
	pos   record.Position
	at    uint64 // Shipper.seq when it was kept
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Shipper{cfg: cfg, log: cfg.Logger, dests: map[string]*dest{}, committed: map[int]record.Position{}, majority: map[int]heldAt{}}
	s.changed = sync.NewCond(&s.mu)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// now reads the shipper's clock.
func (s *Shipper) now() time.Time { return s.cfg.Now() }

// Close stops every sender.
func (s *Shipper) Close() {
	s.cancel()
	s.mu.Lock()
	s.changed.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

// destLocked returns the sender of replica id, starting its goroutine if
// it has none running.
func (s *Shipper) destLocked(id string) *dest {
	d := s.dests[id]
	if d == nil {
		d = &dest{id: id, wake: make(chan struct{}, 1), parts: map[int]*progress{}}
		s.dests[id] = d
	}
	if !d.running && s.ctx.Err() == nil {
		d.running = true
		s.wg.Add(1)
		go s.run(d)
	}
	return d
}

// Committed queues a committed run of a partition's history for each of
// its replicas. It never blocks.
func (s *Shipper) Committed(b record.Batch) {
	replicas := s.cfg.Mastership.Replicas(b.Partition)
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
		pr.enqueue(run, len(b.Docs), s.cfg.MaxQueued, s.now())
		d.poke()
	}
}

// Ensure makes sure every replica of the partitions this node masters has
// a sender and progress, so a new or restarted replica is caught up, and
// every replica hears of a new tenure, even when no write arrives. Call it
// periodically.
func (s *Shipper) Ensure(partitions int) {
	all := make([]int, partitions)
	for p := range all {
		all[p] = p
	}
	snap := s.read(reads{parts: all})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range all {
		v := snap.parts[p]
		if !v.master {
			continue
		}
		for _, r := range v.replicas {
			d := s.destLocked(r)
			pr := d.parts[p]
			if pr == nil {
				pr = &progress{}
				d.parts[p] = pr
			}
			if !pr.known || pr.acked.Compare(v.last) < 0 || pr.heard < v.epoch {
				d.sweep = true // a partition idle as far as the sender knows may be among them
				d.poke()
			}
		}
	}
}

// Acked returns the position replica has acknowledged for partition.
func (s *Shipper) Acked(replica string, partition int) (record.Position, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d := s.dests[replica]; d != nil {
		if pr := d.parts[partition]; pr != nil && pr.known {
			return pr.acked, true
		}
	}
	return record.Position{}, false
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

// Copy describes replica's copy of partition as this node knows it, for
// logs that explain why a move or drain waits (Stage probe and Known false
// when it knows nothing of it). Behind is left zero: it is counted from
// the partition's history, which Lags reads.
func (s *Shipper) Copy(replica string, partition int) Lag {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Lag{ReplicaLag: wire.ReplicaLag{Replica: replica, Partition: partition}}
	if d := s.dests[replica]; d != nil {
		l = d.lagLocked(partition, s.now())
	}
	return l
}

// Recount wakes every wait for a count (WaitMajorityHeld,
// WaitReplicated): what Mastership reports changed in a way no answer of
// a replica shows (a copy counts again: Counted, Replicas).
func (s *Shipper) Recount() {
	s.mu.Lock()
	s.seq.Add(1) // a count read before this is not fresh
	s.changed.Broadcast()
	s.mu.Unlock()
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
// to pos, or ctx ends; it returns how many do. It calls replicas before
// each count, without its lock held, and counts only the
// acknowledgements that came in before that call (see view.go).
func (s *Shipper) WaitReplicated(ctx context.Context, partition int, pos record.Position, replicas func() []string, need int) (int, error) {
	defer s.wakeWhenDone(ctx)()
	for {
		seq := s.seq.Load()
		listed := replicas()
		s.mu.Lock()
		have, fresh := 0, true
		for _, r := range listed {
			if d := s.dests[r]; d != nil {
				if pr := d.parts[partition]; pr != nil && pr.known {
					if pr.ackedAt > seq {
						fresh = false // came in after listed was read: read it again
					} else if pr.acked.Compare(pos) >= 0 {
						have++
					}
				}
			}
		}
		if have >= need {
			s.mu.Unlock()
			return have, nil
		}
		if err := ctx.Err(); err != nil {
			s.mu.Unlock()
			return have, err
		}
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			return have, errors.New("shutting down")
		}
		if fresh && s.seq.Load() == seq {
			// No answer came in since listed was read (answers are
			// numbered under s.mu): the next one broadcasts after this
			// wait begins. One that came in meanwhile, of a replica not
			// in listed (the list changed), would not wake it: read again.
			s.changed.Wait()
		}
		s.mu.Unlock()
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
//
// A count that is not fresh (acknowledgements came in while it was read)
// is a lower bound of the position; it is counted again, a few times at
// most, so steady acknowledgements cannot keep the caller here.
func (s *Shipper) MajorityHeld(partition int) record.Position {
	const tries = 4
	var held record.Position
	for range tries {
		var fresh bool
		held, fresh, _ = s.countMajority(partition)
		s.mu.Unlock()
		if fresh {
			break
		}
	}
	return held
}

// countMajority reads what partition p's majority-committed position is
// counted from, then counts it under s.mu, which it returns holding; seq
// is the number of the last answer taken in before the read.
func (s *Shipper) countMajority(p int) (pos record.Position, fresh bool, seq uint64) {
	snap := s.read(reads{parts: []int{p}, copies: true})
	s.mu.Lock()
	pos, fresh = s.majorityLocked(p, snap)
	return pos, fresh, snap.seq
}

// majorityLocked is MajorityHeld counted from snap, read before the lock
// was taken (view.go says why that is as safe as reading under it);
// call with s.mu held. fresh is false when the count may fall short of
// what is known by now: an acknowledgement of a counted replica came in
// after snap was read (the count leaves it out), or a position of a later
// tenure than snap's was kept after snap was read (snap is of a tenure
// this node left: the position is then zero, and nothing is kept).
func (s *Shipper) majorityLocked(p int, snap *snapshot) (pos record.Position, fresh bool) {
	v := snap.parts[p]
	if !v.master {
		return record.Position{}, true
	}
	h := s.majority[p]
	if h.epoch > v.epoch && h.at > snap.seq {
		return record.Position{}, false
	}
	total := 1 + len(v.replicas)
	if snap.copies > 0 {
		total = snap.copies
	}
	q := shard.WriteQuorum(total)
	counted := q.Replicas(v.replicas)
	if len(v.counted) < len(v.replicas) {
		counted = slices.DeleteFunc(slices.Clone(counted), func(r string) bool { return !slices.Contains(v.counted, r) })
	}
	acked, fresh := s.ackedLocked(p, counted, snap.seq)
	held := majority(v.last, v.epoch, acked, q.MajorityReplicas())
	if h.epoch == v.epoch && h.pos.Compare(held) >= 0 {
		return h.pos, fresh
	}
	s.majority[p] = heldAt{epoch: v.epoch, pos: held, at: s.seq.Add(1)}
	return held, fresh
}

// ackedLocked lists the positions the replicas have acknowledged of
// partition p by seq (those not heard from yet are left out, and so are
// the answers taken in after seq: all false when there were any).
func (s *Shipper) ackedLocked(p int, replicas []string, seq uint64) (acked []record.Position, all bool) {
	all = true
	for _, r := range replicas {
		if d := s.dests[r]; d != nil {
			if pr := d.parts[p]; pr != nil && pr.known {
				if pr.ackedAt > seq {
					all = false
					continue
				}
				acked = append(acked, pr.acked)
			}
		}
	}
	return acked, all
}

// majority is the newest position a master at epoch, whose history ends
// at last, knows need of the replicas hold besides itself, given what the
// counted replicas acknowledged: the need-th newest acknowledgement, if it
// is of the epoch (see MajorityHeld), at most last.
func majority(last record.Position, epoch uint64, acked []record.Position, need int) record.Position {
	if need <= 0 {
		return last
	}
	if len(acked) < need {
		return record.Position{}
	}
	acked = slices.Clone(acked)
	slices.SortFunc(acked, func(a, b record.Position) int { return b.Compare(a) })
	held := acked[need-1]
	if held.Compare(last) > 0 {
		held = last
	}
	if held.Epoch != epoch {
		return record.Position{}
	}
	return held
}

// WaitMajorityHeld waits until the partition's majority-committed position
// (MajorityHeld) reaches pos, or ctx ends; it returns the position.
func (s *Shipper) WaitMajorityHeld(ctx context.Context, partition int, pos record.Position) (record.Position, error) {
	defer s.wakeWhenDone(ctx)()
	for {
		held, fresh, seq := s.countMajority(partition)
		if held.Compare(pos) >= 0 {
			s.mu.Unlock()
			return held, nil
		}
		if err := ctx.Err(); err != nil {
			s.mu.Unlock()
			return held, err
		}
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			return held, errors.New("shutting down")
		}
		if fresh && s.seq.Load() == seq {
			// Nothing taken in or kept since the read (see WaitReplicated).
			s.changed.Wait()
		}
		s.mu.Unlock()
	}
}

// Lag reports, per replica and partition this node masters (Lags), the
// acknowledged position and how far it is behind in changes; Copy gives
// one for any replica, with Behind left zero.
type Lag struct {
	// ReplicaLag is what the API shows of it.
	wire.ReplicaLag
	// The rest is for logs that explain why a move or drain waits (Copy),
	// not for the API: a user's placement answer lists Lags too.
	//
	// Stage is where the replica's progress stands (CatchUp and Copying
	// say it in two booleans).
	Stage Stage `json:"-"`
	// Known: Acked was learned from the replica.
	Known bool `json:"-"`
	// Heard is the newest epoch of a batch of this node's the replica
	// answered (see Shipper.Heard).
	Heard  uint64 `json:"-"`
	Queued int    `json:"-"` // documents queued for it
	// Running: the sender goroutine for the replica runs.
	Running bool `json:"-"`
	// LastError is why the last request to the replica failed ("" when
	// the last one succeeded).
	LastError string `json:"-"`
}

// lagLocked describes partition's copy on d, with Behind left zero; call
// with the shipper's lock held.
func (d *dest) lagLocked(partition int, now time.Time) Lag {
	l := Lag{ReplicaLag: wire.ReplicaLag{Replica: d.id, Partition: partition}, Running: d.running, LastError: d.lastError}
	pr := d.parts[partition]
	if pr == nil {
		return l
	}
	l.Stage, l.Acked, l.Known, l.Heard, l.Queued = pr.stage(), pr.acked, pr.known, pr.heard, pr.queued
	l.CatchUp, l.Copying, l.Copied, l.ToCopy = l.Stage != StageStream, l.Stage == StageCopying, pr.copied, pr.toCopy
	if !pr.behindSince.IsZero() {
		l.LagMs = now.Sub(pr.behindSince).Milliseconds()
	}
	return l
}

// Lags lists the progress of every replica.
func (s *Shipper) Lags() []Lag {
	var all []Lag
	var parts []int
	s.mu.Lock()
	now := s.now()
	for _, d := range s.dests {
		for p := range d.parts {
			all = append(all, d.lagLocked(p, now))
			parts = append(parts, p)
		}
	}
	s.mu.Unlock()
	slices.Sort(parts)
	snap := s.read(reads{parts: slices.Compact(parts)})
	var out []Lag
	for _, l := range all {
		v := snap.parts[l.Partition]
		if !v.master || !slices.Contains(v.replicas, l.Replica) {
			continue // not master, or no longer a replica there
		}
		if v.last.Seq > l.Acked.Seq {
			l.Behind = v.last.Seq - l.Acked.Seq
		}
		out = append(out, l)
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

// stamp sets a batch's epoch start and chain, those of its epoch on this
// node, and the majority-committed position it carries.
func (s *Shipper) stamp(b *record.Batch) {
	snap := s.read(stampReads(b))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stampLocked(b, snap)
}

// stampReads is what stamping b needs read.
func stampReads(b *record.Batch) reads {
	return reads{parts: []int{b.Partition}, tenures: []tenureOf{{b.Partition, b.Epoch}}, copies: true}
}

// stampLocked is stamp from snap, which holds b's partition and tenure;
// call with s.mu held.
func (s *Shipper) stampLocked(b *record.Batch, snap *snapshot) {
	t := snap.tenures[tenureOf{b.Partition, b.Epoch}]
	b.EpochStart = t.start
	if t.epochs != nil {
		b.Epochs = t.epochs
	}
	b.Committed = s.committedLocked(b, snap)
}

// committedLocked is the majority-committed position a batch carries: the
// partition's, if the batch is of the tenure it was found in (a run left
// from an earlier tenure carries none: its history need not be this
// tenure's). A count that fell short (majorityLocked's fresh) carries
// less than it could, never more than is held.
func (s *Shipper) committedLocked(b *record.Batch, snap *snapshot) record.Position {
	held, _ := s.majorityLocked(b.Partition, snap)
	if s.majority[b.Partition].epoch != b.Epoch {
		return record.Position{}
	}
	return held
}

package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Next is the state a Mutation asks for.
type Next struct {
	Body   map[string]any // the new body (ignored when Delete)
	Delete bool           // leave a tombstone
	Size   int            // approximate encoded size of Body, for the cache budget
}

// Mutation computes the next state of a document from its current state:
// cur is nil when the store holds no record of it, and a tombstone
// (cur.Deleted) when it was deleted. It runs on the partition's writer
// goroutine, one at a time, so its check and its change are atomic; it must
// not block or do I/O. Returning an error leaves the document unchanged and
// hands the error to the caller.
type Mutation func(cur *Doc) (Next, error)

// Op is one change to one document.
type Op struct {
	Partition      int
	User, Coll, ID string
	// Fresh says the id was generated for this request, so the store cannot
	// hold it yet and no lookup is needed.
	Fresh  bool
	Mutate Mutation
}

// Result is the outcome of an Op: the committed state, or an error.
type Result struct {
	Doc *Doc
	Err error
}

// ErrClosed is returned for work submitted after Close.
var ErrClosed = errors.New("the node is shutting down")

// ErrNotMaster is returned when this node does not hold the partition's
// lease, so it may not change the partition.
var ErrNotMaster = errors.New("this node is not the partition's master")

// ErrOutcomeUnknown is returned when a commit failed: part of it may have
// been stored.
var ErrOutcomeUnknown = errors.New("the commit failed; some of its changes may have been stored")

// ErrLeaseLost is returned when the lease ran out while a commit was being
// written: the change is stored here but was not acknowledged in time.
var ErrLeaseLost = errors.New("the partition's lease ran out during the commit; the outcome is unknown")

// WriterOptions tunes a Writer.
type WriterOptions struct {
	// CacheBytes bounds the write-through document cache (0 disables it).
	CacheBytes int64
	// MaxBatch bounds how many changes one commit carries (default 256).
	MaxBatch int
	// Epoch is the epoch new positions carry when there is no Lease (default 1).
	Epoch uint64
	// Lease, if set, says whether this node may change a partition now and
	// at which epoch. It is asked before and after every commit.
	Lease func(partition int) (epoch uint64, ok bool)
	// AwaitLease, if set, is asked when Lease refuses right after a
	// commit at epoch. It waits while the refusal may pass with the lease
	// still held at epoch (the node's list of copies is changing) and
	// reports whether Lease grants epoch again; if it does, the commit is
	// acknowledged. Without it, or when it reports false, it is not.
	AwaitLease func(ctx context.Context, partition int, epoch uint64) bool
	// OnCommit, if set, is told of every acknowledged commit: its partition,
	// epoch and when the writer checked the lease and finished (tests
	// record the history of accepted writes with it).
	OnCommit func(partition int, epoch uint64, start, end time.Time)
	// OnStaleEpoch, if set, is told when the lease's epoch is older than the
	// partition's newest stored position (the writer refuses such writes).
	OnStaleEpoch func(partition int, newest uint64)
	// OnCommitted, if set, is handed every acknowledged commit as a run of
	// the partition's history for replication: the latest state of each
	// document changed in (from, upTo], in position order. It must not
	// block (it runs on the partition's writer). It is called before
	// Position reports upTo, so a Position beyond the newest upTo it was
	// handed means the history moved without a run: a commit that failed
	// (part of it may be stored) or whose lease ran out (stored, not
	// acknowledged). Replication catches those up from the store.
	OnCommitted func(b Batch)
	// ObserveBatch, if set, is told the size and duration of every commit.
	ObserveBatch func(changes int, d time.Duration)
	Logger       *slog.Logger
}

// Writer owns every change to the documents of a node: one ordered writer
// goroutine per partition, started on first use. Each writer takes what has
// queued up while its previous commit ran, applies the mutations in order
// against the current states (from the cache, else the store), assigns each
// change the next position, and commits them all in one bulk write (group
// commit). Callers are answered only after their change is committed.
type Writer struct {
	store    *Store
	cache    *cache
	log      *slog.Logger
	opts     WriterOptions
	parts    []*partition
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closeMu  sync.RWMutex
	closed   bool
	stopping chan struct{}
	recs     records
}

type partition struct {
	id    int
	start sync.Once
	queue chan *request
	// commits is odd while a commit is being written and grows by two per
	// commit: a reader that saw the same even value before and after its
	// store read knows no commit overlapped it.
	commits   atomic.Uint64
	mu        sync.Mutex
	last      Position // newest position stored here
	applied   Position // as a replica: the master's history is held up to here
	epochSeen uint64   // newest epoch seen in a replication batch
	// staged is the highest position of any document state this node has
	// begun to store (a commit as master, a batch as replica): a read that
	// ends sees no state past it (see Visible).
	staged Position
	loaded bool // last and applied have been read from the store
	// startEpoch/startPos: the epoch of this node's latest tenure as
	// master, and the position its history was complete up to when that
	// tenure began; durable (the partition's record) once tenureRecorded.
	startEpoch     uint64
	startPos       Position
	tenureRecorded bool
	// carrying: the carry of the current tenure is not finished (durable,
	// in the record): the copy is complete only up to the tenure's start,
	// so a next tenure starts there and carries what is left.
	carrying bool
	// chain: the epoch chain of the history this copy follows (see
	// chain.go); read by Epochs under mu, replaced whole, never changed in
	// place.
	chain []EpochStart
	// horizon is the highest position of any tombstone purged here: a
	// replica behind it cannot be caught up in position order (deletes
	// are missing from the log) and gets a full copy instead.
	horizon Position
	// recopy: this node waits for a full copy (see startRecopy).
	recopy bool
	// untouched: the copy was marked by MarkNew in this run and has
	// taken nothing since (no full copy finished, no tenure, no history
	// thrown away): this process acknowledged nothing of the partition.
	untouched bool
	// restoring: the epoch of the master whose restore of this node's
	// diverged changes is not finished, or whose check for them failed:
	// each of its batches is checked (see rollBack).
	restoring uint64
	// committed: the newest majority-committed position a batch of the
	// current master told (see Writer.Committed), at most applied; in
	// memory only.
	committed Position
	// tombstones is false only when the partition is known to hold no
	// tombstone, so the purge can skip it; set by every committed or
	// applied delete, cleared by a purge that leaves none.
	tombstones atomic.Bool
	// unsure: an apply failed after it may have stored documents above
	// the newest stored position this copy knows (last), until load reads
	// it again from the store. Set and cleared on the partition's
	// goroutine, with mu held.
	unsure bool
}

type request struct {
	ops     []Op
	results []Result
	apply   *Batch       // a replication batch instead of ops
	applied ApplyResult  // its outcome
	purge   *purge       // a tombstone purge instead of ops
	pause   *pause       // a pause of the partition instead of ops
	tenure  *tenureStart // a tenure's start instead of ops
	whole   bool         // a Whole instead of ops
	done    chan struct{}
}

// tenureStart is a StartTenure: the tenure's epoch, and the outcome.
type tenureStart struct {
	epoch uint64
	err   error
}

// pause holds a partition's writer still: paused is closed once every
// earlier request has been handled, and the writer takes nothing more until
// resume is closed.
type pause struct {
	paused chan struct{}
	resume chan struct{}
}

// alone reports whether the request runs on its own rather than grouped
// with client ops.
func (r *request) alone() bool {
	return r.apply != nil || r.purge != nil || r.pause != nil || r.tenure != nil || r.whole
}

// NewWriter creates the writer for a store with partitions partitions.
func NewWriter(s *Store, partitions int, o WriterOptions) *Writer {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Epoch == 0 {
		o.Epoch = 1
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{store: s, cache: newCache(o.CacheBytes), log: o.Logger, opts: o,
		parts: make([]*partition, partitions), ctx: ctx, cancel: cancel, stopping: make(chan struct{})}
	for i := range w.parts {
		w.parts[i] = &partition{id: i, queue: make(chan *request, 1024)}
		w.parts[i].tombstones.Store(true) // unknown until LoadAll looks
	}
	return w
}

// Do applies one op and waits for its commit. If ctx ends first, Do returns
// ctx's error and the op may still be committed.
func (w *Writer) Do(ctx context.Context, op Op) Result {
	return w.DoAll(ctx, []Op{op})[0]
}

// DoAll applies ops, which must all be of one partition, in order and in one
// commit.
func (w *Writer) DoAll(ctx context.Context, ops []Op) []Result {
	results := make([]Result, len(ops))
	if len(ops) == 0 {
		return results
	}
	// fail answers with a slice of its own: the writer goroutine may still
	// be filling results.
	fail := func(err error) []Result {
		out := make([]Result, len(ops))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	p := w.parts[ops[0].Partition]
	for _, op := range ops {
		if op.Partition != p.id {
			return fail(fmt.Errorf("store: DoAll mixes partitions %d and %d", p.id, op.Partition))
		}
	}
	req := &request{ops: ops, results: results, done: make(chan struct{})}
	if err := w.submit(ctx, p, req); err != nil {
		return fail(err)
	}
	return req.results
}

// submit queues req on its partition's writer (started on first use) and
// waits until it has been handled, or ctx ends (then it may still be).
func (w *Writer) submit(ctx context.Context, p *partition, req *request) error {
	if err := w.enqueue(ctx, p, req); err != nil {
		return err
	}
	select {
	case <-req.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue hands req to the partition's writer goroutine (started on first
// use) without waiting for it to be handled.
func (w *Writer) enqueue(ctx context.Context, p *partition, req *request) error {
	w.closeMu.RLock()
	defer w.closeMu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	w.startWriter(p)
	select {
	case p.queue <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startWriter starts the partition's writer goroutine on first use; call
// it with closeMu held for reading, the writer not closed.
func (w *Writer) startWriter(p *partition) {
	p.start.Do(func() {
		w.wg.Add(1)
		go w.run(p)
	})
}

// post hands req to the partition's writer without blocking its caller:
// at once when the queue has room (nearly always: it holds 1,024), else
// from a goroutine that ends with the writer's context. Nothing waits for
// req.
func (w *Writer) post(p *partition, req *request) {
	w.closeMu.RLock()
	defer w.closeMu.RUnlock()
	if w.closed {
		return
	}
	w.startWriter(p)
	select {
	case p.queue <- req:
	default:
		go func() { _ = w.enqueue(w.ctx, p, req) }()
	}
}

// Get reads the current state of a document: from the cache, else from the
// store (and then caches it, unless a commit to the partition overlapped the
// read). It returns ErrNotFound when there is no record; a tombstone is
// returned as a Doc with Deleted set.
func (w *Writer) Get(ctx context.Context, partition int, key string) (*Doc, error) {
	if d, ok := w.cache.get(partition, key); ok {
		if d == nil {
			return nil, ErrNotFound
		}
		return d, nil
	}
	p := w.parts[partition]
	before := p.commits.Load()
	d, err := w.store.Get(ctx, partition, key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if before%2 == 0 {
		w.cache.fill(partition, key, d, func() bool { return p.commits.Load() == before })
	}
	return d, err
}

// Visible is a bound on the document states of a partition that a read
// may have seen: no read that ended before Visible was called returned a
// state from a later position. A majority or linearizable read that
// cannot name the position of what it returned (a query, a listing, a
// missing document) waits until a majority of copies hold this one.
func (w *Writer) Visible(partition int) Position {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return maxPosition(maxPosition(p.staged, p.last), p.applied)
}

// stage records that states up to pos are about to be stored.
func (p *partition) stage(pos Position) {
	p.mu.Lock()
	p.staged = maxPosition(p.staged, pos)
	p.mu.Unlock()
}

// EpochStart returns where a master's epoch of a partition began: the
// partition's history as it stood before the first commit at that epoch
// (or where it would begin now, if nothing was committed at it yet: the
// position this node's copy is complete up to). For another node's epoch,
// the start its chain names, if it names one.
func (w *Writer) EpochStart(partition int, epoch uint64) Position {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epochStart(epoch)
}

// epochStart is EpochStart with p.mu held.
func (p *partition) epochStart(epoch uint64) Position {
	if p.startEpoch == epoch {
		return p.startPos
	}
	if i := slices.IndexFunc(p.chain, func(e EpochStart) bool { return e.Epoch == epoch }); i >= 0 {
		return p.chain[i].Start
	}
	return p.held()
}

// Epochs returns the epoch chain a master at epoch ships with its batches
// of a partition: the tenures of its history before epoch, then epoch's
// own, starting where EpochStart says.
func (w *Writer) Epochs(partition int, epoch uint64) []EpochStart {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return withTenure(p.chain, EpochStart{Epoch: epoch, Start: p.epochStart(epoch)})
}

// NewestEpoch is the newest epoch this node has seen for a partition: in
// its stored history, in a master's batches, or as its own tenure.
func (w *Writer) NewestEpoch(partition int) uint64 {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.last.Epoch, p.applied.Epoch, p.epochSeen, p.startEpoch)
}

// Tenure returns the epoch of this node's latest tenure as the partition's
// master (0: it never mastered it, or its copy was replaced since).
func (w *Writer) Tenure(partition int) uint64 {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startEpoch
}

// Position returns the newest position stored for a partition (read from the
// store by LoadAll, or on the partition's first use).
func (w *Writer) Position(partition int) Position {
	p := w.parts[partition]
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Close stops taking work, commits what is queued, and waits for every
// partition writer to finish, or for ctx to end (then in-flight commits are
// abandoned).
func (w *Writer) Close(ctx context.Context) error {
	w.closeMu.Lock()
	if w.closed {
		w.closeMu.Unlock()
		return nil
	}
	w.closed = true
	close(w.stopping)
	w.closeMu.Unlock()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
		w.cancel()
		return nil
	case <-ctx.Done():
		w.cancel()
		<-done
		return fmt.Errorf("store: writers did not finish in time: %w", ctx.Err())
	}
}

func (w *Writer) run(p *partition) {
	defer w.wg.Done()
	for {
		var first *request
		select {
		case first = <-p.queue:
		case <-w.stopping:
			// No more requests can arrive: commit what is queued, then stop.
			for {
				select {
				case r := <-p.queue:
					w.handle(p, r)
				default:
					return
				}
			}
		}
		w.handle(p, first)
	}
}

// handle runs a replication batch, a purge or a pause on its own, or client
// ops grouped with whatever else is queued.
func (w *Writer) handle(p *partition, first *request) {
	if first.alone() {
		w.handleAlone(p, first)
		return
	}
	batch := w.collect(p, first)
	w.process(p, batch)
	if n := len(batch); n > 0 && batch[n-1].alone() {
		// collect stops at a request that runs alone and hands it over last.
		w.handleAlone(p, batch[n-1])
	}
}

// handleAlone runs a request that is not grouped: a replication batch, a
// purge, a tenure's start, a Whole, or a pause (which blocks this
// partition's writer until resumed).
func (w *Writer) handleAlone(p *partition, r *request) {
	switch {
	case r.apply != nil:
		r.applied = w.processApply(p, r.apply)
	case r.purge != nil:
		r.purge.err = w.processPurge(p, r.purge)
	case r.tenure != nil:
		r.tenure.err = w.startTenure(p, r.tenure.epoch)
	case r.whole:
		w.whole(p)
	case r.pause != nil:
		close(r.pause.paused)
		select {
		case <-r.pause.resume:
		case <-w.ctx.Done():
		}
	}
	close(r.done)
}

// Pause stops a partition's writer once everything queued before it is
// committed, so that no commit is in flight or can start until resume is
// called: an orderly handoff of the partition's lease needs the history to
// stand still while the last changes ship. Writes submitted meanwhile wait
// in the queue. resume must be called (it is idempotent). A context that
// ends first, or as the pause is reached, fails it and lets the writer
// go on.
func (w *Writer) Pause(ctx context.Context, partition int) (resume func(), err error) {
	pz := &pause{paused: make(chan struct{}), resume: make(chan struct{})}
	if err := w.enqueue(ctx, w.parts[partition], &request{pause: pz, done: make(chan struct{})}); err != nil {
		return nil, err
	}
	var once sync.Once
	resume = func() { once.Do(func() { close(pz.resume) }) }
	select {
	case <-pz.paused:
		if ctx.Err() == nil {
			return resume, nil
		}
		// Reached as the context ended (both ready, select picks at
		// random): the context wins, always.
	case <-ctx.Done():
	}
	resume() // the pause may still be reached: let it pass at once
	return nil, ctx.Err()
}

// collect takes first and whatever else is already queued, up to MaxBatch ops.
func (w *Writer) collect(p *partition, first *request) []*request {
	batch := []*request{first}
	n := len(first.ops)
	for n < w.opts.MaxBatch {
		select {
		case r := <-p.queue:
			batch = append(batch, r)
			if r.alone() {
				return batch // a replication batch, purge or pause ends the group
			}
			n += len(r.ops)
		default:
			return batch
		}
	}
	return batch
}

// staged is the state of one key within a batch.
type staged struct {
	doc    *Doc
	insert bool // the store holds no record of the key before this batch
}

// firstVersion is the version a key the partition holds no state of
// starts at when written at position pos: 1, or, once tombstones may have
// been purged (a horizon: this node purged some, or took a full copy's
// chunk or a rollback's restore from a master that had), pos's sequence
// number. The key may be one whose tombstone went. No version of a key is
// above the sequence number of the position that wrote it (a key's
// versions are written at ever later positions of one history, whose
// sequence numbers only grow, and a carry keeps a version at a later
// position still), so a document made again starts above every version
// it had: an If-Match or ETag of the old document never matches the new
// one, however long ago it was deleted.
func firstVersion(horizon, pos Position) int64 {
	if horizon == (Position{}) {
		return 1
	}
	return int64(pos.Seq)
}

func (w *Writer) process(p *partition, batch []*request) {
	if n := len(batch); batch[n-1].alone() {
		batch = batch[:n-1] // handled by handle, after this group
	}
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	if len(batch) == 0 {
		return
	}
	failAll := func(err error) {
		for _, r := range batch {
			for i := range r.results {
				r.results[i].Err = err
			}
		}
	}
	if err := w.load(p); err != nil {
		failAll(err)
		return
	}
	start := time.Now()
	epoch, err := w.leaseEpoch(p)
	if err == nil {
		err = w.beginTenure(p, epoch)
	}
	if err != nil {
		failAll(err)
		return
	}
	states := map[string]*staged{}
	var keys []string // in order of each key's first change
	type applied struct {
		r   *request
		i   int
		key string
	}
	var changed []applied
	pos := p.last
	from := p.last
	pos.Epoch = epoch
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, r := range batch {
		for i, op := range r.ops {
			key := DocKey(op.User, op.Coll, op.ID)
			st, ok := states[key]
			if !ok {
				cur, err := w.current(p, key, op.Fresh)
				if err != nil {
					r.results[i].Err = err
					continue
				}
				st = &staged{doc: cur, insert: cur == nil}
			}
			next, err := op.Mutate(st.doc)
			if err != nil {
				r.results[i].Err = err
				continue
			}
			pos.Seq++
			version := firstVersion(p.horizon, pos)
			if st.doc != nil {
				version = st.doc.Version + 1
			}
			d := &Doc{Key: key, User: op.User, Coll: op.Coll, ID: op.ID, Version: version,
				Pos: pos, Deleted: next.Delete, Updated: now, Size: next.Size, New: st.doc == nil}
			if !next.Delete {
				d.Body = next.Body
			}
			if !ok {
				states[key] = st
				keys = append(keys, key)
			}
			st.doc = d
			changed = append(changed, applied{r, i, key})
			r.results[i].Doc = d
		}
	}
	if len(keys) == 0 {
		return
	}
	writes := make([]write, 0, len(keys))
	for _, k := range keys {
		writes = append(writes, write{doc: states[k].doc, insert: states[k].insert})
		if states[k].doc.Deleted {
			p.tombstones.Store(true)
		}
	}
	// Keys were collected in order of first change; positions must be
	// committed in order so that a prefix of the bulk write is a prefix of
	// the history. Sort by each key's final position.
	slices.SortFunc(writes, func(a, b write) int { return a.doc.Pos.Compare(b.doc.Pos) })
	p.stage(pos)
	p.commits.Add(1)
	err = w.store.commit(w.ctx, p.id, writes)
	if err != nil {
		for _, k := range keys {
			w.cache.forget(p.id, k)
		}
	} else {
		for _, wr := range writes {
			w.cache.put(p.id, wr.doc.Key, wr.doc)
		}
	}
	p.commits.Add(1)
	if err != nil {
		w.log.Error("commit failed", "partition", p.id, "changes", len(changed), "err", err)
		for _, a := range changed {
			a.r.results[a.i] = Result{Err: fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)}
		}
		// Positions handed out in this batch are never reused: a partial
		// commit may have stored some of them.
		p.mu.Lock()
		p.last = Position{Epoch: pos.Epoch, Seq: pos.Seq}
		p.mu.Unlock()
		return
	}
	if w.opts.Lease != nil {
		if e, ok := w.opts.Lease(p.id); (!ok || e != epoch) && (w.opts.AwaitLease == nil || !w.opts.AwaitLease(w.ctx, p.id, epoch)) {
			w.log.Error("lease ran out during a commit", "partition", p.id, "epoch", epoch, "changes", len(changed))
			for _, a := range changed {
				a.r.results[a.i] = Result{Err: ErrLeaseLost}
			}
			// Stored, so in the partition's history, but not acknowledged
			// nor handed to OnCommitted: the position moves past it all
			// the same, and replication, which sees the partition beyond
			// the runs it was handed, catches replicas up from the store.
			p.mu.Lock()
			p.last = pos
			p.mu.Unlock()
			return
		}
	}
	if w.opts.OnCommit != nil {
		w.opts.OnCommit(p.id, epoch, start, time.Now())
	}
	if w.opts.OnCommitted != nil {
		docs := make([]*Doc, len(writes))
		for i, wr := range writes {
			docs[i] = wr.doc
		}
		w.opts.OnCommitted(Batch{Partition: p.id, Epoch: epoch, From: from, UpTo: pos, Docs: docs})
	}
	// Published only once the run is handed on: Position beyond the last
	// run handed to OnCommitted then always means changes stored without
	// one (a failed commit, a lease lost during it), never a run on its
	// way.
	p.mu.Lock()
	p.last = pos
	p.mu.Unlock()
	if w.opts.ObserveBatch != nil {
		w.opts.ObserveBatch(len(changed), time.Since(start))
	}
}

// leaseEpoch is the epoch this node may change the partition at now: its
// lease's (ErrNotMaster without one), unless this node has seen a newer
// epoch of the partition.
func (w *Writer) leaseEpoch(p *partition) (uint64, error) {
	epoch := w.opts.Epoch
	if w.opts.Lease != nil {
		var ok bool
		if epoch, ok = w.opts.Lease(p.id); !ok {
			return 0, ErrNotMaster
		}
	}
	if newest := max(p.last.Epoch, p.epochSeen, p.startEpoch); epoch < newest {
		// Fencing: a master with an older epoch than any this node has
		// seen for the partition (in its history, from a master's batch,
		// or as its own earlier tenure) must never write.
		if w.opts.OnStaleEpoch != nil {
			w.opts.OnStaleEpoch(p.id, newest)
		}
		return 0, fmt.Errorf("%w: lease epoch %d is older than epoch %d this node has seen for the partition (newest position %v)",
			ErrNotMaster, epoch, newest, p.last)
	}
	return epoch, nil
}

// beginTenure starts this node's tenure at epoch if it has not begun yet,
// and finishes its carry: everything a tenure needs before its first
// write.
func (w *Writer) beginTenure(p *partition, epoch uint64) error {
	if p.startEpoch != epoch {
		// A new tenure. Its history starts where this node's copy is
		// complete, never at a newer document it happens to hold (a
		// catch-up or full copy in progress stores documents out of
		// order), and it is recorded before any of its writes is
		// acknowledged, so that after a restart this node still counts
		// its own writes as held. The tenure joins the partition's epoch
		// chain in the same record.
		p.mu.Lock()
		// Documents stored beyond the start are carried into the tenure
		// before its first write (the node has StartTenure do it as soon
		// as the tenure takes writes); until then the copy is complete
		// only up to the start, durably (recorded with the tenure below).
		// (toCarry is asked before the start is set, and before carrying
		// changes: held, the start, depends on both.)
		carry := p.toCarry(epoch)
		start := p.held()
		p.startEpoch, p.startPos, p.carrying = epoch, start, carry
		p.untouched = false
		if p.recopy && p.last == (Position{}) {
			// A copy that awaited a full copy and holds nothing is the
			// master's now (see Whole). One holding documents of no
			// history (a full copy cut short, a copy thrown away) keeps
			// the mark: they are not carried, and only a full copy
			// replaces them; it counts as a copy all the same
			// (Recopying), its tenure confirmed.
			p.recopy = false
		}
		p.chain = withTenure(p.chain, EpochStart{Epoch: epoch, Start: start})
		p.mu.Unlock()
		p.tenureRecorded = false
	}
	if !p.tenureRecorded {
		w.setRecord(p.record(p.applied, p.horizon))
		if err := w.SyncApplied(w.ctx); err != nil {
			return fmt.Errorf("%w: recording this node's tenure as the partition's master: %v", ErrUnavailable, err)
		}
		p.tenureRecorded = true
	}
	if p.carrying {
		return w.carryOver(p, epoch)
	}
	return nil
}

// StartTenure starts this node's tenure of a partition at epoch, as its
// first write would, if the tenure has documents to carry: documents
// stored beyond where this node's copy is complete, or a carry of this
// tenure not finished yet. They are carried into the tenure now (see
// carryOver) and handed to replication, so that the replicas get them
// whether or not anyone writes to the partition. A tenure with nothing to
// carry is left to its first write: nothing is stored, and nothing is
// queued on the partition's writer. It returns ErrNotMaster when this node
// does not hold the lease at epoch; a carry that failed is resumed by the
// next call or the next write.
func (w *Writer) StartTenure(ctx context.Context, partition int, epoch uint64) error {
	p := w.parts[partition]
	p.mu.Lock()
	// Nothing to carry, as startTenure would find. (Nothing else stores
	// documents while this node holds the lease.)
	idle := p.loaded && !p.unsure && !p.toCarry(epoch)
	p.mu.Unlock()
	if idle {
		return nil
	}
	t := &tenureStart{epoch: epoch}
	if err := w.submit(ctx, p, &request{tenure: t, done: make(chan struct{})}); err != nil {
		return err
	}
	return t.err
}

// startTenure runs StartTenure on the partition's goroutine.
func (w *Writer) startTenure(p *partition, epoch uint64) error {
	if err := w.load(p); err != nil {
		return err
	}
	e, err := w.leaseEpoch(p)
	if err != nil {
		return err
	}
	if e != epoch {
		return fmt.Errorf("%w: the lease is at epoch %d, not %d", ErrNotMaster, e, epoch)
	}
	p.mu.Lock()
	carry := p.toCarry(epoch)
	p.mu.Unlock()
	if !carry {
		return nil // left to the first write
	}
	return w.beginTenure(p, epoch)
}

// toCarry reports whether this node's tenure at epoch has documents to
// carry into it: a carry of it not finished, or, the tenure not started
// yet, documents stored beyond where this copy is complete (none from a
// copy being replaced by a full copy). Call it with p.mu held.
func (p *partition) toCarry(epoch uint64) bool {
	if p.startEpoch == epoch {
		return p.carrying
	}
	return p.last.Compare(p.held()) > 0 && !p.recopy
}

// carryPage bounds the documents carryOver reads and writes at a time:
// on the embedded store a replace costs a scan (restoreChunk is as small
// for the same reason).
var carryPage = 50

// carried records that the current tenure's carry is finished.
func (w *Writer) carried(p *partition) error {
	if !p.carrying {
		return nil
	}
	p.mu.Lock()
	p.carrying = false
	p.mu.Unlock()
	w.setRecord(p.record(p.applied, p.horizon))
	if err := w.SyncApplied(w.ctx); err != nil {
		return fmt.Errorf("%w: recording that the documents held beyond the tenure's start were carried into it: %v", ErrUnavailable, err)
	}
	return nil
}

// carryOver writes again, at positions of the tenure epoch that has just
// begun, every document this node holds from an older epoch after the
// tenure's start, with its content and version, and hands them to
// replication like any write. A tenure starts where this node's copy is
// complete, but a catch-up or full copy cut short stores documents out of
// order beyond that (and a replica killed before its record was saved
// holds documents beyond its recorded position): left at their positions,
// they are in no history the partition's chain describes, so a replica
// whose copy is already past those positions is never sent them, and one
// holding them at the same positions would roll them back and be
// restored them again and again. This node holds them: they are its
// master's copy now, and they join its history first.
func (w *Writer) carryOver(p *partition, epoch uint64) error {
	if p.recopy {
		// A copy being replaced by a full copy holds documents of no one
		// history: nothing of it is carried.
		return nil
	}
	for {
		if p.last.Compare(p.startPos) <= 0 {
			return w.carried(p)
		}
		held, err := w.store.ScanAfter(w.ctx, p.id, p.startPos, carryPage)
		if err != nil {
			return fmt.Errorf("%w: reading the documents held beyond the tenure's start %s: %v", ErrUnavailable, p.startPos, err)
		}
		from := p.last
		if from.Epoch < epoch {
			// Nothing of the tenure is stored yet: the run is every
			// change after its start (and after the horizon: deletes up
			// to it are purged), which a replica complete up to there can
			// apply.
			from = maxPosition(p.startPos, p.horizon)
		}
		pos := p.last
		pos.Epoch = epoch
		var writes []write
		for _, d := range held {
			if d.Pos.Epoch >= epoch {
				break // the tenure's own writes come after every older one
			}
			c := *d
			pos.Seq++
			c.Pos = pos
			writes = append(writes, write{doc: &c})
		}
		if len(writes) == 0 {
			return w.carried(p)
		}
		p.stage(pos)
		p.commits.Add(1)
		err = w.store.commit(w.ctx, p.id, writes)
		for _, wr := range writes {
			if err != nil {
				w.cache.forget(p.id, wr.doc.Key)
			} else {
				w.cache.put(p.id, wr.doc.Key, wr.doc)
			}
		}
		p.commits.Add(1)
		// Positions handed out are never reused, stored or not.
		p.mu.Lock()
		p.last = pos
		p.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%w: carrying %d documents held beyond the tenure's start into it: %v", ErrUnavailable, len(writes), err)
		}
		if w.opts.Lease != nil {
			if e, ok := w.opts.Lease(p.id); !ok || e != epoch {
				// Stored: replication catches replicas up from the store.
				return ErrNotMaster
			}
		}
		w.log.Info("carried documents held beyond the start of this node's tenure into it", "partition", p.id, "epoch", epoch,
			"documents", len(writes), "start", p.startPos, "first", writes[0].doc.Pos)
		if w.opts.OnCommitted != nil {
			docs := make([]*Doc, len(writes))
			for i, wr := range writes {
				docs[i] = wr.doc
			}
			w.opts.OnCommitted(Batch{Partition: p.id, Epoch: epoch, From: from, UpTo: pos, Docs: docs})
		}
	}
}

// load reads the partition's newest position on first use, and again
// after an apply failed part way (partition.unsure).
func (w *Writer) load(p *partition) error {
	if p.loaded && !p.unsure {
		return nil
	}
	last, err := w.store.LastPosition(w.ctx, p.id)
	if err != nil {
		return err
	}
	if p.loaded {
		// What the failed apply stored is in the store's newest position:
		// a tenure carries it (toCarry), and a run's documents above it
		// are new here again (newHere).
		p.mu.Lock()
		p.last, p.unsure = maxPosition(p.last, last), false
		p.mu.Unlock()
		return nil
	}
	rec, err := w.recordOf(p.id)
	if err != nil {
		return err
	}
	p.setLoaded(last, rec)
	return nil
}

// setLoaded records what the store says of the partition. The history
// ends at the newest stored position or at the horizon, whichever is
// later: a purged tombstone may have been the newest change, and its
// position must never be handed out again.
func (p *partition) setLoaded(last Position, rec appliedDoc) {
	horizon := Position{Epoch: rec.HorizonEpoch, Seq: rec.HorizonSeq}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = maxPosition(last, horizon)
	p.applied = Position{Epoch: rec.Epoch, Seq: rec.Seq}
	p.epochSeen, p.horizon, p.recopy, p.restoring, p.loaded = rec.Seen, horizon, rec.Recopy, rec.Restoring, true
	p.startEpoch, p.startPos = rec.TenureEpoch, Position{Epoch: rec.TenureFrom, Seq: rec.TenureSeq}
	p.tenureRecorded = rec.TenureEpoch != 0
	p.chain, p.carrying = rec.Chain, rec.Carrying
	if len(p.chain) == 0 && rec.TenureEpoch != 0 {
		// Recorded before chains existed: its own tenure is all it knows.
		p.chain = []EpochStart{{Epoch: rec.TenureEpoch, Start: p.startPos}}
	}
}

func maxPosition(a, b Position) Position {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

// current is the state of key before this batch, as the writer sees it.
func (w *Writer) current(p *partition, key string, fresh bool) (*Doc, error) {
	if fresh {
		return nil, nil
	}
	if d, ok := w.cache.get(p.id, key); ok {
		return d, nil
	}
	d, err := w.store.Get(w.ctx, p.id, key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return d, err
}

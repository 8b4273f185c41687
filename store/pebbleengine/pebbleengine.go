// Package pebbleengine is a storage engine (store/engine) on Pebble, an
// LSM key-value store in pure Go: one directory, no server, every access
// path a point lookup or a range of keys in order.
//
// Key layout (integers big-endian, so byte order is numeric order; part is
// the partition, 4 bytes):
//
//	'd' part key                -> the state of key: header and body (encodeState)
//	'p' part epoch seq          -> key: the position index, one entry per key
//	't' part updated key        -> epoch seq: the tombstones, by time written
//	'c' part user 0x00 coll     -> the live documents of a collection (8 bytes)
//	'r' part                    -> the partition's record (JSON)
//	'b' at id / 'B' id          -> a rolled back state (JSON) / at, to find it by id
//	'v', 'V', 'l', 'm'          -> lease votes, voter set, tenure lists, meta (JSON)
//
// A commit replaces a key's state, and its entries in the position and
// tombstone indexes and its collection's count, in one batch: the indexes
// and counts never disagree with the states. Writes to one partition come
// from one goroutine at a time (engine.Documents), so reading a key's old
// state before the batch is safe; records are saved by one caller at a
// time (engine.Records).
package pebbleengine

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/record/bodycodec"
	"github.com/shoal-db/shoal/store/engine"
)

// Engine is a Pebble database holding one node's documents and records.
// Every call holds mu for reading; Close takes it for writing, so that no
// call meets a closed database (Pebble panics on one): a call after Close
// answers ErrUnavailable.
type Engine struct {
	db *pebble.DB

	mu     sync.RWMutex
	closed bool

	// counts holds the collection counts the engine last committed (by
	// count key), so that a commit need not read them back: each is
	// changed only by commits to its partition, one at a time. Bounded by
	// maxCachedCounts; a key missing is read from the database.
	countsMu sync.Mutex
	counts   map[string]int64

	// lookups counts the states read to maintain the indexes and counts
	// (Lookups).
	lookups atomic.Int64
}

// maxCachedCounts bounds Engine.counts: past it the map starts over.
const maxCachedCounts = 1 << 16

// errClosed: the engine was closed.
var errClosed = fmt.Errorf("%w: the pebble store is closed", engine.ErrUnavailable)

// enter takes mu for a call, or answers errClosed.
func (e *Engine) enter() error {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return errClosed
	}
	return nil
}

var (
	_ engine.Documents = (*Engine)(nil)
	_ engine.Records   = (*Engine)(nil)
	_ engine.Deferring = (*Engine)(nil)
)

// Options says where and how to open an engine.
type Options struct {
	// Dir holds the database (created if missing).
	Dir string
	// CacheBytes is the block cache (default 64 MiB).
	CacheBytes int64
	// Logger receives Pebble's errors (background compactions, a full
	// disk); nil: slog.Default().
	Logger *slog.Logger
	// FS is the file system the database lives in; nil: the disk. Tests
	// give one that can crash (vfs.NewCrashableMem).
	FS vfs.FS
}

// Open opens (or creates) the engine in o.Dir.
func Open(o Options) (*Engine, error) {
	if o.CacheBytes <= 0 {
		o.CacheBytes = 64 << 20
	}
	cache := pebble.NewCache(o.CacheBytes)
	defer cache.Unref()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	opts := pebbleOptions(cache, o.Logger)
	if o.FS != nil {
		opts.FS = o.FS
	}
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the pebble store in %s: %v", engine.ErrUnavailable, o.Dir, err)
	}
	return &Engine{db: db, counts: map[string]int64{}}, nil
}

// memTableBytes is the size Pebble's memtables grow to (its default is 4
// MiB). Under writes from many partitions the default flushed a table to
// L0 every second or so, each one more table for every lookup to rule out
// and more compaction; 32 MiB took 9% off the nodes' CPU per `majority`
// write (docs/benchmarks.md, fourteenth session). Pebble grows each new
// memtable from a small one up to this size, and keeps at most two full
// ones before it stalls writes: up to 64 MiB of memory per node, and up to
// as much log to replay after a crash.
const memTableBytes = 32 << 20

// pebbleOptions are Pebble's defaults with larger memtables
// (memTableBytes) and a Bloom filter in every table, which Pebble leaves
// out by default. Every write looks up the document it replaces (or
// finds there is none: every insert of a new document, on the master and
// on each replica), and without a filter that lookup searches every
// table of L0 and one of each level below;
// with one, a table whose filter rules the key out is not read. Ten bits
// per key rule out about 99% of the tables that lack it. Tables written
// before a filter was configured are read as they are, without one,
// until a compaction rewrites them.
func pebbleOptions(cache *pebble.Cache, logger *slog.Logger) *pebble.Options {
	o := &pebble.Options{Cache: cache, Logger: errorLogger{logger}, MemTableSize: memTableBytes}
	for i := range o.Levels {
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return o
}

// Lookups is how many document states and collection counts the engine
// has read to keep its indexes and counts since it opened: what a write
// costs beyond storing itself (tests measure it).
func (e *Engine) Lookups() int64 { return e.lookups.Load() }

// Close closes the database once the calls under way have returned.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.db.Close()
}

// errorLogger drops Pebble's informational logs and passes its errors on.
type errorLogger struct{ log *slog.Logger }

func (errorLogger) Infof(string, ...any) {}
func (l errorLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (errorLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// Key construction.

func prefix(kind byte, partition int) []byte {
	return binary.BigEndian.AppendUint32([]byte{kind}, uint32(partition))
}

func docKey(partition int, key string) []byte { return append(prefix('d', partition), key...) }

func posKey(partition int, p record.Position) []byte {
	k := binary.BigEndian.AppendUint64(prefix('p', partition), p.Epoch)
	return binary.BigEndian.AppendUint64(k, p.Seq)
}

// tombKey is a tombstone's index entry. Its time is in milliseconds from
// 1970, a time before 1970 written as 1970 (as an unsigned count it
// would sort after every other and never be due; MongoDB's date order
// has it due, and so does this).
func tombKey(partition int, updated time.Time, key string) []byte {
	k := binary.BigEndian.AppendUint64(prefix('t', partition), uint64(max(updated.UnixMilli(), 0)))
	return append(k, key...)
}

func countKey(partition int, user, coll string) []byte {
	k := append(prefix('c', partition), user...)
	return append(append(k, 0), coll...)
}

// upper is the first key after every key that starts with p.
func upper(p []byte) []byte {
	out := bytes.Clone(p)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] < 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

// A state's value: version(8) epoch(8) seq(8) updated(8, ms) deleted(1),
// then the body (none for a tombstone).
const header = 33

func encodeState(d *record.Doc) ([]byte, error) {
	v := make([]byte, header, header+64)
	binary.BigEndian.PutUint64(v[0:], uint64(d.Version))
	binary.BigEndian.PutUint64(v[8:], d.Pos.Epoch)
	binary.BigEndian.PutUint64(v[16:], d.Pos.Seq)
	binary.BigEndian.PutUint64(v[24:], uint64(d.Updated.UnixMilli()))
	if d.Deleted {
		v[32] = 1
		return v, nil
	}
	return bodycodec.Append(v, d.Body)
}

// decodeState reads the state of key; with bodies false it leaves the
// body out (and the user, collection and id, which the key holds).
func decodeState(key string, v []byte, bodies bool) (*record.Doc, error) {
	if len(v) < header {
		return nil, fmt.Errorf("pebble engine: the state of %s is %d bytes", key, len(v))
	}
	d := &record.Doc{Key: key, Version: int64(binary.BigEndian.Uint64(v[0:])),
		Pos:     record.Position{Epoch: binary.BigEndian.Uint64(v[8:]), Seq: binary.BigEndian.Uint64(v[16:])},
		Updated: time.UnixMilli(int64(binary.BigEndian.Uint64(v[24:]))).UTC(), Deleted: v[32] == 1, Size: len(key) + len(v)}
	if !bodies {
		return d, nil
	}
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("pebble engine: stored key %q is not user/collection/id", key)
	}
	d.User, d.Coll, d.ID = parts[0], parts[1], parts[2]
	if !d.Deleted {
		body, err := bodycodec.Decode(v[header:])
		if err != nil {
			return nil, fmt.Errorf("pebble engine: the stored state of %s: %w", key, err)
		}
		d.Body = body
	}
	return d, nil
}

// unavailable wraps a Pebble failure.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: %s: %v", engine.ErrUnavailable, what, err)
}

func (e *Engine) doGet(_ context.Context, partition int, key string) (*record.Doc, error) {
	return getOn(e.db, partition, key)
}

// getOn reads the state of key from r: the database, or a snapshot of it.
func getOn(r pebble.Reader, partition int, key string) (*record.Doc, error) {
	v, closer, err := r.Get(docKey(partition, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, record.ErrNotFound
	}
	if err != nil {
		return nil, unavailable("reading "+key, err)
	}
	defer closer.Close()
	return decodeState(key, v, true)
}

// old is what a batch knows of a key's state before its change: read from
// the database once, then as the batch left it.
type old struct {
	held    bool
	pos     record.Position
	updated time.Time
	deleted bool
}

// batch is one atomic write to a partition, with the states it has set so
// far (a key written twice in one commit).
type batch struct {
	e         *Engine
	partition int
	b         *pebble.Batch
	seen      map[string]old
	counts    map[string]int64 // collection count key -> change
}

func (e *Engine) newBatch(partition int) *batch {
	return &batch{e: e, partition: partition, b: e.db.NewBatch(), seen: map[string]old{}, counts: map[string]int64{}}
}

// before is key's state before this change, read from the database the
// first time the batch asks (a replica's insert asks twice: whether the key
// is held, then to replace it) and kept.
func (b *batch) before(key string) (old, error) {
	if o, ok := b.seen[key]; ok {
		return o, nil
	}
	o, err := b.read(key)
	if err != nil {
		return old{}, err
	}
	b.seen[key] = o
	return o, nil
}

// read is key's state in the database.
func (b *batch) read(key string) (old, error) {
	b.e.lookups.Add(1)
	v, closer, err := b.e.db.Get(docKey(b.partition, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return old{}, nil
	}
	if err != nil {
		return old{}, unavailable("reading "+key, err)
	}
	defer closer.Close()
	d, err := decodeState(key, v, false)
	if err != nil {
		return old{}, err
	}
	return old{held: true, pos: d.Pos, updated: d.Updated, deleted: d.Deleted}, nil
}

// absent notes that key holds no state before this batch, as the caller
// knows (engine.Write.Insert), so no lookup is made for it.
func (b *batch) absent(key string) {
	if _, ok := b.seen[key]; !ok {
		b.seen[key] = old{}
	}
}

// drop removes key's old state from the indexes and counts.
func (b *batch) drop(key string, o old) error {
	if !o.held {
		return nil
	}
	if err := b.b.Delete(posKey(b.partition, o.pos), nil); err != nil {
		return err
	}
	if o.deleted {
		return b.b.Delete(tombKey(b.partition, o.updated, key), nil)
	}
	user, coll, _ := splitKey(key)
	b.counts[string(countKey(b.partition, user, coll))]--
	return nil
}

// put sets d as its key's state.
func (b *batch) put(d *record.Doc) error {
	o, err := b.before(d.Key)
	if err != nil {
		return err
	}
	if err := b.drop(d.Key, o); err != nil {
		return err
	}
	v, err := encodeState(d)
	if err != nil {
		return err
	}
	if err := b.b.Set(docKey(b.partition, d.Key), v, nil); err != nil {
		return err
	}
	if err := b.b.Set(posKey(b.partition, d.Pos), []byte(d.Key), nil); err != nil {
		return err
	}
	if d.Deleted {
		pos := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, d.Pos.Epoch), d.Pos.Seq)
		if err := b.b.Set(tombKey(b.partition, d.Updated, d.Key), pos, nil); err != nil {
			return err
		}
	} else {
		// Counted by the key, as drop uncounts it.
		user, coll, _ := splitKey(d.Key)
		b.counts[string(countKey(b.partition, user, coll))]++
	}
	b.seen[d.Key] = old{held: true, pos: d.Pos, updated: d.Updated.Truncate(time.Millisecond), deleted: d.Deleted}
	return nil
}

// remove deletes key's state.
func (b *batch) remove(key string) error {
	o, err := b.before(key)
	if err != nil || !o.held {
		return err
	}
	if err := b.drop(key, o); err != nil {
		return err
	}
	b.seen[key] = old{}
	return b.b.Delete(docKey(b.partition, key), nil)
}

// commit applies the counts' changes and writes the batch: synced, or
// left in the log for the next synced write (engine.Deferring) when
// deferred.
func (b *batch) commit(what string, deferred bool) error {
	defer b.b.Close()
	var counts map[string]int64 // the counts this commit sets
	for k, change := range b.counts {
		if change == 0 {
			continue
		}
		n, err := b.e.count(k)
		if err != nil {
			return err
		}
		if n += change; n <= 0 {
			n = 0
			err = b.b.Delete([]byte(k), nil)
		} else {
			err = b.b.Set([]byte(k), binary.BigEndian.AppendUint64(nil, uint64(n)), nil)
		}
		if err != nil {
			return err
		}
		if counts == nil {
			counts = make(map[string]int64, len(b.counts))
		}
		counts[k] = n
	}
	opts := pebble.Sync
	if deferred {
		opts = pebble.NoSync
	}
	err := b.b.Commit(opts)
	if len(counts) > 0 {
		b.e.keepCounts(counts, err != nil)
	}
	if err != nil {
		return unavailable(what, err)
	}
	return nil
}

// keepCounts keeps the counts a commit set, or forgets them if it failed
// (stored or not: read again next time).
func (e *Engine) keepCounts(counts map[string]int64, failed bool) {
	e.countsMu.Lock()
	defer e.countsMu.Unlock()
	if len(e.counts)+len(counts) > maxCachedCounts {
		clear(e.counts)
	}
	for k, n := range counts {
		if failed {
			delete(e.counts, k)
		} else {
			e.counts[k] = n
		}
	}
}

// count is the live documents of the collection of count key k, as last
// committed.
func (e *Engine) count(k string) (int64, error) {
	e.countsMu.Lock()
	n, ok := e.counts[k]
	e.countsMu.Unlock()
	if ok {
		return n, nil
	}
	e.lookups.Add(1)
	return e.readCount([]byte(k))
}

// holds reports whether the database holds key.
func (e *Engine) holds(key []byte) (bool, error) {
	_, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, unavailable("reading", err)
	}
	return true, closer.Close()
}

// readCount reads a collection count from the database.
func (e *Engine) readCount(k []byte) (int64, error) {
	v, closer, err := e.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable("reading a collection count", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("pebble engine: a collection count is %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func splitKey(key string) (user, coll, id string) {
	parts := strings.SplitN(key, "/", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return parts[0], parts[1], parts[2]
}

func (e *Engine) doCommit(_ context.Context, partition int, writes []engine.Write, deferred bool) error {
	b := e.newBatch(partition)
	for _, w := range writes {
		if w.Insert {
			// The partition's writer found no state of the key (its
			// lookup, or its cache of what it committed): looking again
			// here was a second read of every new document on a master.
			b.absent(w.Doc.Key)
		}
		if err := b.put(w.Doc); err != nil {
			b.b.Close()
			return err
		}
	}
	return b.commit(fmt.Sprintf("committing %d changes to partition %d", len(writes), partition), deferred)
}

func (e *Engine) doInsertNew(_ context.Context, partition int, writes []engine.Write, deferred bool) (map[string]bool, error) {
	b := e.newBatch(partition)
	held := map[string]bool{}
	for _, w := range writes {
		d := w.Doc
		if w.Insert {
			b.absent(d.Key) // the caller knows it is new here
		}
		o, err := b.before(d.Key)
		if err != nil {
			b.b.Close()
			return nil, err
		}
		if o.held {
			held[d.Key] = true
			continue
		}
		if err := b.put(d); err != nil {
			b.b.Close()
			return nil, err
		}
	}
	return held, b.commit(fmt.Sprintf("inserting %d documents", len(writes)), deferred)
}

func (e *Engine) doRemove(_ context.Context, partition int, keys []string) error {
	b := e.newBatch(partition)
	for _, k := range keys {
		if err := b.remove(k); err != nil {
			b.b.Close()
			return err
		}
	}
	return b.commit(fmt.Sprintf("removing %d documents", len(keys)), false)
}

// iterate calls fn with each key and value from lower up to (not
// including) upper, in order, or in reverse; fn returns false to stop.
func (e *Engine) iterate(lower, upperBound []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return iterateOn(e.db, lower, upperBound, reverse, fn)
}

// iterateOn is iterate over r: the database, or a snapshot of it.
func iterateOn(r pebble.Reader, lower, upperBound []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upperBound})
	if err != nil {
		return unavailable("reading", err)
	}
	defer it.Close()
	valid := it.First()
	next := it.Next
	if reverse {
		valid, next = it.Last(), it.Prev
	}
	for ; valid; valid = next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return unavailable("reading", err)
		}
		goOn, err := fn(it.Key(), v)
		if err != nil || !goOn {
			return err
		}
	}
	return it.Error()
}

func (e *Engine) doLast(_ context.Context, partition int) (record.Position, error) {
	var last record.Position
	p := prefix('p', partition)
	err := e.iterate(p, upper(p), true, func(k, _ []byte) (bool, error) {
		last = positionOf(k[len(p):])
		return false, nil
	})
	return last, err
}

func positionOf(b []byte) record.Position {
	return record.Position{Epoch: binary.BigEndian.Uint64(b), Seq: binary.BigEndian.Uint64(b[8:])}
}

// afterPosition is the first position index key after pos.
func afterPosition(partition int, pos record.Position) []byte {
	if pos.Seq == ^uint64(0) {
		return posKey(partition, record.Position{Epoch: pos.Epoch + 1})
	}
	return posKey(partition, record.Position{Epoch: pos.Epoch, Seq: pos.Seq + 1})
}

// afterIndexScan, when set (tests), runs between ScanAfter's walk of the
// position index and its reads of the states.
var afterIndexScan func()

func (e *Engine) doScanAfter(_ context.Context, partition int, after record.Position, limit int) ([]*record.Doc, error) {
	// One snapshot for the index and the states: a key the writer moves to
	// a later position meanwhile must not come back at that position (a
	// catch-up continues after the last position it was sent, and would
	// skip everything between).
	snap := e.db.NewSnapshot()
	defer snap.Close()
	var keys []string
	p := prefix('p', partition)
	err := iterateOn(snap, afterPosition(partition, after), upper(p), false, func(_, v []byte) (bool, error) {
		keys = append(keys, string(v))
		return limit <= 0 || len(keys) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	if afterIndexScan != nil {
		afterIndexScan()
	}
	out := make([]*record.Doc, 0, len(keys))
	for _, k := range keys {
		d, err := getOn(snap, partition, k)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (e *Engine) doCountAfter(_ context.Context, partition int, after record.Position) (int64, error) {
	var n int64
	p := prefix('p', partition)
	err := e.iterate(afterPosition(partition, after), upper(p), false, func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// states reads the states with a key in (after, upTo] ("": unbounded), in
// key order, up to limit (0: all).
func (e *Engine) states(partition int, after, upTo string, limit int, bodies bool) ([]*record.Doc, error) {
	p := prefix('d', partition)
	lower := p
	if after != "" {
		lower = append(docKey(partition, after), 0)
	}
	up := upper(p)
	if upTo != "" {
		up = append(docKey(partition, upTo), 0)
	}
	var out []*record.Doc
	err := e.iterate(lower, up, false, func(k, v []byte) (bool, error) {
		d, err := decodeState(string(k[len(p):]), v, bodies)
		if err != nil {
			return false, err
		}
		out = append(out, d)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

func (e *Engine) doScanKeys(_ context.Context, partition int, afterKey string, limit int) ([]*record.Doc, error) {
	return e.states(partition, afterKey, "", limit, true)
}

func (e *Engine) doKeyRange(_ context.Context, partition int, after, upTo string) ([]*record.Doc, error) {
	return e.states(partition, after, upTo, 0, false)
}

func (e *Engine) doEach(ctx context.Context, partition int, scope engine.Scope, fn func(*record.Doc) error) error {
	p := docKey(partition, scope.User+"/")
	from := p
	if scope.Coll != "" {
		p = docKey(partition, scope.User+"/"+scope.Coll+"/")
		from = p
		if scope.AfterID != "" {
			from = append(append(bytes.Clone(p), scope.AfterID...), 0) // the first key after it
		}
	}
	d := prefix('d', partition)
	var fnErr error
	err := e.iterate(from, upper(p), false, func(k, v []byte) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if len(v) >= header && v[32] == 1 {
			return true, nil // a tombstone
		}
		doc, err := decodeState(string(k[len(d):]), v, true)
		if err != nil {
			return false, err
		}
		fnErr = fn(doc)
		return fnErr == nil, nil
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

func (e *Engine) doCollections(_ context.Context, partition int, user string) ([]engine.CollectionCount, error) {
	p := countKey(partition, user, "")
	out := []engine.CollectionCount{}
	err := e.iterate(p, upper(p), false, func(k, v []byte) (bool, error) {
		if len(v) != 8 {
			return false, fmt.Errorf("pebble engine: a collection count is %d bytes", len(v))
		}
		out = append(out, engine.CollectionCount{Name: string(k[len(p):]), Count: int64(binary.BigEndian.Uint64(v))})
		return true, nil
	})
	return out, err
}

func (e *Engine) doTombstones(_ context.Context, partition int, from, before time.Time, limit int) ([]*record.Doc, error) {
	p := prefix('t', partition)
	// The index is in time order: the range runs from from to before,
	// bounded as tombKey writes the times.
	start, end := p, upper(p)
	if !from.IsZero() {
		start = tombKey(partition, from, "")
	}
	if !before.IsZero() {
		end = tombKey(partition, before, "")
	}
	var out []*record.Doc
	err := e.iterate(start, end, false, func(k, v []byte) (bool, error) {
		if len(k) < len(p)+8 || len(v) != 16 {
			return false, errors.New("pebble engine: a tombstone index entry is corrupt")
		}
		out = append(out, &record.Doc{Key: string(k[len(p)+8:]), Deleted: true, Pos: positionOf(v),
			Updated: time.UnixMilli(int64(binary.BigEndian.Uint64(k[len(p):]))).UTC()})
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

func (e *Engine) doPurgeTombstones(_ context.Context, partition int, tombs []*record.Doc) (int, error) {
	b := e.newBatch(partition)
	removed := 0
	for _, t := range tombs {
		o, err := b.before(t.Key)
		if err == nil {
			switch {
			case o.held && o.deleted && o.pos == t.Pos: // the tombstone itself
				err = b.remove(t.Key)
				removed++
			case o.held && o.deleted && max(o.updated.UnixMilli(), 0) == t.Updated.UnixMilli(): // as tombKey writes it
				// The key's later tombstone, whose index entry this is.
			default:
				// A key written again since keeps its state. An index entry
				// its state does not account for (no write leaves one; an
				// older version's bug could) is removed, or every purge
				// would read it again.
				var left bool
				entry := tombKey(partition, t.Updated, t.Key)
				if left, err = e.holds(entry); err == nil && left {
					err = b.b.Delete(entry, nil)
					removed++
				}
			}
		}
		if err != nil {
			b.b.Close()
			return 0, err
		}
	}
	return removed, b.commit(fmt.Sprintf("purging %d tombstones of partition %d", len(tombs), partition), false)
}

func (e *Engine) doPartitions(_ context.Context) (map[int]bool, error) {
	out := map[int]bool{}
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'d'}, UpperBound: []byte{'e'}})
	if err != nil {
		return nil, unavailable("listing partitions", err)
	}
	defer it.Close()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 5 {
			valid = it.Next()
			continue
		}
		p := int(binary.BigEndian.Uint32(k[1:5]))
		out[p] = true
		next := upper(prefix('d', p))
		if next == nil {
			break
		}
		valid = it.SeekGE(next)
	}
	if err := it.Error(); err != nil {
		return nil, unavailable("listing partitions", err)
	}
	return out, nil
}

// Records.

func (e *Engine) getJSON(key []byte, what string, into any) (bool, error) {
	v, closer, err := e.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, unavailable("reading "+what, err)
	}
	defer closer.Close()
	if err := json.Unmarshal(v, into); err != nil {
		return false, fmt.Errorf("pebble engine: %s is corrupt: %w", what, err)
	}
	return true, nil
}

func (e *Engine) setJSON(key []byte, what string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	// Always synced, whatever STORE_SYNC says: a voter that forgot a vote
	// after a power failure could grant a conflicting lease.
	if err := e.db.Set(key, raw, pebble.Sync); err != nil {
		return unavailable("recording "+what, err)
	}
	return nil
}

func (e *Engine) doLoadRecords(_ context.Context) (map[int]engine.PartitionRecord, error) {
	out := map[int]engine.PartitionRecord{}
	err := e.iterate([]byte{'r'}, []byte{'s'}, false, func(_, v []byte) (bool, error) {
		var r engine.PartitionRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return false, fmt.Errorf("pebble engine: a partition record is corrupt: %w", err)
		}
		out[r.Partition] = r
		return true, nil
	})
	return out, err
}

func (e *Engine) doSaveRecords(_ context.Context, changed []engine.PartitionRecord, _ func() []engine.PartitionRecord) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, r := range changed {
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := b.Set(prefix('r', r.Partition), raw, nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return unavailable("recording the applied positions", err)
	}
	return nil
}

func (e *Engine) doLeaseVotes(_ context.Context) (map[int]record.LeaseVote, error) {
	var votes []record.LeaseVote
	_, err := e.getJSON([]byte{'v'}, "the lease votes", &votes)
	out := make(map[int]record.LeaseVote, len(votes))
	for _, v := range votes {
		out[v.Partition] = v
	}
	return out, err
}

func (e *Engine) doSaveLeaseVotes(_ context.Context, votes map[int]record.LeaseVote) error {
	list := make([]record.LeaseVote, 0, len(votes))
	for _, v := range votes {
		list = append(list, v)
	}
	slices.SortFunc(list, func(a, b record.LeaseVote) int { return a.Partition - b.Partition })
	return e.setJSON([]byte{'v'}, "the lease votes", list)
}

type voterSet struct {
	Voters  []string  `json:"voters"`
	Changed time.Time `json:"changed"`
}

func (e *Engine) doVoterSet(_ context.Context) ([]string, time.Time, error) {
	var vs voterSet
	_, err := e.getJSON([]byte{'V'}, "the voter set", &vs)
	return vs.Voters, vs.Changed, err
}

func (e *Engine) doSaveVoterSet(_ context.Context, voters []string, changed time.Time) error {
	return e.setJSON([]byte{'V'}, "the voter set", voterSet{Voters: voters, Changed: changed.UTC()})
}

type tenureList struct {
	Partition int      `json:"p"`
	Epoch     uint64   `json:"e"`
	Replicas  []string `json:"r"`
	Seq       uint64   `json:"s,omitempty"`
	Counted   int      `json:"n,omitempty"`
}

func (e *Engine) doTenureLists(_ context.Context) (map[int]engine.TenureList, error) {
	var lists []tenureList
	_, err := e.getJSON([]byte{'l'}, "the replica lists of this node's tenures", &lists)
	out := make(map[int]engine.TenureList, len(lists))
	for _, l := range lists {
		out[l.Partition] = engine.TenureList{Epoch: l.Epoch, Replicas: l.Replicas, Seq: l.Seq, Counted: l.Counted}
	}
	return out, err
}

func (e *Engine) doSaveTenureLists(_ context.Context, lists map[int]engine.TenureList) error {
	out := make([]tenureList, 0, len(lists))
	for p, l := range lists {
		out = append(out, tenureList{Partition: p, Epoch: l.Epoch, Replicas: l.Replicas, Seq: l.Seq, Counted: l.Counted})
	}
	slices.SortFunc(out, func(a, b tenureList) int { return a.Partition - b.Partition })
	return e.setJSON([]byte{'l'}, "the replica lists of this node's tenures", out)
}

func (e *Engine) doMeta(_ context.Context) (engine.Meta, bool, error) {
	var m engine.Meta
	ok, err := e.getJSON([]byte{'m'}, "the meta", &m)
	return m, ok, err
}

func (e *Engine) doCreateMeta(ctx context.Context, m engine.Meta) (bool, error) {
	if _, ok, err := e.doMeta(ctx); err != nil || ok {
		return false, err
	}
	return true, e.setJSON([]byte{'m'}, "the meta", m)
}

// storedRollback is a rolled back state as stored: the body encoded like
// a document's, so that its numbers keep their types.
type storedRollback struct {
	engine.RolledBack
	Body []byte `json:"body,omitempty"`
}

func rollbackID(r engine.RolledBack) string {
	return record.DocKey(r.User, r.Coll, r.ID) + "@" + r.Position.String()
}

func (e *Engine) doSaveRollback(_ context.Context, states []engine.RolledBack) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, r := range states {
		id := rollbackID(r)
		byID := append([]byte{'B'}, id...)
		if _, closer, err := e.db.Get(byID); err == nil {
			closer.Close()
			continue // kept already
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return unavailable("reading the rollback records", err)
		}
		s := storedRollback{RolledBack: r}
		if r.Body != nil {
			var err error
			if s.Body, err = bodycodec.Append(nil, r.Body); err != nil {
				return err
			}
		}
		s.RolledBack.Body = nil
		raw, err := json.Marshal(s)
		if err != nil {
			return err
		}
		at := binary.BigEndian.AppendUint64([]byte{'b'}, uint64(r.At.UnixNano()))
		if err := b.Set(append(at, id...), raw, nil); err != nil {
			return err
		}
		if err := b.Set(byID, at[1:], nil); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return unavailable(fmt.Sprintf("keeping %d rolled back documents", len(states)), err)
	}
	return nil
}

func (e *Engine) doRollbacks(_ context.Context, limit int) ([]engine.RolledBack, error) {
	var out []engine.RolledBack
	err := e.iterate([]byte{'b'}, []byte{'c'}, false, func(_, v []byte) (bool, error) {
		var s storedRollback
		if err := json.Unmarshal(v, &s); err != nil {
			return false, fmt.Errorf("pebble engine: a rollback record is corrupt: %w", err)
		}
		r := s.RolledBack
		if s.Body != nil {
			body, err := bodycodec.Decode(s.Body)
			if err != nil {
				return false, fmt.Errorf("pebble engine: a rollback record: %w", err)
			}
			r.Body = body
		}
		out = append(out, r)
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// The calls, each under mu (enter).

// Get reads the state of key.
func (e *Engine) Get(ctx context.Context, partition int, key string) (*record.Doc, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doGet(ctx, partition, key)
}

// Commit stores the states in order, in one batch.
func (e *Engine) Commit(ctx context.Context, partition int, writes []engine.Write) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doCommit(ctx, partition, writes, false)
}

// CommitDeferred is Commit without waiting for the disk
// (engine.Deferring).
func (e *Engine) CommitDeferred(ctx context.Context, partition int, writes []engine.Write) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doCommit(ctx, partition, writes, true)
}

// InsertNew stores the states of keys it holds no record of.
func (e *Engine) InsertNew(ctx context.Context, partition int, docs []*record.Doc) (map[string]bool, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	writes := make([]engine.Write, len(docs))
	for i, d := range docs {
		writes[i] = engine.Write{Doc: d}
	}
	return e.doInsertNew(ctx, partition, writes, false)
}

// Sync makes the deferred changes before it durable (engine.Deferring):
// a record of the log alone, written synced (Pebble skips a batch that
// holds nothing, so an empty one would sync nothing).
func (e *Engine) Sync(context.Context) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	if err := e.db.LogData([]byte("sync"), pebble.Sync); err != nil {
		return unavailable("syncing the log", err)
	}
	return nil
}

// InsertNewDeferred is InsertNew without waiting for the disk, and
// without a lookup of the keys of writes marked Insert
// (engine.Deferring).
func (e *Engine) InsertNewDeferred(ctx context.Context, partition int, writes []engine.Write) (map[string]bool, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doInsertNew(ctx, partition, writes, true)
}

// Remove deletes the states of keys.
func (e *Engine) Remove(ctx context.Context, partition int, keys []string) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doRemove(ctx, partition, keys)
}

// Last is the partition's newest position.
func (e *Engine) Last(ctx context.Context, partition int) (record.Position, error) {
	if err := e.enter(); err != nil {
		return record.Position{}, err
	}
	defer e.mu.RUnlock()
	return e.doLast(ctx, partition)
}

// ScanAfter returns up to limit states after a position, in position order.
func (e *Engine) ScanAfter(ctx context.Context, partition int, after record.Position, limit int) ([]*record.Doc, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doScanAfter(ctx, partition, after, limit)
}

// CountAfter counts the states after a position.
func (e *Engine) CountAfter(ctx context.Context, partition int, after record.Position) (int64, error) {
	if err := e.enter(); err != nil {
		return 0, err
	}
	defer e.mu.RUnlock()
	return e.doCountAfter(ctx, partition, after)
}

// ScanKeys returns up to limit states after a key, in key order.
func (e *Engine) ScanKeys(ctx context.Context, partition int, afterKey string, limit int) ([]*record.Doc, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doScanKeys(ctx, partition, afterKey, limit)
}

// KeyRange returns the keys and positions in (after, upTo].
func (e *Engine) KeyRange(ctx context.Context, partition int, after string, upTo string) ([]*record.Doc, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doKeyRange(ctx, partition, after, upTo)
}

// Each calls fn with every live document of scope, in key order.
func (e *Engine) Each(ctx context.Context, partition int, scope engine.Scope, fn func(*record.Doc) error) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doEach(ctx, partition, scope, fn)
}

// Collections lists a user's collections with live documents, by name.
func (e *Engine) Collections(ctx context.Context, partition int, user string) ([]engine.CollectionCount, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doCollections(ctx, partition, user)
}

// Tombstones returns up to limit (0: all) of the partition's tombstones
// last changed at or after from and before before (the zero time:
// unbounded), oldest first.
func (e *Engine) Tombstones(ctx context.Context, partition int, from, before time.Time, limit int) ([]*record.Doc, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doTombstones(ctx, partition, from, before, limit)
}

// PurgeTombstones deletes the given tombstones of the keys whose state
// they still are, and index entries left without one.
func (e *Engine) PurgeTombstones(ctx context.Context, partition int, tombstones []*record.Doc) (int, error) {
	if err := e.enter(); err != nil {
		return 0, err
	}
	defer e.mu.RUnlock()
	return e.doPurgeTombstones(ctx, partition, tombstones)
}

// Partitions lists the partitions that hold a state.
func (e *Engine) Partitions(ctx context.Context) (map[int]bool, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doPartitions(ctx)
}

// LoadRecords reads every partition's record.
func (e *Engine) LoadRecords(ctx context.Context) (map[int]engine.PartitionRecord, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doLoadRecords(ctx)
}

// SaveRecords writes the changed records in one batch.
func (e *Engine) SaveRecords(ctx context.Context, changed []engine.PartitionRecord, a2 func() []engine.PartitionRecord) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doSaveRecords(ctx, changed, a2)
}

// LeaseVotes reads every vote recorded.
func (e *Engine) LeaseVotes(ctx context.Context) (map[int]record.LeaseVote, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doLeaseVotes(ctx)
}

// SaveLeaseVotes replaces the votes recorded.
func (e *Engine) SaveLeaseVotes(ctx context.Context, votes map[int]record.LeaseVote) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doSaveLeaseVotes(ctx, votes)
}

// VoterSet reads the voter set recorded last.
func (e *Engine) VoterSet(ctx context.Context) ([]string, time.Time, error) {
	if err := e.enter(); err != nil {
		return nil, time.Time{}, err
	}
	defer e.mu.RUnlock()
	return e.doVoterSet(ctx)
}

// SaveVoterSet replaces the voter set.
func (e *Engine) SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doSaveVoterSet(ctx, voters, changed)
}

// TenureLists reads the tenure lists recorded.
func (e *Engine) TenureLists(ctx context.Context) (map[int]engine.TenureList, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doTenureLists(ctx)
}

// SaveTenureLists replaces the tenure lists.
func (e *Engine) SaveTenureLists(ctx context.Context, lists map[int]engine.TenureList) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doSaveTenureLists(ctx, lists)
}

// Meta reads the meta.
func (e *Engine) Meta(ctx context.Context) (engine.Meta, bool, error) {
	if err := e.enter(); err != nil {
		return engine.Meta{}, false, err
	}
	defer e.mu.RUnlock()
	return e.doMeta(ctx)
}

// CreateMeta records m unless meta is recorded. The node calls it once, at
// start, before it serves anything.
func (e *Engine) CreateMeta(ctx context.Context, m engine.Meta) (bool, error) {
	if err := e.enter(); err != nil {
		return false, err
	}
	defer e.mu.RUnlock()
	return e.doCreateMeta(ctx, m)
}

// SaveRollback keeps rolled back states, once per key and position.
func (e *Engine) SaveRollback(ctx context.Context, states []engine.RolledBack) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	return e.doSaveRollback(ctx, states)
}

// Rollbacks lists the rolled back states, oldest first, at most limit.
func (e *Engine) Rollbacks(ctx context.Context, limit int) ([]engine.RolledBack, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.mu.RUnlock()
	return e.doRollbacks(ctx, limit)
}

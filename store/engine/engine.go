// Package engine is the boundary between the store's partition writers and
// the storage under them: what a storage engine must offer for a node's
// documents (Documents). The store (package store) keeps everything above
// it, the writers' goroutines, positions, cache and group commit, and
// calls an engine for every read and write of a document state.
//
// Two engines are planned (docs/storage-engine.md): MongoDB through its
// driver (package store's mongoEngine, run against a real MongoDB or the
// embedded FerretDB), and an embedded engine of Shoal's own. Each must
// pass the conformance suite in engine/enginetest; this package holds
// only the interface and its values, and imports nothing but record, so
// an engine and the suite build without any other.
package engine

import (
	"context"
	"errors"
	"time"

	"github.com/shoal-db/shoal/record"
)

// ErrUnavailable wraps every failure to reach the storage (the store's
// ErrUnavailable is this one): the node answers 503 and the caller may
// retry. A key the storage holds no record of is record.ErrNotFound.
var ErrUnavailable = errors.New("store unavailable")

// Write is one document state to commit. Insert says the engine is known
// to hold no record of the key (an insert may be cheaper than a replace);
// a retried commit may find it there and must replace it then. Engines
// rely on it: the embedded one does not look such a key up, so a write
// marked Insert over a stored state would leave that state's entries in
// its indexes. Only the partition's writer sets it: a master from what
// it read, a replica from what its master's write says (record.Doc.New,
// see store.Writer.applyRun).
type Write struct {
	Doc    *record.Doc
	Insert bool
}

// Deferring is an engine that can store a change without waiting for
// its disk: CommitDeferred and InsertNewDeferred store what Commit and
// InsertNew store, and reads see it at once, but it survives a crash (of
// the process or the machine) only once a later synced write of the same
// engine has returned: any Commit, InsertNew or Records write, since the
// engine writes one log, in order. So a crash keeps a prefix of the
// deferred changes, and all of those made before a synced write that
// returned.
//
// A replica applies its master's changes so (store.Writer.Apply) and
// answers the master only after its applied positions' synced write
// (store.Writer.SyncApplied): one sync per answer instead of two. An
// engine without it (the mongo engine) makes every change durable before
// it returns.
type Deferring interface {
	CommitDeferred(ctx context.Context, partition int, writes []Write) error
	// InsertNewDeferred is InsertNew of the writes' documents, except
	// that one marked Insert is stored without looking its key up (and
	// never reported held).
	InsertNewDeferred(ctx context.Context, partition int, writes []Write) (held map[string]bool, err error)
	// Sync makes every deferred change that returned before it durable,
	// when no other synced write is due (an engine may skip a write that
	// changes nothing, so that is no sync).
	Sync(ctx context.Context) error
}

// CollectionCount is one collection of a user and its live documents.
type CollectionCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Scope selects a user's live documents: of one collection (Coll set),
// or of all of them (Coll ""). With Coll set, AfterID ("": from the first)
// starts after that id: only documents whose id sorts after it, in byte
// order, are read.
type Scope struct {
	User, Coll string
	AfterID    string
}

// Documents is the storage of every partition's document states: one per
// key (user/collection/id, record.DocKey), a live document or the
// tombstone of a deleted one, each with the position of the change that
// made it. A partition's states are its history: its newest position is
// where the history ends.
//
// Writes to one partition come from one goroutine at a time (its writer);
// reads may run beside them. A write that returns an error may have
// stored some of its states: the caller writes them again (Commit
// replaces, InsertNew reports what it found).
type Documents interface {
	// Get reads the state of key: record.ErrNotFound when there is none.
	Get(ctx context.Context, partition int, key string) (*record.Doc, error)
	// Commit stores the states in order, durably before it returns: on
	// disk, synced, for an embedded engine (a commit left in the
	// process's buffers is lost by a kill -9; the fault suite lost
	// acknowledged writes so), or as the MongoDB acknowledges a write.
	Commit(ctx context.Context, partition int, writes []Write) error
	// InsertNew stores the states whose keys it holds no record of, and
	// returns the keys it already held (left untouched).
	InsertNew(ctx context.Context, partition int, docs []*record.Doc) (held map[string]bool, err error)
	// Remove deletes the records of keys (a replica dropping what its
	// master has no record of).
	Remove(ctx context.Context, partition int, keys []string) error
	// Last is the partition's newest position (zero when it holds
	// nothing).
	Last(ctx context.Context, partition int) (record.Position, error)
	// ScanAfter returns up to limit (0: all) states whose position is
	// after the given one, in position order: catch-up and the search of
	// a rollback.
	ScanAfter(ctx context.Context, partition int, after record.Position, limit int) ([]*record.Doc, error)
	// CountAfter counts the states whose position is after the given one.
	CountAfter(ctx context.Context, partition int, after record.Position) (int64, error)
	// ScanKeys returns up to limit (0: all) states with a key after the
	// given one ("": from the first), in key order: the chunks of a full
	// copy.
	ScanKeys(ctx context.Context, partition int, afterKey string, limit int) ([]*record.Doc, error)
	// KeyRange returns the keys and positions (no bodies) of the states
	// with a key in (after, upTo] ("": unbounded), in key order.
	KeyRange(ctx context.Context, partition int, after, upTo string) ([]*record.Doc, error)
	// Each calls fn with every live document of scope as it reads them,
	// so that the caller holds only what it keeps. A collection's (Coll
	// set) come in id order (byte order), so that a page sorted by _id
	// may stop at its limit; a user's (Coll "") in no particular order.
	// It stops at fn's first error and returns it as it is.
	Each(ctx context.Context, partition int, scope Scope, fn func(*record.Doc) error) error
	// Collections lists a user's collections that hold a live document,
	// with their counts, sorted by name.
	Collections(ctx context.Context, partition int, user string) ([]CollectionCount, error)
	// Tombstones returns up to limit (0: all) of the partition's
	// tombstones (keys, positions, times; no bodies) last changed at or
	// after from and before before, compared in whole milliseconds (the
	// zero time: unbounded), oldest first: an index range, so that a
	// purge reads what it removes and not the tombstones it keeps, and
	// each of its chunks starts where the last one ended.
	Tombstones(ctx context.Context, partition int, from, before time.Time, limit int) ([]*record.Doc, error)
	// PurgeTombstones deletes the given tombstones, as Tombstones returned
	// them, of those keys whose state they still are (a key written again
	// since keeps its state), and returns how many entries it removed (a
	// tombstone's index entry left behind by its key's later state counts:
	// it is removed too, so that it is not returned again).
	PurgeTombstones(ctx context.Context, partition int, tombstones []*record.Doc) (int, error)
	// Partitions lists the partitions that may hold a state (a partition
	// left out holds none).
	Partitions(ctx context.Context) (map[int]bool, error)
}

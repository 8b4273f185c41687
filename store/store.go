// Package store is a node's storage: the ordered per-partition writers
// that commit concurrent writes together, the document cache, a replica's
// side of replication (over replicate/applybatch), and the records a node
// keeps, all over a storage engine (store/engine): the embedded one
// (store/pebbleengine, in DATA_DIR/pebble) when no MONGO_URI is given, or
// MongoDB's driver (mongo*.go) on the MongoDB it names.
//
// Of this module it imports record (the values it keeps), store/engine,
// and the replica's apply rules and their driver (replicate/applyrule,
// replicate/applybatch), which it runs on a partition's writer goroutine.
// Atomicity never relies on the storage (the embedded one does not make
// conditional updates atomic): every change to a partition goes through
// that partition's single writer goroutine.
package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sync/semaphore"

	"github.com/shoal-db/shoal/store/engine"
	"github.com/shoal-db/shoal/store/pebbleengine"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Options says which storage to use.
type Options struct {
	// URI of a MongoDB; empty keeps the store in DataDir, on the embedded
	// engine (Pebble, store/pebbleengine).
	URI string
	// Database is the database name inside the MongoDB.
	Database string
	// DataDir holds the embedded engine's files (in DataDir/pebble).
	DataDir string
	// SyncNormal is the SQLite-era STORE_SYNC=normal. It has no effect on
	// the embedded engine now: every Pebble commit is synced before it is
	// answered, because an unsynced Pebble commit sits in the process's
	// own log buffer and a crash of the process alone can lose it (the
	// fault suite lost acknowledged writes that way). A replica's applied
	// documents are the one exception, made durable by the synced write
	// of its applied positions before it answers (Writer.SyncApplied).
	SyncNormal bool
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
	// Observe, if set, is called after every store operation with its name
	// and duration (for metrics).
	Observe func(op string, d time.Duration, err error)

	// fs is the embedded engine's file system (nil: the disk); tests give
	// one that can crash.
	fs vfs.FS
}

// Store is one node's database.
type Store struct {
	client  *mongo.Client
	db      *mongo.Database
	uri     string
	log     *slog.Logger
	observe func(op string, d time.Duration, err error)

	// docs and records are the engine that stores the document states and
	// the rest of what a node keeps.
	docs    engine.Documents
	records engine.Records
	// deferring is docs where it can take a change without waiting for
	// the disk (the embedded engine); nil for the mongo engine.
	deferring engine.Deferring

	// indexed holds the partitions whose indexes (mongo_indexes.go) the
	// mongo engine has created in this process; indexing makes their
	// creation one collection at a time (a schema change takes the whole
	// database's lock on FerretDB's SQLite, and the first writes of many
	// partitions at once had their creations refused as busy).
	indexed  sync.Map
	indexing sync.Mutex

	// writeSlots bounds the mongo engine's concurrent write commands (16);
	// waiting happens here, with no deadline of its own, and partitions
	// queue more changes into their next batch meanwhile.
	writeSlots chan struct{}
	// statements bounds the statements of the mongo engine's write
	// commands in flight, all commands together, to maxBulkStatements
	// (see Commit): FerretDB 1.24 holds one of its 100 pooled SQLite
	// connections per statement of an update command until the command
	// ends, so commands of many partitions at once could hold them all
	// and wait for each other's for good.
	statements *semaphore.Weighted

	closeEngine func() error // the embedded engine's Close
	closeOnce   sync.Once
}

// ErrUnavailable wraps failures to reach the store (engine.ErrUnavailable).
var ErrUnavailable = engine.ErrUnavailable

// mongoClientOptions are the driver's options for uri. Every write waits
// until MongoDB's journal holds it (j: true, with the URI's w): a
// standalone mongod answers a write under its default write concern
// before its journal does (it flushes every 100 ms), and what Shoal writes
// (lease votes, applied positions, the documents it acknowledges) must
// outlive a crash of the mongod once it is answered. A URI that asks for
// less (journal=false, w=0) is refused.
func mongoClientOptions(uri string) (*options.ClientOptions, error) {
	co := options.Client().ApplyURI(uri).
		SetMaxPoolSize(128).
		SetServerSelectionTimeout(10 * time.Second).
		SetAppName("shoal")
	wc := writeconcern.WriteConcern{}
	if co.WriteConcern != nil {
		wc = *co.WriteConcern
	}
	if !wc.Acknowledged() {
		return nil, fmt.Errorf("store: MONGO_URI %s asks for unacknowledged writes (w=0): Shoal must know each write is stored before it answers; remove w=0", redact(uri))
	}
	if wc.Journal != nil && !*wc.Journal {
		return nil, fmt.Errorf("store: MONGO_URI %s asks MongoDB to answer writes before its journal holds them (journal=false), which a crash of the mongod can take away after Shoal counted them as stored; remove journal=false", redact(uri))
	}
	journal := true
	wc.Journal = &journal
	return co.SetWriteConcern(&wc), nil
}

// Open connects to the store and checks it answers.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Database == "" {
		return nil, errors.New("store: database name is empty")
	}
	s := &Store{log: o.Logger, observe: o.Observe, uri: o.URI}
	if s.observe == nil {
		s.observe = func(string, time.Duration, error) {}
	}
	if o.URI == "" {
		if err := s.openEmbedded(o); err != nil {
			return nil, err
		}
		return s, nil
	}
	slots := 16
	s.writeSlots = make(chan struct{}, slots)
	s.statements = semaphore.NewWeighted(maxBulkStatements)
	co, err := mongoClientOptions(s.uri)
	if err != nil {
		return nil, err
	}
	client, err := mongo.Connect(co)
	if err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("store: connecting to %s: %w", redact(s.uri), err)
	}
	s.client = client
	s.db = client.Database(o.Database)
	if err := s.Ping(ctx); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("store: %s does not answer: %w", redact(s.uri), err)
	}
	m := &mongoEngine{s: s}
	s.docs, s.records = m, m
	if err := m.noteOpened(ctx); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("store: %s: %w", redact(s.uri), err)
	}
	if err := m.ensureAllIndexes(ctx); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("store: %w", err)
	}
	return s, nil
}

// openEmbedded opens the embedded engine in o.DataDir/pebble, after
// checking that o.DataDir holds no store of the format before it.
func (s *Store) openEmbedded(o Options) error {
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return err
	}
	if err := refuseOldFormat(dataDir); err != nil {
		return err
	}
	dir := filepath.Join(dataDir, "pebble")
	// The engine's files hold every tenant's documents: the node's user
	// alone may read them.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("store: creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("store: making %s private to this user: %w", dir, err)
	}
	e, err := pebbleengine.Open(pebbleengine.Options{Dir: dir, Logger: s.log, FS: o.fs})
	if err != nil {
		return fmt.Errorf("store: %w (is another node running on DATA_DIR %s?)", err, dataDir)
	}
	o2 := observed{e: e, timed: s.timed}
	s.docs, s.records, s.deferring, s.closeEngine = o2, o2, o2, e.Close
	return nil
}

// ErrOldFormat: DATA_DIR holds a store this version does not read.
var ErrOldFormat = errors.New("store: DATA_DIR holds a store of an earlier format")

// refuseOldFormat fails when dataDir holds the store of Shoal's earlier
// embedded engine (FerretDB on SQLite, in DATA_DIR/store): a node never
// starts empty beside data it cannot read.
func refuseOldFormat(dataDir string) error {
	dir := filepath.Join(dataDir, "store")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: cannot tell whether %s holds a store of an earlier format: %w", dir, err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".sqlite") {
			return fmt.Errorf("%w: %s is the SQLite store of an earlier Shoal (before the Pebble engine). This version keeps its data in %s and "+
				"does not read the old files. To keep using that data, run the earlier release; to start this node afresh, move %s away "+
				"(with REPLICATION_FACTOR 2 or more, the other nodes copy its partitions back to it)",
				ErrOldFormat, dir, filepath.Join(dataDir, "pebble"), dir)
		}
	}
	return nil
}

// Engine is the store's engine, for benchmarks that measure it raw.
func (s *Store) Engine() engine.Documents { return s.docs }

// Ping checks that the store answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.client == nil {
		// The embedded engine: it answers while it is open.
		_, err := s.docs.Last(ctx, 0)
		return err
	}
	if err := s.client.Ping(ctx, nil); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Close disconnects from the MongoDB, or closes the embedded engine.
func (s *Store) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		if s.client != nil {
			err = s.client.Disconnect(ctx)
		}
		if s.closeEngine != nil {
			err = s.closeEngine()
		}
	})
	return err
}

// acquireWrite takes a write slot, waiting as long as ctx allows.
func (s *Store) acquireWrite(ctx context.Context) error {
	select {
	case s.writeSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) releaseWrite() { <-s.writeSlots }

// timed runs fn and reports its duration to the observer.
func (s *Store) timed(op string, fn func() error) error {
	start := time.Now()
	err := fn()
	s.observe(op, time.Since(start), err)
	return err
}

// retryBusy runs op (attempt counts from 0) until it succeeds, fails for
// good, or has been tried 9 times, waiting 20 ms after the first failure
// and twice as long after each next one (at most 1 s): a store busy with
// another writer (SQLite's lock, held by a schema change or a commit)
// answers again shortly. partition is for the log (-1: none).
func (s *Store) retryBusy(ctx context.Context, what string, partition int, op func(attempt int) error) error {
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := op(attempt)
		if err == nil || !transient(err) || attempt >= 8 {
			return err
		}
		s.log.Warn("store busy, retrying", "op", what, "partition", partition, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(backoff*2, time.Second)
	}
}

// transient reports whether err is worth retrying: the store was busy or a
// connection dropped.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// redact hides credentials in a MongoDB URI for logs and errors.
func redact(uri string) string {
	at := strings.LastIndex(uri, "@")
	scheme := strings.Index(uri, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return uri
	}
	return uri[:scheme+3] + "***" + uri[at:]
}

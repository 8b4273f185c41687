// Package store is a node's storage: the ordered per-partition writers
// that commit concurrent writes together, the document cache, a replica's
// side of replication (over replicate/applybatch), and the records a node
// keeps, all over a storage engine (store/engine). The one engine today is
// MongoDB's driver (mongo*.go): an embedded FerretDB on SQLite when no
// MONGO_URI is given, or the MongoDB it names.
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
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"github.com/shoal-db/shoal/store/engine"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Options says which MongoDB to use.
type Options struct {
	// URI of a MongoDB; empty starts an embedded FerretDB under DataDir.
	URI string
	// Database is the database name inside it.
	Database string
	// DataDir holds the embedded store's SQLite files.
	DataDir string
	// SyncNormal makes the embedded store flush its log to disk at
	// checkpoints rather than at every commit (SQLite synchronous=NORMAL
	// in WAL mode): a crash of the process loses nothing, a power failure
	// may lose the last commits. Default: every commit (FULL).
	SyncNormal bool
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
	// Observe, if set, is called after every store operation with its name
	// and duration (for metrics).
	Observe func(op string, d time.Duration, err error)
}

// Store is one node's database.
type Store struct {
	client   *mongo.Client
	db       *mongo.Database
	embedded bool
	uri      string
	socket   string
	log      *slog.Logger
	observe  func(op string, d time.Duration, err error)

	// docs and records are the engine that stores the document states and
	// the rest of what a node keeps.
	docs    engine.Documents
	records engine.Records

	// indexes: the partitions' collections get the indexes their access
	// paths need (indexes.go), on a MongoDB given by URI; indexed holds the
	// partitions whose indexes this process has created.
	indexes bool
	indexed sync.Map

	// writeSlots bounds concurrent write commands. SQLite has one writer at
	// a time and a 10 s busy timeout, so the embedded store gets one slot:
	// waiting happens here, with no deadline of its own, and partitions
	// queue more changes into their next batch meanwhile.
	writeSlots chan struct{}

	stopEmbedded context.CancelFunc
	embeddedDone chan struct{}
	closeOnce    sync.Once
}

// ErrUnavailable wraps failures to reach the store (engine.ErrUnavailable).
var ErrUnavailable = engine.ErrUnavailable

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
	slots := 16
	if o.URI == "" {
		uri, err := s.startEmbedded(o.DataDir, o.SyncNormal)
		if err != nil {
			return nil, err
		}
		s.uri, s.embedded, slots = uri, true, 1
	}
	s.writeSlots = make(chan struct{}, slots)
	client, err := mongo.Connect(options.Client().ApplyURI(s.uri).
		SetMaxPoolSize(128).
		SetServerSelectionTimeout(10 * time.Second).
		SetAppName("shoal"))
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
	if s.indexes = !s.embedded; s.indexes {
		if err := m.ensureAllIndexes(ctx); err != nil {
			s.Close(ctx)
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return s, nil
}

func (s *Store) startEmbedded(dataDir string, syncNormal bool) (string, error) {
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(dataDir, "store")
	// The SQLite files hold every tenant's documents: the node's user alone
	// may read them, whatever mode an older version left.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("store: creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", fmt.Errorf("store: making %s private to this user: %w", dir, err)
	}
	sqliteURL := "file:" + dir + "/"
	if syncNormal {
		sqliteURL += "?_pragma=synchronous(NORMAL)"
	}
	socket, tmp, err := prepareSocket(dataDir, s.log)
	if err != nil {
		return "", err
	}
	removeTmp := func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}
	f, err := ferretdb.New(&ferretdb.Config{
		// No TCP listener: only this process's user can reach the socket.
		Listener:  ferretdb.ListenerConfig{Unix: socket},
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
		// FerretDB logs every command it does not know at warn level
		// (the driver's endSessions, for one); only its errors matter here.
		Logger: slog.New(errorsOnly{s.log.With("component", "ferretdb").Handler()}),
	})
	if err != nil {
		removeTmp()
		return "", fmt.Errorf("store: starting the embedded store in %s: %w", dir, err)
	}
	// The socket was made with the umask's mode; its directory (0700)
	// already keeps others out, and 0600 says so on the socket too.
	if err := os.Chmod(socket, 0o600); err != nil {
		s.log.Warn("the embedded store's socket keeps its mode", "socket", socket, "err", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.socket, s.stopEmbedded, s.embeddedDone = socket, cancel, make(chan struct{})
	go func() {
		defer close(s.embeddedDone)
		// The listener removes the socket when it closes.
		defer removeTmp()
		if err := f.Run(ctx); err != nil {
			s.log.Error("embedded store stopped", "err", err)
		}
	}()
	return socketURI(socket), nil
}

// Embedded reports whether the store is the in-process FerretDB.
func (s *Store) Embedded() bool { return s.embedded }

// Database gives direct access for benchmarks that measure the raw store.
func (s *Store) Database() *mongo.Database { return s.db }

// Ping checks that the store answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.client.Ping(ctx, nil); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Close disconnects and stops the embedded store, if any.
func (s *Store) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		if s.client != nil {
			err = s.client.Disconnect(ctx)
		}
		if s.stopEmbedded != nil {
			s.stopEmbedded()
			<-s.embeddedDone
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

// errorsOnly passes only error records to the wrapped handler.
type errorsOnly struct{ slog.Handler }

func (h errorsOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && h.Handler.Enabled(ctx, l)
}
func (h errorsOnly) WithAttrs(a []slog.Attr) slog.Handler { return errorsOnly{h.Handler.WithAttrs(a)} }
func (h errorsOnly) WithGroup(n string) slog.Handler      { return errorsOnly{h.Handler.WithGroup(n)} }

// Package storetest runs, for a test, an embedded MongoDB (FerretDB on
// SQLite) of the test's own, whose writes the test can make fail for real:
// while the test holds SQLite's write lock, every write the store attempts
// fails (SQLITE_BUSY after a short busy timeout) and stores nothing. It is
// how store and lease tests see what a node does when its store refuses a
// write, through the same driver and store code as production. Recording
// shows a test every command the driver sends; Serve runs FerretDB as a
// process of its own for the fault suite (the ferretserve command).
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	_ "modernc.org/sqlite" // the SQLite driver FerretDB itself uses, to lock its files
)

// Mongo is a running FerretDB for one test.
type Mongo struct {
	// URI is where the MongoDB driver reaches it.
	URI string
	dir string
}

// Serve runs FerretDB on SQLite files in dir, listening on addr, until
// ctx ends: a MongoDB in a process of its own, for the fault suite's nodes
// (see the ferretserve command). It returns once FerretDB has stopped.
//
// FerretDB 1.24 looks a document up by `_id` through an expression
// (`_ferretdb_sjson->'$._id'`) that its own index (on
// `_ferretdb_sjson->"_id"`) does not match, so every lookup by key scans
// the collection (issue 16). Serve indexes that expression in every
// collection's table as it appears, so that a lookup by key costs what it
// costs on a MongoDB. A range or a sort is still read from the whole
// collection: FerretDB pushes neither down to SQLite.
func Serve(ctx context.Context, addr, dir string, logger *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: addr},
		Handler:   "sqlite",
		SQLiteURL: "file:" + dir + "/",
		Logger:    logger,
	})
	if err != nil {
		return fmt.Errorf("FerretDB on %s in %s: %w", addr, dir, err)
	}
	indexing := make(chan struct{})
	go func() {
		defer close(indexing)
		indexIDs(ctx, dir, logger)
	}()
	err = f.Run(ctx)
	<-indexing
	return err
}

// indexIDs adds, every 200 ms until ctx ends, an index on the expression
// FerretDB looks `_id` up by to every collection's table in the SQLite
// files of dir that lacks one. It opens each file only for a pass:
// FerretDB deletes a dropped database's file, and a connection held open
// would keep its log for a database made again under the same name.
func indexIDs(ctx context.Context, dir string, logger *slog.Logger) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.sqlite"))
		for _, file := range files {
			if err := indexTables(ctx, file); err != nil && ctx.Err() == nil {
				logger.Error("indexing _id", "file", file, "err", err)
			}
		}
	}
}

// indexTables indexes `_ferretdb_sjson->'$._id'` in the table of every
// collection FerretDB lists in file that has no such index yet; a table
// that cannot be indexed is logged and the others are still indexed.
func indexTables(ctx context.Context, file string) error {
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT c.table_name FROM _ferretdb_collections c
		WHERE NOT EXISTS (SELECT 1 FROM sqlite_master i WHERE i.type = 'index' AND i.name = c.table_name || '_shoal_id')`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil // being created, or dropped
		}
		return err
	}
	var tables []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, t)
	}
	rows.Close()
	var errs []error
	for _, t := range tables {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS "%s_shoal_id" ON "%s" (_ferretdb_sjson->'$._id')`, t, t)
		if _, err := db.ExecContext(ctx, q); err != nil && !strings.Contains(err.Error(), "no such table") {
			errs = append(errs, fmt.Errorf("table %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// ServeMain is the ferretserve command (args without the program's
// name): Serve until SIGTERM or SIGINT. A test binary that starts itself
// as a MongoDB calls it too. It returns the exit code.
func ServeMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("ferretserve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:27017", "the host:port to listen on")
	dir := fs.String("dir", "", "the directory of the SQLite files (made if missing; required)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: ferretserve --listen HOST:PORT --dir DIR")
		fmt.Fprintln(stderr, "Runs FerretDB on SQLite files in DIR as a MongoDB at HOST:PORT until SIGTERM or SIGINT (a test tool).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	if err := Serve(ctx, *listen, *dir, logger); err != nil {
		fmt.Fprintf(stderr, "ferretserve: %v\n", err)
		return 1
	}
	return 0
}

// Start runs a FerretDB until the test ends.
func Start(t testing.TB) *Mongo {
	t.Helper()
	dir := t.TempDir()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:  "sqlite",
		// A writer waits 20 ms for the lock, not FerretDB's 10 s.
		SQLiteURL: "file:" + dir + "/?_pragma=busy_timeout(20)",
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &Mongo{URI: f.MongoDBURI(), dir: dir}
}

// LockWrites holds the write lock of database db until unlock is called:
// meanwhile every write to it fails.
func (m *Mongo) LockWrites(t testing.TB, db string) (unlock func()) {
	t.Helper()
	file := filepath.Join(m.dir, db+".sqlite")
	sqldb, err := sql.Open("sqlite", "file:"+file)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("taking the write lock of %s: %v", file, err)
	}
	return func() {
		conn.ExecContext(ctx, "ROLLBACK")
		conn.Close()
		sqldb.Close()
	}
}

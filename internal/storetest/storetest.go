// Package storetest runs, for a test, an embedded MongoDB (FerretDB on
// SQLite) of the test's own, whose writes the test can make fail for real:
// while the test holds SQLite's write lock, every write the store attempts
// fails (SQLITE_BUSY after a short busy timeout) and stores nothing. It is
// how store and lease tests see what a node does when its store refuses a
// write, through the same driver and store code as production.
package storetest

import (
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/FerretDB/FerretDB/ferretdb"
	_ "modernc.org/sqlite" // the SQLite driver FerretDB itself uses, to lock its files
)

// Mongo is a running FerretDB for one test.
type Mongo struct {
	// URI is where the MongoDB driver reaches it.
	URI string
	dir string
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

// Command mongo-sqlite links what the runtime would link with SQLite as the
// embedded engine: the MongoDB driver (the mongo engine) and
// modernc.org/sqlite, without FerretDB.
package main

import (
	"database/sql"
	"fmt"
	"os"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	_ "modernc.org/sqlite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	// A client is made without dialling: the driver is linked, nothing is reached.
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1"))
	if err != nil {
		return err
	}
	_ = c
	dir, err := os.MkdirTemp("", "size-mongo-sqlite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+dir+"/x.db?_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)`)
	return err
}

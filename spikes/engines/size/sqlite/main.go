// Command sqlite links modernc.org/sqlite through database/sql: it creates
// a table, writes a row and reads it back.
package main

import (
	"database/sql"
	"fmt"
	"os"

	_ "modernc.org/sqlite"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "size-sqlite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+dir+"/x.db?_pragma=journal_mode(WAL)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)`); err != nil {
		return err
	}
	if _, err := db.Exec(`INSERT INTO t VALUES ('a', '{"a":1}')`); err != nil {
		return err
	}
	var v []byte
	return db.QueryRow(`SELECT v FROM t WHERE k = 'a'`).Scan(&v)
}

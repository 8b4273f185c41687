// Command pebble links github.com/cockroachdb/pebble/v2: it opens a
// database, writes a key durably and reads it back.
package main

import (
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "size-pebble-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Set([]byte("a"), []byte(`{"a":1}`), pebble.Sync); err != nil {
		return err
	}
	_, closer, err := db.Get([]byte("a"))
	if err != nil {
		return err
	}
	return closer.Close()
}

// Command ferretdb-pebble links both today's store package and Pebble:
// what adding Pebble costs while FerretDB is still linked (the mongo
// engine's tests keep it; the runtime would not).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/shoal-db/shoal/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "size-both-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := store.Open(ctx, store.Options{Database: "size", DataDir: dir + "/store"})
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	db, err := pebble.Open(dir+"/pebble", &pebble.Options{})
	if err != nil {
		return err
	}
	return db.Close()
}

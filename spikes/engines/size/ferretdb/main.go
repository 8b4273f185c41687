// Command ferretdb links today's embedded store: Shoal's store package
// (FerretDB 1.24 on SQLite, the MongoDB driver), opened and closed.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/shoal-db/shoal/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "size-ferretdb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := store.Open(ctx, store.Options{Database: "size", DataDir: dir})
	if err != nil {
		return err
	}
	return s.Close(ctx)
}

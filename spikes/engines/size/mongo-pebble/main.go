// Command mongo-pebble links what the runtime would link with Pebble as the
// embedded engine: the MongoDB driver (the mongo engine) and
// github.com/cockroachdb/pebble/v2, without FerretDB.
package main

import (
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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
	dir, err := os.MkdirTemp("", "size-mongo-pebble-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		return err
	}
	return db.Close()
}

// Command ferretserve runs FerretDB on SQLite as a MongoDB of its own
// process, for `shoal torture --mongo-command` on a machine without
// mongod: each node of the fault suite stores through the mongo engine in
// a ferretserve of its own, which outlives the node's kills and restarts
// as a mongod beside it would. It is a test tool, not part of the shoal
// binary (FerretDB is not in the runtime):
//
//	go build -o ferretserve ./internal/storetest/ferretserve
//	shoal torture --mongo-command "$PWD/ferretserve --listen {addr} --dir {dir}"
package main

import (
	"os"

	"github.com/shoal-db/shoal/internal/storetest"
)

func main() { os.Exit(storetest.ServeMain(os.Args[1:], os.Stderr)) }

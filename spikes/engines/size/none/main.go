// Command none is the size baseline: a Go program that opens and writes a
// file with the standard library alone.
package main

import (
	"fmt"
	"os"
)

func main() {
	dir, err := os.MkdirTemp("", "size-none-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(dir+"/x", []byte(`{"a":1}`), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

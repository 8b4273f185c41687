package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/shoal-db/shoal/internal/devcerts"
)

func certs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "certs", "directory to write the CA and the node certificates to (a CA already there is kept)")
	nodes := fs.String("nodes", "node1,node2,node3", "node ids, comma separated: one certificate each, for that name")
	hosts := fs.String("hosts", "", "more host names or IP addresses every node certificate is good for, comma separated (localhost, 127.0.0.1 and ::1 always are)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal certs [--dir certs] [--nodes node1,node2,node3] [--hosts name,10.0.0.5]")
		fmt.Fprintln(stderr, "Writes a development CA (ca.pem, ca-key.pem) and, per node, NODE.pem and NODE-key.pem, signed by it:")
		fmt.Fprintln(stderr, "set TLS_CERT_FILE, TLS_KEY_FILE and TLS_CA_FILE of each node to them. For trying TLS out; use your own CA in production.")
		fs.PrintDefaults()
	}
	if code, done := parseArgs(fs, args, stderr, 2); done {
		return code
	}
	ids := split(*nodes)
	if len(ids) == 0 {
		fmt.Fprintln(stderr, "shoal certs: --nodes names no node")
		return 2
	}
	if err := devcerts.Write(*dir, ids, split(*hosts)); err != nil {
		fmt.Fprintf(stderr, "shoal certs: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s and %s in %s\n", devcerts.CAFile, devcerts.CAKeyFile, *dir)
	for _, id := range ids {
		fmt.Fprintf(stdout, "%s: TLS_CERT_FILE=%s TLS_KEY_FILE=%s TLS_CA_FILE=%s\n", id,
			filepath.Join(*dir, devcerts.CertFile(id)), filepath.Join(*dir, devcerts.KeyFile(id)), filepath.Join(*dir, devcerts.CAFile))
	}
	return 0
}

// split is a comma-separated list without blanks.
func split(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

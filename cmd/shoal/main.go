// Command shoal is the one Shoal binary: it runs a node, mints tokens and
// measures performance.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

const usage = `shoal: a peer-to-peer, sharded JSON document store.

Usage:
  shoal serve [flags]     run a node (shoal serve --help lists every setting)
  shoal token [flags]     print a client token signed with AUTH_SECRET
  shoal bench [flags]     measure REST throughput and latency against the raw store
  shoal dev [flags]       run a local cluster of N nodes on loopback (add-node, remove-node ID)
  shoal torture [flags]   run a fault suite (kills, pauses) on a local cluster and check its histories
  shoal status [flags]    show the cluster as one node sees it
  shoal health [flags]    exit 0 when a node answers /readyz (for container health checks)
  shoal inspect [flags]   print what a stopped node's embedded store holds of each partition
  shoal certs [flags]     write a development CA and node certificates for TLS
  shoal version           print the build version

Settings come from flags, the environment, and a .env file in the working
directory, in that order of precedence.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// parseArgs parses a subcommand's flags and refuses stray arguments. When
// done is true the command returns code at once: 0 after --help, usageCode
// after a usage error (already explained on stderr by the flag package or
// here).
func parseArgs(fs *flag.FlagSet, args []string, stderr io.Writer, usageCode int) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return usageCode, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shoal %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return usageCode, true
	}
	return 0, false
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "token":
		return token(args[1:], stdout, stderr)
	case "bench":
		return bench(args[1:], stdout, stderr)
	case "dev":
		return dev(args[1:], stdout, stderr)
	case "torture":
		return tortureCmd(args[1:], stdout, stderr)
	case "status":
		return status(args[1:], stdout, stderr)
	case "health":
		return health(args[1:], stdout, stderr)
	case "inspect":
		return inspect(args[1:], stdout, stderr)
	case "certs":
		return certs(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "shoal", version)
		return 0
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "shoal: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

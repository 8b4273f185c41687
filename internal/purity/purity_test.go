// Package purity holds the check that the packages of pure logic stay
// pure: they and every package of this module they build on import
// nothing that reaches the network, the disk, other processes or the
// clock's sleep, so their decisions can be tested deterministically.
package purity

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shoal-db/shoal/"

// pure are the packages that must do no I/O (README, "Packages").
var pure = []string{"record", "shard", "placement"}

// ioPackages are the standard packages through which a package does I/O.
var ioPackages = []string{"net", "os", "os/exec", "os/signal", "io/fs", "io/ioutil", "path/filepath", "database/sql", "syscall", "log", "log/slog", "plugin", "runtime/debug"}

// TestPurePackagesDoNoIO checks the imports of each pure package and of
// every package of this module it builds on; third-party packages (the
// consistent-hash ring) are allowed only if they import no I/O package
// either.
func TestPurePackagesDoNoIO(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	list := func(args ...string) []string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), goTool, append([]string{"list"}, args...)...).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, exit.Stderr)
			}
			t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	checked := 0
	for _, p := range pure {
		for _, dep := range list("-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+p) {
			if dep == "" {
				continue
			}
			checked++
			for _, imp := range list("-f", `{{join .Imports "\n"}}`, dep) {
				if slices.Contains(ioPackages, imp) {
					t.Errorf("%s (which %s builds on) imports %s: pure logic does no I/O; move the I/O to the caller and pass what it reads in", dep, p, imp)
				}
			}
		}
	}
	if checked < len(pure) {
		t.Fatalf("checked %d packages, want at least the %d pure ones", checked, len(pure))
	}
}

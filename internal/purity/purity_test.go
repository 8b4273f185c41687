// Package purity holds the checks that keep the packages of pure logic
// pure: they build without the store and its driver, and neither they nor
// any package of this module they build on reaches the network, the disk
// or other processes, so their decisions can be tested deterministically.
package purity

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/shoal-db/shoal/"

// pure are the packages that must do no I/O (README, "Packages").
var pure = []string{"record", "record/bodycodec", "shard", "placement", "replicate/applyrule", "store/engine", "api/wire"}

// ioPackages are the standard packages through which a package does I/O.
var ioPackages = []string{"net", "os", "os/exec", "os/signal", "io/fs", "io/ioutil", "path/filepath", "database/sql", "syscall", "log", "log/slog", "plugin", "runtime/debug"}

// TestPurePackagesDoNoIO checks the imports of each pure package and of
// every package of this module it builds on; third-party packages (the
// consistent-hash ring) are allowed only if they import no I/O package
// either.
func TestPurePackagesDoNoIO(t *testing.T) {
	list := goList(t)
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

// TestDependencyRules: what each package of pure decisions may build on.
// lease (decisions and the manager that drives them through interfaces)
// builds without the store, whose MongoDB driver and FerretDB are some 500
// packages; record is a leaf; placement builds on shard and record alone;
// the replica's apply rules (replicate/applyrule) on record alone, and
// their driver (replicate/applybatch) on those two; replicate (the
// shipper and the replica's side, over interfaces) builds without the
// store and its driver; the API's shapes (api/wire) build on record
// alone, and the Go client on them (it built the whole server, 515
// packages, when it took them from api).
func TestDependencyRules(t *testing.T) {
	list := goList(t)
	nonStandard := func(pkgs ...string) []string {
		var out []string
		for _, p := range list(append([]string{"-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)...) {
			if p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	store := func(dep string) bool { return dep == module+"store" || strings.HasPrefix(dep, module+"store/") }
	placementMay := append(nonStandard(module+"shard", module+"record"), module+"placement")
	for _, tc := range []struct {
		pkg  string
		rule string
		ok   func(dep string) bool
	}{
		{"lease", "the standard library and this module's packages other than the store", func(dep string) bool {
			return strings.HasPrefix(dep, module) && !store(dep)
		}},
		{"record", "the standard library", func(dep string) bool { return dep == module+"record" }},
		{"api/wire", "the standard library and record (the API's shapes, which the client reads)", func(dep string) bool {
			return dep == module+"record" || dep == module+"api/wire"
		}},
		{"client", "the standard library, record and api/wire (a program that uses the client builds no server, store or membership)", func(dep string) bool {
			return dep == module+"record" || dep == module+"api/wire" || dep == module+"client"
		}},
		{"placement", "the standard library and what shard and record build on", func(dep string) bool {
			return slices.Contains(placementMay, dep)
		}},
		{"replicate", "the standard library and packages other than the store and its MongoDB driver", func(dep string) bool {
			return !store(dep) && !strings.HasPrefix(dep, "go.mongodb.org/") && !strings.Contains(dep, "FerretDB")
		}},
		{"store/engine", "the standard library and record (an engine builds without the store)", func(dep string) bool {
			return dep == module+"record" || dep == module+"store/engine"
		}},
		{"replicate/applyrule", "the standard library and record", func(dep string) bool {
			return dep == module+"record" || dep == module+"replicate/applyrule"
		}},
		{"replicate/applybatch", "the standard library, record and replicate/applyrule (the store's writer offers it its primitives)", func(dep string) bool {
			return dep == module+"record" || dep == module+"replicate/applyrule" || dep == module+"replicate/applybatch"
		}},
	} {
		var bad []string
		for _, dep := range nonStandard(module + tc.pkg) {
			if !tc.ok(dep) {
				bad = append(bad, dep)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s may depend only on %s, but depends on %s", tc.pkg, tc.rule, firstFew(bad))
		}
	}
}

// goList returns a function that runs go list with its arguments and
// returns the lines it printed; it skips the test where go list cannot run.
func goList(t *testing.T) func(args ...string) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	return func(args ...string) []string {
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
}

// firstFew lists up to ten packages, this module's first (one of them is
// likely the import that brought in the rest).
func firstFew(pkgs []string) string {
	var ours, others []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, module) {
			ours = append(ours, p)
		} else {
			others = append(others, p)
		}
	}
	pkgs = append(ours, others...)
	if len(pkgs) > 10 {
		return fmt.Sprintf("%s and %d more", strings.Join(pkgs[:10], ", "), len(pkgs)-10)
	}
	return strings.Join(pkgs, ", ")
}

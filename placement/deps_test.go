package placement

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const thisModule = "github.com/shoal-db/shoal/"

// TestDependencies keeps placement pure: it imports the standard library,
// shard and record only, and builds from nothing more than those bring.
// Above all it never builds the store (whose MongoDB driver and FerretDB
// are some 500 packages), the cluster's gossip, the lease manager or
// anything else that does I/O.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	// list runs go list with format over pkgs and returns its words.
	list := func(format string, pkgs ...string) []string {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), goTool, append([]string{"list", "-f", format}, pkgs...)...).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("go list %s: %v\n%s", strings.Join(pkgs, " "), err, exit.Stderr)
			}
			t.Fatalf("go list %s: %v", strings.Join(pkgs, " "), err)
		}
		return strings.Fields(string(out))
	}
	const self, shard, record = thisModule + "placement", thisModule + "shard", thisModule + "record"
	nonStandard := func(pkgs ...string) []string {
		return list("{{if not .Standard}}{{.ImportPath}}{{end}}", append([]string{"-deps"}, pkgs...)...)
	}
	deps := nonStandard(self)

	// Its own imports: the standard library, shard and record.
	for _, imp := range list(`{{join .Imports "\n"}}`, self) {
		if slices.Contains(deps, imp) && imp != shard && imp != record {
			t.Errorf("placement imports %s; it may import only the standard library, shard and record", imp)
		}
	}
	// Everything it builds from: what shard and record bring, nothing
	// more; and neither of them brings the store, its driver or the I/O
	// packages.
	allowed := append(nonStandard(shard, record), self)
	var extra, banned []string
	for _, dep := range deps {
		if !slices.Contains(allowed, dep) {
			extra = append(extra, dep)
		}
		if doesIO(dep) {
			banned = append(banned, dep)
		}
	}
	if len(extra) > 0 {
		t.Errorf("placement builds from more than shard and record bring: %s", firstFew(extra))
	}
	if len(banned) > 0 {
		t.Errorf("placement builds from the store, its driver or I/O packages: %s", firstFew(banned))
	}
}

// doesIO reports whether package path is one placement must never build
// from: this module's drivers and the libraries they wrap.
func doesIO(path string) bool {
	for _, p := range []string{"store", "cluster", "lease", "replicate", "api", "internal/node"} {
		if path == thisModule+p || strings.HasPrefix(path, thisModule+p+"/") {
			return true
		}
	}
	for _, prefix := range []string{"go.mongodb.org/", "github.com/FerretDB/", "github.com/hashicorp/memberlist"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// firstFew lists up to ten packages, this module's first (one of them is
// likely the import that brought in the rest).
func firstFew(pkgs []string) string {
	var ours, others []string
	for _, p := range pkgs {
		if strings.HasPrefix(p, thisModule) {
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

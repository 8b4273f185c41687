package lease

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

const thisModule = "github.com/shoal-db/shoal/"

// TestDependencies keeps lease pure: it builds from the standard library
// and this module's small packages, never the store, whose MongoDB driver
// and FerretDB are some 500 packages; and the values it shares with the
// store (package record) stay a leaf that imports only the standard library.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	for _, tc := range []struct {
		pkg  string
		rule string
		ok   func(dep string) bool
	}{
		{
			pkg:  thisModule + "lease",
			rule: "the standard library and this module's packages other than the store",
			ok: func(dep string) bool {
				return strings.HasPrefix(dep, thisModule) && dep != thisModule+"store" && !strings.HasPrefix(dep, thisModule+"store/")
			},
		},
		{
			pkg:  thisModule + "record",
			rule: "the standard library",
			ok:   func(dep string) bool { return dep == thisModule+"record" },
		},
	} {
		out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps",
			"-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", tc.pkg).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("go list -deps %s: %v\n%s", tc.pkg, err, exit.Stderr)
			}
			t.Fatalf("go list -deps %s: %v", tc.pkg, err)
		}
		// This module's packages first: one of them is likely the import
		// that brought in the rest.
		var ours, others []string
		for _, dep := range strings.Fields(string(out)) {
			switch {
			case tc.ok(dep):
			case strings.HasPrefix(dep, thisModule):
				ours = append(ours, dep)
			default:
				others = append(others, dep)
			}
		}
		bad := append(ours, others...)
		if len(bad) == 0 {
			continue
		}
		more := ""
		if len(bad) > 10 {
			bad, more = bad[:10], fmt.Sprintf(" and %d more", len(bad)-10)
		}
		t.Errorf("%s may depend only on %s, but depends on %s%s", tc.pkg, tc.rule, strings.Join(bad, ", "), more)
	}
}

package config

import (
	"os"
	"strings"
	"testing"
)

// The README's configuration table must name every setting with its flag
// and default, so the documentation cannot fall behind the code.
func TestREADMEDocumentsEverySetting(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for _, s := range Settings {
		row := "| `" + s.Key + "` | `--" + s.Flag() + "` |"
		if !strings.Contains(readme, row) {
			t.Errorf("README lacks the configuration row for %s (%q)", s.Key, row)
			continue
		}
		line := readme[strings.Index(readme, row):]
		line = line[:strings.Index(line, "\n")]
		if s.Default != "" && !strings.Contains(line, "`"+s.Default+"`") {
			t.Errorf("README row for %s does not show its default %q: %s", s.Key, s.Default, line)
		}
	}
}

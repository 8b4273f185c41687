package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// A file rewritten takes the new content and the new mode, and no
// temporary file is left beside it.
func TestWriteReplacesContentAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	fi, serr := os.Stat(path)
	if err != nil || serr != nil || string(data) != "new" || fi.Mode().Perm() != 0o600 {
		t.Fatalf("content %q (%v), mode %v (%v); want new, 0600", data, err, fi.Mode().Perm(), serr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d files in the directory, want 1 (no temporary file left)", len(entries))
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

// Package atomicfile writes a file so that a reader sees its old content
// or its new one, never a part: a temporary file beside it, synced, then
// renamed over it. The new file has the given mode even where the old one
// had a looser one (a private key rewritten over a readable file).
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm, atomically.
func Write(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

package store

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// listeningTCP returns the inodes of the TCP sockets in LISTEN state that
// this process holds open, from /proc.
func listeningTCP(t *testing.T) map[string]bool {
	t.Helper()
	listening := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			if table == "/proc/net/tcp" {
				t.Skipf("no %s here: %v", table, err)
			}
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) > 9 && fields[3] == "0A" {
				listening[fields[9]] = true
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			if inode = strings.TrimSuffix(inode, "]"); listening[inode] {
				ours[inode] = true
			}
		}
	}
	return ours
}

// The embedded store listens nowhere: no TCP listener, no socket; a second
// store on the DATA_DIR of a running one is refused with what to do, and
// the first goes on.
func TestTheEmbeddedStoreListensNowhere(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	before := listeningTCP(t)
	s, err := Open(ctx, Options{Database: "shoal", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for inode := range listeningTCP(t) {
		if !before[inode] {
			t.Fatalf("opening the embedded store added a TCP listener (socket inode %s)", inode)
		}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSocket != 0 {
			t.Errorf("the embedded store made a socket: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, Options{Database: "shoal", DataDir: dir}); err == nil {
		s2.Close(ctx)
		t.Fatal("a second store opened on the DATA_DIR of a running one")
	} else if !strings.Contains(err.Error(), "DATA_DIR") {
		t.Fatalf("second store on the same DATA_DIR: %v, want an error that says what to do", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("the first store after the refused second one: %v", err)
	}
}

// The engine's files hold every tenant's documents: only the node's own
// user may read them, even when the directory already existed with a
// looser mode.
func TestEmbeddedStoreFilesAreTheNodesAlone(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, "pebble"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Database: "shoal", DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	info, err := os.Stat(filepath.Join(dataDir, "pebble"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Fatalf("the store's files are in a directory of mode %v, want 0700", info.Mode().Perm())
	}
}

// A DATA_DIR that holds the SQLite store of the earlier embedded engine is
// refused, with what to do; nothing is created beside it.
func TestADataDirOfTheOldFormatIsRefused(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "store", "shoal.sqlite"), []byte("SQLite format 3\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Database: "shoal", DataDir: dataDir})
	if err == nil {
		s.Close(ctx)
		t.Fatal("a DATA_DIR of the old format was opened")
	}
	if !errors.Is(err, ErrOldFormat) || !strings.Contains(err.Error(), "earlier release") || !strings.Contains(err.Error(), "move") {
		t.Fatalf("the old format refused with %q: it should say what to do", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "pebble")); !os.IsNotExist(err) {
		t.Fatalf("a new store was made beside the old one (%v)", err)
	}
}

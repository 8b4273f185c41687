package store

import (
	"bufio"
	"context"
	"io/fs"
	"net"
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

// checkSocket checks that the store serves on a Unix socket of mode 0600
// in a directory of mode 0700, and returns the socket's path.
func checkSocket(t *testing.T, s *Store) string {
	t.Helper()
	if !strings.HasPrefix(s.uri, "mongodb://%2F") {
		t.Fatalf("the embedded store is reached at %s, not through a Unix socket", s.uri)
	}
	if s.socket == "" || !strings.HasSuffix(s.socket, ".sock") {
		t.Fatalf("socket path %q", s.socket)
	}
	info, err := os.Lstat(s.socket)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&fs.ModeSocket == 0 || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want a socket of mode 0600", s.socket, info.Mode())
	}
	dir, err := os.Lstat(filepath.Dir(s.socket))
	if err != nil {
		t.Fatal(err)
	}
	if !dir.IsDir() || dir.Mode().Perm() != 0o700 {
		t.Fatalf("%s has mode %v, want a directory of mode 0700", filepath.Dir(s.socket), dir.Mode())
	}
	return s.socket
}

// openWithoutTCP opens an embedded store in dir and fails the test if that
// added a TCP listener to this process.
func openWithoutTCP(t *testing.T, dir string) *Store {
	t.Helper()
	before := listeningTCP(t)
	s, err := Open(context.Background(), Options{Database: "shoal", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for inode := range listeningTCP(t) {
		if !before[inode] {
			s.Close(context.Background())
			t.Fatalf("opening the embedded store added a TCP listener (socket inode %s); uri %s", inode, s.uri)
		}
	}
	return s
}

func TestEmbeddedStoreHasNoTCPListener(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openWithoutTCP(t, dir)
	defer s.Close(ctx)
	sock := checkSocket(t, s)
	if rel, err := filepath.Rel(dir, sock); err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("socket %s is not inside DATA_DIR %s", sock, dir)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket is still there after Close: %v", err)
	}

	// A socket left by a process that died is no obstacle.
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("no stale socket made: %v", err)
	}
	s2, err := Open(ctx, Options{Database: "shoal", DataDir: dir})
	if err != nil {
		t.Fatalf("opening over a stale socket: %v", err)
	}
	checkSocket(t, s2)

	// A store serving on it is not taken over by a second one.
	if s3, err := Open(ctx, Options{Database: "shoal", DataDir: dir}); err == nil {
		s3.Close(ctx)
		t.Fatal("a second store opened on the DATA_DIR of a running one")
	} else if !strings.Contains(err.Error(), "DATA_DIR") {
		t.Fatalf("second store on the same DATA_DIR: %v, want an error that says what to do", err)
	}
	if err := s2.Ping(ctx); err != nil {
		t.Fatalf("the first store after the refused second one: %v", err)
	}
	s2.Close(ctx)

	// Something that is not a socket in its place is left alone.
	if err := os.WriteFile(sock, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s4, err := Open(ctx, Options{Database: "shoal", DataDir: dir}); err == nil {
		s4.Close(ctx)
		t.Fatal("opened with a regular file where the socket goes")
	} else if !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("a file where the socket goes: %v", err)
	}
}

// A DATA_DIR too deep for a Unix socket path (about 107 bytes) gets its
// socket in a private directory of its own, removed at Close.
func TestEmbeddedStoreSocketOfADeepDataDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	s := openWithoutTCP(t, dir)
	defer s.Close(ctx)
	sock := checkSocket(t, s)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("the socket's directory %s is still there after Close: %v", filepath.Dir(sock), err)
	}
}

// The SQLite files hold every tenant's documents: only the node's own user
// may read them, even when the directory already existed with a looser mode.
func TestEmbeddedStoreFilesAreTheNodesAlone(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, "store"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, Options{Database: "shoal", DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	info, err := os.Stat(filepath.Join(dataDir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o700 {
		t.Fatalf("the store's files are in a directory of mode %v, want 0700", info.Mode().Perm())
	}
}

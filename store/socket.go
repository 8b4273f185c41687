package store

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The embedded store is reached only through a Unix socket of mode 0600 in
// a directory of mode 0700: no TCP port, so no other user or container on
// the machine can talk to it (it has no authentication of its own).

const (
	// socketDir is the socket's directory inside DATA_DIR, and socketName
	// its name (the MongoDB driver dials a host ending in "sock" as a Unix
	// socket).
	socketDir  = "run"
	socketName = "store.sock"
)

// maxSocketPath is the longest path a Unix socket can be bound to (sun_path
// less its terminating NUL: 107 bytes on Linux).
var maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// usableSocketPath reports whether path can be bound and also be given to
// the MongoDB driver, which splits a host at ':' to find a port.
func usableSocketPath(path string) bool {
	return len(path) <= maxSocketPath && !strings.Contains(path, ":")
}

// socketURI is the MongoDB URI of a Unix socket: the path, escaped, as the
// host (the driver unescapes it with url.QueryUnescape).
func socketURI(path string) string {
	return "mongodb://" + url.QueryEscape(path) + "/"
}

// prepareSocket chooses where the embedded store's socket goes: in
// dataDir/run/ when that path fits a Unix socket, otherwise in a private
// temporary directory (returned as tmp, for the caller to remove at Close).
// Either directory has mode 0700, and no socket is in the way: one left by
// a process that died is removed, one that answers is another store on this
// DATA_DIR and is refused.
func prepareSocket(dataDir string, log *slog.Logger) (path, tmp string, err error) {
	dir := filepath.Join(dataDir, socketDir)
	path = filepath.Join(dir, socketName)
	if usableSocketPath(path) {
		if err := privateDir(dir); err != nil {
			return "", "", err
		}
		if err := clearStaleSocket(path); err != nil {
			return "", "", err
		}
		return path, "", nil
	}
	tmp, err = os.MkdirTemp("", "shoal-store-")
	if err != nil {
		return "", "", fmt.Errorf("store: the socket path %s is too long for a Unix socket, and no private directory could be made instead: %w", path, err)
	}
	short := filepath.Join(tmp, socketName)
	if !usableSocketPath(short) {
		os.Remove(tmp)
		return "", "", fmt.Errorf("store: the embedded store's socket path %s is longer than %d bytes or has a ':', and so is %s: use a shorter DATA_DIR (or TMPDIR)",
			path, maxSocketPath, short)
	}
	log.Info("the embedded store's socket is in a private temporary directory: its path in DATA_DIR would be too long for a Unix socket",
		"socket", short, "too_long", path)
	return short, tmp, nil
}

// privateDir makes dir (mode 0700), or checks that it is a directory, not a
// link, and sets its mode to 0700 (which fails for another user's).
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("store: creating %s: %w", dir, err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("store: %s is in the way of the embedded store's socket directory and is not a directory: remove it", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("store: making %s private: %w", dir, err)
	}
	return nil
}

// clearStaleSocket removes a socket at path that nothing serves on.
func clearStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if info.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("store: %s is in the way of the embedded store's socket and is not a socket: remove it", path)
	}
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("store: another embedded store serves this DATA_DIR (on %s): stop it, or give this node a DATA_DIR of its own", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("store: cannot tell whether the socket %s left in DATA_DIR is in use (%v): if no other Shoal uses this DATA_DIR, remove it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: removing the stale socket %s: %w", path, err)
	}
	return nil
}

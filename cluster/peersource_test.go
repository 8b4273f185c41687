package cluster

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const goodList = `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"}]}`

// fetchBounded runs FetchPeerList and fails the test if it has not
// returned after 10 s: a bound on a hang, not a measure of speed.
func fetchBounded(t *testing.T, source string, client *http.Client) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := FetchPeerList(context.Background(), source, client)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading the peer list %s has not returned after 10s", source)
		return nil, nil
	}
}

// mkfifo makes a named pipe and, when the test ends, opens its writing end
// once so that a reader stuck in open(2) on it is let go.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// ENXIO: no reader is waiting, nothing to release.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

func TestFetchPeerListRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "peers.fifo")
	mkfifo(t, fifo)
	sock := filepath.Join(dir, "peers.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct{ name, path, want string }{
		{"fifo", fifo, "named pipe"},
		{"directory", dir, "directory"},
		{"socket", sock, "socket"},
		{"device", "/dev/zero", "device"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := os.Stat(c.path); err != nil {
				t.Skipf("no %s here: %v", c.path, err)
			}
			_, err := fetchBounded(t, c.path, nil)
			if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "PEERS_ENDPOINT") {
				t.Fatalf("error %v, want a refusal naming a %s and saying what to do", err, c.want)
			}
		})
	}

	// A symbolic link to a regular file is fine (a Kubernetes ConfigMap
	// mounts its files as links).
	file := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(file, []byte(goodList), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	data, err := fetchBounded(t, link, nil)
	if err != nil || string(data) != goodList {
		t.Fatalf("a link to a regular file: %q, %v", data, err)
	}
	// A link to a FIFO is not.
	flink := filepath.Join(dir, "fifo-link.json")
	if err := os.Symlink(fifo, flink); err != nil {
		t.Fatal(err)
	}
	if _, err := fetchBounded(t, flink, nil); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("a link to a FIFO: %v", err)
	}
	// Too large is still refused.
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxPeerListBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fetchBounded(t, big, nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an oversized file: %v", err)
	}
}

func TestFetchPeerListRefusesRedirectsToAnotherOrigin(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(goodList))
	}))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/peers.json", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(goodList)) })
	mux.Handle("/moved", http.RedirectHandler("/peers.json", http.StatusFound))
	mux.Handle("/elsewhere", http.RedirectHandler(other.URL+"/peers.json", http.StatusFound))
	mux.Handle("/twice", http.RedirectHandler("/elsewhere", http.StatusMovedPermanently))
	origin := httptest.NewServer(mux)
	defer origin.Close()

	// On the same host and port, a redirect is followed.
	data, err := fetchBounded(t, origin.URL+"/moved", origin.Client())
	if err != nil || string(data) != goodList {
		t.Fatalf("same-origin redirect: %q, %v", data, err)
	}
	for _, path := range []string{"/elsewhere", "/twice"} {
		_, err := fetchBounded(t, origin.URL+path, origin.Client())
		if err == nil || !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), other.URL+"/peers.json") ||
			!strings.Contains(err.Error(), "PEERS_ENDPOINT") {
			t.Fatalf("redirect %s to another host: %v, want a refusal naming the target and PEERS_ENDPOINT", path, err)
		}
	}

	// https to http is refused too, whatever the client passed allows.
	tlsOrigin := httptest.NewTLSServer(http.RedirectHandler(other.URL+"/peers.json", http.StatusFound))
	defer tlsOrigin.Close()
	client := tlsOrigin.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return nil }
	if _, err := fetchBounded(t, tlsOrigin.URL+"/peers.json", client); err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("https to http redirect: %v", err)
	}
	if client.CheckRedirect(nil, nil) != nil {
		t.Fatal("the caller's client was changed")
	}
}

func TestSameOrigin(t *testing.T) {
	cases := []struct {
		from, to string
		same     bool
	}{
		{"http://a:8080/x", "http://a:8080/y", true},
		{"http://a/x", "http://a:80/y", true},
		{"https://a/x", "https://A:443/y", true},
		{"http://a:8080/x", "http://a:8081/x", false},
		{"http://a:8080/x", "http://b:8080/x", false},
		{"https://a:8443/x", "http://a:8443/x", false},
		{"http://a:8080/x", "https://a:8080/x", false},
		{"http://127.0.0.1:1/x", "http://localhost:1/x", false},
	}
	for _, c := range cases {
		from, err1 := url.Parse(c.from)
		to, err2 := url.Parse(c.to)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if got := sameOrigin(from, to); got != c.same {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", c.from, c.to, got, c.same)
		}
	}
}

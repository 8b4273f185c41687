package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serveWith runs h behind the deadlines of a server with the given
// timeouts, on a real HTTP server; with onServer, that server has them as
// its ReadTimeout and WriteTimeout too, as the node's has.
func serveWith(t *testing.T, body, write time.Duration, onServer bool, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := New(Config{NodeID: "n", PartitionCount: 1, MaxBodyBytes: 1 << 20, AuthSecret: []byte("0123456789abcdef"),
		BodyReadTimeout: body, WriteTimeout: write}, nil, nil)
	srv := httptest.NewUnstartedServer(s.deadlines(h))
	if onServer {
		srv.Config.ReadTimeout, srv.Config.WriteTimeout = body, write
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// A client that stops reading its answer is cut after WRITE_TIMEOUT (it
// was held for as long as it stayed connected).
func TestStalledReaderIsCut(t *testing.T) {
	wrote := make(chan error, 1)
	srv := serveWith(t, time.Minute, 200*time.Millisecond, false, func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for i := 0; i < 4096; i++ { // 256 MiB: more than any socket buffers
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	// The client reads nothing from here on.
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("256 MiB were written to a client that read nothing")
		}
	case <-time.After(30 * time.Second): // a bound for the failure, not a speed
		t.Fatal("the answer to a client that stopped reading is still being written after 30s")
	}
}

// An answer that takes longer than WRITE_TIMEOUT to produce reaches a
// client that keeps reading: the write deadline moves with every part
// written (the server's WriteTimeout alone would cut it).
func TestSteadyReaderGetsALongAnswer(t *testing.T) {
	const parts, d = 10, 200 * time.Millisecond
	srv := serveWith(t, time.Minute, d, true, func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < parts; i++ {
			w.Write(chunk)
			http.NewResponseController(w).Flush()
			<-time.After(d / 2) // a slow producer (a query streaming its results): the answer takes 5 x WRITE_TIMEOUT
		}
	})
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != parts*64<<10 {
		t.Fatalf("read %d bytes (%v), want %d", n, err, parts*64<<10)
	}
}

// The body deadline bounds the body, not the work after it: a handler that
// takes longer than both timeouts keeps its context and its answer arrives
// (with the server's ReadTimeout alone, the read deadline cancelled the
// request's context once it passed).
func TestWorkOutlivesTheDeadlines(t *testing.T) {
	const d = 200 * time.Millisecond
	srv := serveWith(t, d, d, true, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			http.Error(w, "cancelled", http.StatusServiceUnavailable)
		case <-time.After(5 * d): // the work outlasts both deadlines: that is what is tested
			io.WriteString(w, "done")
		}
	})
	for _, body := range []string{"", `{"a":1}`} {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", srv.URL, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("body %q: %v", body, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "done" {
			t.Fatalf("body %q: status %d %q, want the answer after the work", body, resp.StatusCode, got)
		}
	}
}

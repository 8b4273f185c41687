package api

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// writePart is how much of an answer is written under one write deadline.
const writePart = 64 << 10

// deadlines gives every request its own read and write deadlines on the
// connection (http.ResponseController), instead of one bound on a whole
// request:
//
//   - The body must arrive within BodyReadTimeout of the handler's start
//     (the node's http.Server has ReadTimeout set to the same, so the
//     headers are within it too). Once the body is read to its end, or if
//     there is none, the read deadline is lifted: past it, the server's
//     wait for the next request on the connection would cancel the
//     request's context, and with it work that may rightly take longer (a
//     write waiting for its write concern, a takeover, a query).
//   - Every part of the answer (writePart bytes, a flush, the status line)
//     must be accepted by the client within WriteTimeout of being written.
//     A client that stops reading is cut after WriteTimeout; one that keeps
//     reading gets an answer of any length, however long it takes to make.
//     The handler's work before it writes is not bounded here: its own
//     deadlines are (X-Write-Timeout, forward and read timeouts, a query's
//     budget).
//
// Internal routes get the same: their bodies (replication batches of up
// to 8 MiB) come from peers on the cluster network, and their senders give
// up after 10 s anyway.
func (s *Server) deadlines(next http.Handler) http.Handler {
	body, write := s.cfg.BodyReadTimeout, s.cfg.WriteTimeout
	if body <= 0 && write <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if body > 0 {
			if r.Body == nil || r.Body == http.NoBody {
				_ = rc.SetReadDeadline(time.Time{})
			} else {
				_ = rc.SetReadDeadline(time.Now().Add(body))
				r.Body = &bodyRead{ReadCloser: r.Body, done: func() { _ = rc.SetReadDeadline(time.Time{}) }}
			}
		}
		if write > 0 {
			dw := &deadlineWriter{ResponseWriter: w, rc: rc, timeout: write}
			dw.extend()
			w = dw
			defer dw.extend() // the server writes what is buffered once the handler returns
		}
		next.ServeHTTP(w, r)
	})
}

// bodyRead calls done once, when the body has been read to its end.
type bodyRead struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *bodyRead) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.done)
	}
	return n, err
}

// deadlineWriter moves the connection's write deadline to WriteTimeout
// from now before every part of the answer it writes.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		part := p[:min(len(p), writePart)]
		w.extend()
		n, err := w.ResponseWriter.Write(part)
		written += n
		if err != nil {
			return written, err
		}
		p = p[len(part):]
	}
	return written, nil
}

// FlushError flushes under a fresh deadline (http.ResponseController finds
// it; Flush is for callers that assert http.Flusher).
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/replicate"
)

// streamIdle is how long a replication stream may carry nothing before the
// replica closes it. The master stops using a stream idle for less
// (node.streamReuse), so it never sends on one the replica is closing.
const streamIdle = 2 * time.Minute

// streamApplyTimeout bounds the applying of one request taken on a stream:
// the master gives up on an answer after 10 s and closes the stream, which
// a request over HTTP would see as its context ending.
const streamApplyTimeout = 10 * time.Second

// streams are the replication streams this node serves: each runs on the
// goroutine of the request that opened it, which the HTTP server no
// longer tracks once the connection is taken over, so the node stops them
// (CloseStreams) as it shuts down.
type streams struct {
	mu     sync.Mutex
	closed bool
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// enter registers a stream about to be served; false once CloseStreams ran.
func (st *streams) enter() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	st.wg.Add(1)
	return true
}

// CloseStreams ends the replication streams this node serves and waits
// until each has stopped: a stream between two requests at once, one
// applying a request once it has answered it (as the HTTP server's
// Shutdown lets a request finish); streams opened afterwards are refused.
// The node calls it as it shuts down, beside the HTTP server's Shutdown.
func (s *Server) CloseStreams() {
	s.streams.mu.Lock()
	s.streams.closed = true
	s.streams.stop()
	s.streams.mu.Unlock()
	s.streams.wg.Wait()
}

// replicateStream takes over the connection of a signed request asking to
// switch to replicate.StreamProtocol, then takes replication requests on
// it (see replicate.StreamProtocol) until the master closes it, it stays
// idle for streamIdle, a frame is not what a master writes, or the node
// shuts down. Its answers are not sealed: masters of older versions open
// it (/internal/v3/replicate-stream, /internal/v2/replicate-stream).
func (s *Server) replicateStream(w http.ResponseWriter, r *http.Request) {
	s.serveReplicateStream(w, r, false)
}

// replicateStreamSealed is replicateStream on
// replicate.StreamProtocolSealed, whose answer frames are sealed
// (/internal/v4/replicate-stream).
func (s *Server) replicateStreamSealed(w http.ResponseWriter, r *http.Request) {
	s.serveReplicateStream(w, r, true)
}

func (s *Server) serveReplicateStream(w http.ResponseWriter, r *http.Request, sealed bool) {
	protocol := replicate.StreamProtocol
	if sealed {
		protocol = replicate.StreamProtocolSealed
	}
	if !httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), protocol) {
		writeProblem(w, badRequest(TypeInvalidInternal, "a replication stream is opened with the headers Connection: Upgrade and Upgrade: "+protocol))
		return
	}
	if !s.streams.enter() {
		writeProblem(w, unavailable("the node is shutting down"))
		return
	}
	defer s.streams.wg.Done()
	key := s.cfg.Cluster.Signer().StreamKey(r)
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// HTTP/2, or a test's recorder: the master sends requests one by one.
		writeProblem(w, problem(http.StatusNotImplemented, TypeInvalidInternal, "No stream", "this connection cannot carry a replication stream: "+err.Error()))
		return
	}
	defer conn.Close()
	markSwitched(w)
	// Shutting down ends the wait for the next request, not a request
	// being applied (serveStream checks the context after each).
	stop := context.AfterFunc(s.streams.ctx, func() { _ = conn.SetReadDeadline(time.Now()) })
	defer stop()
	_ = conn.SetDeadline(time.Time{}) // the server's, for the request that opened it
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n")
	if err := rw.Flush(); err != nil {
		return
	}
	from := cluster.SignedBy(r.Context())
	answers := appendAnswer(replicate.AppendAnswerFrame)
	if sealed {
		answers = replicate.NewAnswerSealer(key).AppendFrame
	}
	if err := s.serveStream(conn, rw.Reader, key, from, answers); err != nil && s.streams.ctx.Err() == nil {
		s.log.Debug("replication stream closed", "from", from, "err", err)
	}
}

// appendAnswer appends a stream's next answer frame, of kind and carrying
// payload, to dst: sealed (replicate.AnswerSealer.AppendFrame) or not
// (replicate.AppendAnswerFrame).
type appendAnswer func(dst []byte, kind byte, payload []byte) []byte

// serveStream takes requests from one stream, opened by the node from,
// until it ends, and answers each with frames answers makes; the error
// says why it did (nil: the master closed it between requests, or this
// node is shutting down).
func (s *Server) serveStream(conn net.Conn, r *bufio.Reader, key []byte, from string, answers appendAnswer) error {
	opener := replicate.NewStreamOpener(key, cluster.MaxInternalBody)
	signer := s.cfg.Cluster.Signer()
	var out []byte
	for {
		_ = conn.SetReadDeadline(time.Now().Add(streamIdle))
		if s.streams.ctx.Err() != nil {
			return nil
		}
		data, err := opener.ReadFrame(r)
		if errors.Is(err, io.EOF) || s.streams.ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !connectionFailed(err) {
				s.refuseStream(conn, answers, "unusable replication stream frame: "+err.Error())
			}
			return err
		}
		if !signer.Admits(from) {
			// Admitted when the stream opened, as every request over
			// HTTP is: a node since removed from the cluster is not.
			s.refuseStream(conn, answers, "the node "+logsafe.ClipTo(from, 100)+" that opened this stream is no longer a node of the cluster")
			return cluster.ErrUnknownNode
		}
		req, err := replicate.ReadRequest(data)
		if err == nil {
			err = req.Validate(s.cfg.PartitionCount)
		}
		if err != nil {
			s.refuseStream(conn, answers, "unusable replication request: "+err.Error())
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), streamApplyTimeout)
		answer := replicate.Apply(ctx, s.writer, req)
		cancel()
		out = answers(out[:0], replicate.StreamAnswer, replicate.AppendResponse(nil, answer))
		_ = conn.SetWriteDeadline(time.Now().Add(streamApplyTimeout))
		if _, err := conn.Write(out); err != nil {
			return err
		}
		s.metrics.streamRequests.WithLabelValues("applied").Inc()
	}
}

// refuseStream tells the master why its stream ends, as far as it can.
func (s *Server) refuseStream(conn net.Conn, answers appendAnswer, why string) {
	s.metrics.streamRequests.WithLabelValues("refused").Inc()
	s.log.Warn("refused a replication stream", "reason", logsafe.ClipTo(why, 300))
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = conn.Write(answers(nil, replicate.StreamRefusal, []byte(logsafe.ClipTo(why, 1000))))
}

// connectionFailed reports whether err is the connection's failure (the
// master went away, a deadline passed) rather than a frame no master
// writes.
func connectionFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded)
}

// markSwitched records, for the request metrics, that the request was
// answered 101: the handler wrote that answer on the connection it took
// over, which the metrics' recorder did not see.
func markSwitched(w http.ResponseWriter) {
	for {
		if rec, ok := w.(*statusRecorder); ok {
			rec.status = http.StatusSwitchingProtocols
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}

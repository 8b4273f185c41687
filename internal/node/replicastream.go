package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/replicate"
)

// streamPeer is what a replication stream needs of the cluster besides
// Send: the key of a stream a signed request opened, and the links a
// test's faults cut, checked for every request a stream carries as Send
// checks them for every call (cluster.Cluster).
type streamPeer interface {
	peerSender
	StreamKey(req *http.Request) []byte
	LinkCut(peer, path string) error
	AnswerCut(peer string) error
}

// streamReuse is how long a stream may have been idle and still be used;
// an older one is closed and another opened. Shorter than the replica's
// own limit (api.streamIdle), so the master never writes to a stream the
// replica is closing.
const streamReuse = time.Minute

// streamMaxAge is how long a stream is used before it is replaced.
const streamMaxAge = 10 * time.Minute

// maxKeptFrameBuffer bounds the buffer a stream keeps for its next frame.
const maxKeptFrameBuffer = 1 << 20

var _ streamPeer = (*cluster.Cluster)(nil)

// errNoStream: the replica did not switch to a stream (an older version,
// or a connection that cannot carry one); send it requests one by one,
// and ask again after v1Retry. errNoStreamNow: it did not this time (it
// is shutting down, say); send this request on its own.
var (
	errNoStream    = errors.New("the replica takes no replication stream")
	errNoStreamNow = fmt.Errorf("%w now", errNoStream)
)

// replicaStream is an open stream to one replica: one request and its
// answer at a time, by whoever took it from replicaTransport.streams.
type replicaStream struct {
	conn   io.ReadWriteCloser
	r      *bufio.Reader
	seal   *replicate.StreamSealer
	open   *replicate.AnswerOpener // checks the replica's sealed answers
	buf    []byte
	used   time.Time
	opened time.Time
	// reused: a request went through it already (so it may have been
	// closed by the replica since).
	reused bool
}

// fresh reports whether s may carry a request at now.
func (s *replicaStream) fresh(now time.Time) bool {
	return now.Sub(s.used) < streamReuse && now.Sub(s.opened) < streamMaxAge
}

// sendStream sends body (a request in the binary form) over the stream to
// replica, opening one if there is none; errNoStream if the replica takes
// none now. A kept stream the replica closed meanwhile (it restarted, or
// shut down) is replaced once: a request it carried again is applied as a
// repeated request is (a replica takes what it holds already as held).
func (t *replicaTransport) sendStream(ctx context.Context, sp streamPeer, replica string, body []byte) (replicate.Response, error) {
	s, err := t.takeStream(ctx, sp, replica)
	if err != nil {
		return replicate.Response{}, err
	}
	// Checked once per request, as Send checks a call (a resend below is
	// the same request).
	if err := sp.LinkCut(replica, "/internal/v3/replicate"); err != nil {
		s.conn.Close()
		return replicate.Response{}, err
	}
	for attempt := 0; ; attempt++ {
		resp, err := s.exchange(ctx, body)
		if err == nil {
			err = sp.AnswerCut(replica)
		}
		if err == nil {
			s.used, s.reused = t.now(), true
			t.putStream(replica, s)
			return resp, nil
		}
		s.conn.Close()
		if attempt > 0 || !s.reused || !closedByPeer(err) || ctx.Err() != nil {
			return replicate.Response{}, fmt.Errorf("replica %s, over its replication stream: %w", replica, err)
		}
		if s, err = t.takeStream(ctx, sp, replica); err != nil {
			return replicate.Response{}, err
		}
	}
}

// closedByPeer reports whether err says the other end closed the
// connection.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// takeStream takes the open stream to replica for one request, or opens
// one. A stream is replaced once idle for streamReuse or open for
// streamMaxAge (so that the replica admits its sender again, with a fresh
// signature); opening one closes the streams to other replicas idle that
// long (a replica no longer sent anything).
func (t *replicaTransport) takeStream(ctx context.Context, sp streamPeer, replica string) (*replicaStream, error) {
	now := t.now()
	t.mu.Lock()
	if t.closed || t.stillUntil(t.noStream, replica) {
		// Closed, or the replica took no stream lately: one by one.
		t.mu.Unlock()
		return nil, errNoStreamNow
	}
	s := t.streams[replica]
	delete(t.streams, replica)
	if s != nil && s.fresh(now) {
		t.mu.Unlock()
		return s, nil
	}
	for other, o := range t.streams {
		if !o.fresh(now) {
			o.conn.Close()
			delete(t.streams, other)
		}
	}
	t.mu.Unlock()
	if s != nil {
		s.conn.Close()
	}
	s, err := t.openStream(ctx, sp, replica)
	if errors.Is(err, errNoStream) && !errors.Is(err, errNoStreamNow) {
		t.mu.Lock()
		t.noStream[replica] = t.now().Add(v1Retry)
		t.mu.Unlock()
	}
	return s, err
}

// putStream keeps s for replica's next request, unless the transport was
// closed or another stream was kept meanwhile.
func (t *replicaTransport) putStream(replica string, s *replicaStream) {
	if cap(s.buf) > maxKeptFrameBuffer {
		s.buf = nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.streams[replica] != nil {
		s.conn.Close()
		return
	}
	t.streams[replica] = s
}

// openStream opens a stream to replica with a signed request to switch
// protocols, to replicate.StreamProtocolSealed: the replica's answers are
// sealed as its answers over HTTP are (a replica of an older version
// answers 404, and is sent requests one by one, over HTTP, until it is
// asked again).
func (t *replicaTransport) openStream(ctx context.Context, sp streamPeer, replica string) (*replicaStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://peer/internal/v4/replicate-stream", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", replicate.StreamProtocolSealed)
	resp, err := sp.Send(replica, req, true)
	if err != nil {
		if errors.Is(err, cluster.ErrNotSent) || ctx.Err() != nil {
			return nil, err // the replica is out of reach: so is it one by one
		}
		// Sent, or tried, and failed: the transport may not carry an
		// upgrade at all (HTTP/2 refuses one).
		return nil, fmt.Errorf("%w: opening a stream to %s: %w", errNoStream, replica, err)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	switch {
	case resp.StatusCode == http.StatusSwitchingProtocols && ok:
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusNotImplemented || resp.StatusCode == http.StatusSwitchingProtocols:
		// A version without streams, or a connection that cannot carry
		// one.
		resp.Body.Close()
		return nil, fmt.Errorf("%w: replica %s answered %s", errNoStream, replica, resp.Status)
	default:
		resp.Body.Close()
		return nil, fmt.Errorf("%w: replica %s answered %s", errNoStreamNow, replica, resp.Status)
	}
	key := sp.StreamKey(req)
	if key == nil {
		conn.Close()
		return nil, fmt.Errorf("%w: no key to seal a stream to %s with", errNoStream, replica)
	}
	now := t.now()
	return &replicaStream{conn: conn, r: bufio.NewReader(conn), seal: replicate.NewStreamSealer(key), open: replicate.NewAnswerOpener(key), used: now, opened: now}, nil
}

// exchange writes one request frame and reads its answer; ctx ending
// closes the stream.
func (s *replicaStream) exchange(ctx context.Context, body []byte) (replicate.Response, error) {
	s.buf = s.seal.AppendFrame(s.buf[:0], body)
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	_, err := s.conn.Write(s.buf)
	var kind byte
	var payload []byte
	if err == nil {
		kind, payload, err = s.open.ReadFrame(s.r)
	}
	if !stop() {
		return replicate.Response{}, fmt.Errorf("no answer in time: %w", context.Cause(ctx))
	}
	if err != nil {
		return replicate.Response{}, err
	}
	if kind == replicate.StreamRefusal {
		return replicate.Response{}, fmt.Errorf("the replica refused the request and closed the stream: %s", logsafe.ClipTo(string(payload), 300))
	}
	out, err := replicate.ReadResponse(payload)
	if err != nil {
		return replicate.Response{}, fmt.Errorf("unreadable answer: %w", err)
	}
	return out, nil
}

// Close closes the streams this node opened to its replicas; requests
// after it go one by one. The node closes it as it shuts down.
func (t *replicaTransport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for replica, s := range t.streams {
		s.conn.Close()
		delete(t.streams, replica)
	}
}

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/shoal-db/shoal/api/wire"
)

// Retry is how a client tries a call again after a failure that proves
// the call was not applied (see the package doc for which those are).
type Retry struct {
	// Attempts is the most tries of one call, the first included: 1
	// never tries again.
	Attempts int
	// Backoff is the wait before the first retry; each later one waits
	// twice the one before, up to MaxBackoff. Each wait is drawn at random
	// between half and all of that (jitter), so that clients that failed
	// together do not come back together.
	Backoff, MaxBackoff time.Duration
	// MaxRetryAfter bounds the wait a 503's Retry-After asks for: a wait
	// is at least the smaller of the two.
	MaxRetryAfter time.Duration
}

// DefaultRetry is how a client of several nodes tries calls again: up to
// 5 tries, waiting 50 ms doubling up to 2 s (with jitter), or the
// Retry-After a node asks for up to 5 s. A failover takes about LEASE_TTL
// (3 s by default), and a node that knows no master waits up to 2 s
// before it answers 503: five tries see one through.
func DefaultRetry() Retry {
	return Retry{Attempts: 5, Backoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second, MaxRetryAfter: 5 * time.Second}
}

// withDefaults is r with its zero (or negative) fields taken from
// DefaultRetry, and MaxBackoff at least Backoff.
func (r Retry) withDefaults() Retry {
	d := DefaultRetry()
	if r.Attempts <= 0 {
		r.Attempts = d.Attempts
	}
	if r.Backoff <= 0 {
		r.Backoff = d.Backoff
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = d.MaxBackoff
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = d.MaxRetryAfter
	}
	r.MaxBackoff = max(r.MaxBackoff, r.Backoff)
	return r
}

// wait is how long to wait before retry n (1: the first) when the failure
// asked for retryAfter (0: nothing); r01 is a random number in [0, 1).
func (r Retry) wait(n int, retryAfter time.Duration, r01 float64) time.Duration {
	d := r.Backoff
	for i := 1; i < n && d < r.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.MaxBackoff)
	d = d/2 + time.Duration(r01*float64(d/2))
	return max(d, min(retryAfter, r.MaxRetryAfter))
}

// retryable decides whether a call that failed with err may be sent again
// (to any node): only when err proves it was not applied, or the call is
// a read. The safety argument, for a write:
//
//   - a 421 is answered by a node that is not the partition's master (or
//     holds no copy) before it does anything; Shoal answers it to a
//     client's request only for X-Read-Preference: local, and to a
//     forwarded write before or instead of committing it;
//   - a 503 of problem type unavailable is answered only before anything
//     is written (api: unavailable() in routing, storeProblem for
//     ErrNotMaster, ErrClosed and a store that does not answer a read, the
//     settling of a conditional refusal: "nothing was written"); a 503
//     after a commit has the problem type timeout (api: acknowledge,
//     storeProblem for ErrOutcomeUnknown and ErrLeaseLost), and so has
//     every 504;
//   - a transport error reaches here for a write only when the request was
//     not written (try wraps the others in *UnansweredError).
//
// A failed dial is tried again even when it timed out (a host that drops
// connection attempts: net's timeout error also matches
// context.DeadlineExceeded); send stops first when the caller's context
// has ended. Any other timeout or cancellation (http.Client's Timeout)
// ends the call. A read whose 2xx answer broke off is tried again; a
// write's is not (it was applied: ErrOutcomeUnknown).
func retryable(write bool, err error) bool {
	var he *HTTPError
	var ue *UnansweredError
	var be *bodyError
	var ae *AnswerError
	switch {
	case isDialError(err):
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &be):
		return !write
	case errors.As(err, &he):
		switch he.StatusCode {
		case http.StatusMisdirectedRequest:
			return true
		case http.StatusServiceUnavailable:
			return !write || he.problemType() == wire.TypeUnavailable
		}
		return false
	case errors.As(err, &ue), errors.As(err, &ae):
		return false
	}
	return true
}

// isWrite reports whether a request of method changes data.
func isWrite(method string) bool {
	return method != http.MethodGet && method != http.MethodHead
}

// call is one request of a document call.
type call struct {
	method, path, query string
	body                []byte
	headers             map[string]string
	want                []int // the statuses that are its answer
	// user is whose partition the call reaches ("": not routed);
	// toMaster says it goes to the partition's master, not to any copy.
	user     string
	toMaster bool
}

// sent is an answer of one of the wanted statuses, read whole.
type sent struct {
	status int
	header http.Header
	body   []byte
}

// send sends a document call and returns its answer, routing it among
// the client's nodes and trying it again as c.retry allows (see the
// package doc).
func (c *Client) send(ctx context.Context, k call) (sent, error) {
	var tried map[string]bool
	failed := "" // the node the last try failed at
	for attempt := 1; ; attempt++ {
		if c.routes.needsLookup(k.user, k.toMaster) {
			c.lookUp(ctx, k.user, k.toMaster, failed)
		}
		node := c.routes.choose(k.user, k.toMaster, tried)
		a, err := c.try(ctx, node, k)
		if err == nil {
			c.routes.answered(node)
			if isWrite(k.method) {
				c.routes.servedWrite(k.user, a.header.Get(headerServedBy))
			}
			return a, nil
		}
		c.learn(ctx, k, node, err)
		if attempt >= c.retry.Attempts || ctx.Err() != nil || !retryable(isWrite(k.method), err) {
			return sent{}, err
		}
		var he *HTTPError
		var after time.Duration
		if errors.As(err, &he) {
			after = he.RetryAfter
		}
		wait := c.retry.wait(attempt, after, rand.Float64())
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return sent{}, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sent{}, fmt.Errorf("%w; the last try: %w", ctx.Err(), err)
		}
		if tried == nil {
			tried = map[string]bool{}
		}
		tried[node], failed = true, node
	}
}

// learn takes what a failed try at node says of where the call should
// go: a 421's master, a node that does not answer, a placement to look up
// again.
func (c *Client) learn(ctx context.Context, k call, node string, err error) {
	var he *HTTPError
	switch {
	case errors.As(err, &he):
		c.routes.answered(node)
		if he.StatusCode == http.StatusMisdirectedRequest && he.Master != "" {
			c.routes.learnMaster(k.user, he.Master, he.Epoch)
			return
		}
	case ctx.Err() != nil:
		return
	default:
		var be *bodyError
		if !errors.As(err, &be) {
			c.routes.unreachable(node)
		}
	}
	if retryable(isWrite(k.method), err) {
		c.routes.failed(k.user)
	}
}

// try sends k to node once. An answer of a wanted status is returned;
// another is an *HTTPError; a transport error after a write's request was
// (or may have been) written is an *UnansweredError, any other is
// http.Client's error as it is.
func (c *Client) try(ctx context.Context, node string, k call) (sent, error) {
	u := node + k.path
	if k.query != "" {
		u += "?" + k.query
	}
	var r io.Reader
	if k.body != nil {
		r = bytes.NewReader(k.body)
	}
	// written says the request was written, in part or whole (an error
	// writing it counts too): from then on the node may have it.
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { written.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, k.method, u, r)
	if err != nil {
		return sent{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	if k.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for h, v := range k.headers {
		req.Header.Set(h, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if isWrite(k.method) && written.Load() && !isDialError(err) {
			return sent{}, &UnansweredError{Method: k.method, Path: k.path, NodeURL: node, Err: err}
		}
		return sent{}, err
	}
	defer resp.Body.Close()
	ok := false
	for _, w := range k.want {
		ok = ok || resp.StatusCode == w
	}
	if !ok {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		e := newHTTPError(k.method, k.path, resp, b)
		e.NodeURL = node
		return sent{}, e
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return sent{}, &bodyError{err: err, write: isWrite(k.method)}
	}
	return sent{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// isDialError reports whether err is a failure to connect: no request
// was written on the connection, and http.Transport only sends a write on
// a new connection after an earlier one wrote nothing of it.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

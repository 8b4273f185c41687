// Package client is the Go client of a Shoal node's HTTP API: the
// document calls (Create, Get, Put, Patch, Delete, Documents to iterate
// over a query's pages, Collections), with write concerns, read concerns,
// If-Match and consistency tokens (WriteOptions, ReadOptions), and the
// admin and health routes: GET /healthz, GET /readyz, GET /v1/cluster
// (membership, partition counts, voters, replication and the partitions
// moving), GET /v1/users/{user}/placement and GET /v1/admin/rollback.
//
// # One node or several
//
// New(baseURL, token) asks the one node it was given: that node forwards
// writes to the partition's master and reads to a copy that can answer,
// and the client never tries a call again (unless WithRetry says so).
//
// New(baseURL, token, WithNodes(others...)) knows several nodes, in the
// order given (put the nearest first), and routes the document calls
// itself. It looks up where a user's partition lives (GET
// /v1/users/{user}/placement, on one node after another until it knows
// the master's URL) and sends the user's writes, and reads without
// X-Read-Preference (or with master), straight to the partition's master,
// sparing the hop through another node; reads with preference nearest or
// local go to the first of its nodes that holds a copy (its first node
// while it knows of none). The placement names node ids: the client
// learns which id each of its URLs answers as from the X-Served-By header
// of that node's placement answer, so it only ever sends to the nodes it
// was given (a master it has no URL of is reached through another node,
// which forwards). What it learns is kept per partition (every placement
// answer gives the cluster's partition count, and wire.PartitionOf a
// user's partition). With an admin token, its first lookup asks for every
// partition's placement at once (GET /v1/placement), so a client writing
// as many users looks up a handful of times in all; otherwise it looks
// up once per partition (GET /v1/users/{user}/placement), and a placement
// found stale is looked up again for its partition alone; from nodes too
// old to say the count, per user. It is a hint, never trusted for
// correctness: a node that is not the master forwards the write, and the
// client then takes the master from the answer's X-Served-By; a 421 names
// the master to go to; an epoch older than the one known is ignored. The
// admin and health calls (Health, Ready, Cluster, Placement, Rollbacks)
// always ask the base URL, once: they ask about that node.
//
// # Retries
//
// A client of several nodes tries a call again (DefaultRetry: up to 5
// tries, after 50 ms doubling up to 2 s, each wait drawn between half and
// all of it, and at least the Retry-After a 503 asks for, up to 5 s;
// WithRetry changes it), on another node when it has one and after
// looking the placement up again, only after a failure that proves the
// call was not applied:
//
//   - a connection that failed before the request was written (a refused
//     or failed dial, one that timed out included, a TLS handshake): the
//     node never saw it, and the node is skipped for a few seconds by
//     every call;
//   - 421 Misdirected Request: the node serves no such request (it is not
//     the master, or holds no copy for a local read) and did nothing;
//   - 503 with the problem type urn:shoal:problem:unavailable: the node
//     answers it only before anything is written (no master reachable
//     within its routing wait, the partition changing master, the node
//     shutting down, a conditional write whose refusal might not stand).
//
// A read is also tried again after any other 503, after a connection
// that broke once the request was written, and after a 200 whose body
// broke off: reading twice changes nothing. A write never is, whatever
// its method, once its outcome is unknown: an answer 504 (the write
// concern was not confirmed in time: the write is applied on the master,
// and not undone), a 503 of problem type timeout (the master's lease ran
// out after the write was committed there, so it may or may not
// survive), any other 5xx, a connection that broke, or a context that
// ended, after the request was written (*UnansweredError), and a success
// whose answer broke off while it was read (the write was applied; what
// was answered is lost). errors.Is(err, ErrOutcomeUnknown) tells these
// apart. Sending such a write again is not safe in general: a POST
// without _id would create a second document; a PUT would overwrite a
// later write of another client; a conditional PUT or PATCH (If-Match)
// would answer 412 and a DELETE 404 when the first one was applied,
// blaming the caller's own write; a POST with an _id would answer 409 for
// the same reason. Read the document to find out, and then write again
// if need be (with If-Match on the version read, so that a write that did
// land is not applied twice). The same rule makes every write, a POST
// without _id included, safe to try again after the failures above.
//
// Whether a request was written is what http.Client says: a failed dial
// (net.OpError "dial") or no request written at all (httptrace's
// WroteRequest never called) proves it; http.Transport itself sends a
// write again only when nothing of it was written. A RoundTripper of one's
// own (WithHTTPClient) must keep that rule.
//
// Every retry, and every wait between tries, is bounded by the call's
// context: a wait that would end past its deadline is not begun, and the
// last failure is returned instead.
//
// # Errors
//
// Answers are decoded into the server's own types (api.ClusterAnswer,
// api.PlacementView, api.RollbackList, api.NodeStatus), so the client and
// the node cannot drift apart. An answer other than the one expected is an
// *HTTPError carrying the status code, the node's problem details, the
// node that answered, and on a 421 the master it names (errors.Is tells
// ErrUnauthorized, ErrForbidden, ErrNotFound, ErrConflict,
// ErrPreconditionFailed, ErrMisdirected, ErrUnavailable, ErrTimeout and
// ErrOutcomeUnknown apart); a 200 that is not the route's JSON is an
// *AnswerError; a network failure is http.Client's own error (wrapped in
// an *UnansweredError for a write that may have been sent), so
// errors.Is(err, syscall.ECONNREFUSED) and errors.Is(err,
// context.DeadlineExceeded) work on it. A call that fails after retries
// returns its last failure. Timeouts come from the context of each call.
package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Client asks one node, or routes its document calls among several (see
// WithNodes). It is safe for concurrent use.
type Client struct {
	base     string
	token    string
	http     *http.Client
	readyURL string
	// nodes is every node's base URL, base first; retry how calls are
	// tried again; routes what the client learnt of where users' data
	// lives.
	nodes    []string
	retry    Retry
	retrySet bool
	routes   *routes
}

// Option sets up a Client.
type Option func(*Client)

// WithHTTPClient sends the requests through hc (default
// http.DefaultClient): for a transport of one's own, or a timeout that
// bounds every call on top of the context's.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// ReadyURL makes Ready ask url instead of the base URL's /readyz: for a
// readiness URL given whole (`shoal health --url`).
func ReadyURL(url string) Option { return func(c *Client) { c.readyURL = url } }

// WithNodes gives the client more nodes of the cluster (base URLs, as
// New's), after the base URL, in the order to prefer them: the client
// then routes document calls to the partition's master (or, for reads
// with preference nearest or local, to the first node that holds a copy),
// skips nodes that do not answer, and tries calls again by DefaultRetry
// (unless WithRetry says otherwise). A URL given twice counts once.
func WithNodes(urls ...string) Option {
	return func(c *Client) {
		for _, u := range urls {
			if u = strings.TrimRight(u, "/"); u != "" && !slices.Contains(c.nodes, u) {
				c.nodes = append(c.nodes, u)
			}
		}
	}
}

// WithRetry sets how calls are tried again (see the package doc for
// which failures are); fields left zero take DefaultRetry's values, and
// Attempts 1 never tries again. Without it, a client of one node never
// tries again, and one of several uses DefaultRetry.
func WithRetry(r Retry) Option {
	return func(c *Client) { c.retry, c.retrySet = r.withDefaults(), true }
}

// New returns a client of the node at baseURL (scheme, host and any path
// prefix; trailing slashes are dropped) that sends token as a bearer token
// (empty: no Authorization header; the admin routes want an admin token).
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: http.DefaultClient, nodes: []string{}}
	for _, o := range opts {
		o(c)
	}
	c.nodes = append([]string{c.base}, slices.DeleteFunc(c.nodes, func(u string) bool { return u == c.base })...)
	if c.readyURL == "" {
		c.readyURL = c.base + "/readyz"
	}
	if !c.retrySet {
		c.retry = Retry{Attempts: 1}
		if len(c.nodes) > 1 {
			c.retry = DefaultRetry()
		}
	}
	c.routes = newRoutes(c.nodes, time.Now)
	return c
}

// BaseURL is the node's URL the client asks (the first of its nodes).
func (c *Client) BaseURL() string { return c.base }

// Nodes lists the base URLs of the nodes the client knows, the base URL
// first.
func (c *Client) Nodes() []string { return slices.Clone(c.nodes) }

// Bounds on what is read of an answer: a whole answer (a rollback list of
// 10000 documents), and an error's body.
const (
	maxAnswerBytes = 64 << 20
	maxErrorBytes  = 64 << 10
	keptErrorBytes = 4 << 10
)

// answer is a 200 answer, read whole.
type answer struct {
	body        []byte
	contentType string
}

// get asks path (appended to the base URL; query is its query string,
// "" for none) and returns the 200 answer. Any other status is an
// *HTTPError; a failure to ask is http.Client's error as it is.
func (c *Client) get(ctx context.Context, path, query string) (answer, error) {
	u := c.base + path
	if query != "" {
		u += "?" + query
	}
	return c.getURL(ctx, u, path)
}

// getURL is get of the whole URL u; path names it in errors.
func (c *Client) getURL(ctx context.Context, u, path string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return answer{}, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		e := newHTTPError(http.MethodGet, path, resp, body)
		e.NodeURL = c.base
		return answer{}, e
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return answer{}, &bodyError{err: err}
	}
	return answer{body: body, contentType: resp.Header.Get("Content-Type")}, nil
}

// bodyError is a 2xx answer whose body broke off. For a write (applied:
// the node answered its success) it matches ErrOutcomeUnknown: the caller
// cannot tell what it was answered, and reads the document to find out.
type bodyError struct {
	err   error
	write bool
}

func (e *bodyError) Error() string {
	if e.write {
		return "the write was answered with success, but reading the answer failed (read the document to see its state): " + e.err.Error()
	}
	return "reading the answer: " + e.err.Error()
}
func (e *bodyError) Unwrap() error { return e.err }

// Is matches ErrOutcomeUnknown for a write.
func (e *bodyError) Is(target error) bool { return e.write && target == ErrOutcomeUnknown }

// decode decodes a 200 answer into v; what names the JSON expected, for
// the error.
func (a answer) decode(path, what string, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return &AnswerError{Method: http.MethodGet, Path: path, What: what, ContentType: a.contentType, Err: err}
	}
	return nil
}

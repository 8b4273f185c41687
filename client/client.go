// Package client is the Go client of a Shoal node's HTTP API: the
// document calls (Create, Get, Put, Patch, Delete, Documents to iterate
// over a query's pages, Collections), with write concerns, read concerns,
// If-Match and consistency tokens (WriteOptions, ReadOptions), and the
// admin and health routes: GET /healthz, GET /readyz, GET /v1/cluster
// (membership, partition counts, voters, replication and the partitions
// moving), GET /v1/users/{user}/placement and GET /v1/admin/rollback.
//
// A client asks the one node it was given; that node forwards writes to
// the partition's master and reads to a copy that can answer. It does not
// retry: a 503 (ErrUnavailable, no master reachable right now, with
// Retry-After) and a 504 (ErrTimeout: the write may or may not be applied)
// are the caller's to retry, as only the caller knows whether its write
// may be applied twice.
//
// Answers are decoded into the server's own types (api.ClusterAnswer,
// api.PlacementView, api.RollbackList, api.NodeStatus), so the client and
// the node cannot drift apart. An answer other than the one expected is an
// *HTTPError carrying the status code and the node's problem details
// (errors.Is tells ErrUnauthorized, ErrForbidden, ErrNotFound and
// ErrUnavailable apart); a 200 that is not the route's JSON is an
// *AnswerError; a network failure is http.Client's own error, so
// errors.Is(err, syscall.ECONNREFUSED) and errors.Is(err,
// context.DeadlineExceeded) work on it. Timeouts come from the context
// of each call.
package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Client asks one node. It is safe for concurrent use.
type Client struct {
	base     string
	token    string
	http     *http.Client
	readyURL string
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

// New returns a client of the node at baseURL (scheme, host and any path
// prefix; trailing slashes are dropped) that sends token as a bearer token
// (empty: no Authorization header; the admin routes want an admin token).
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	if c.readyURL == "" {
		c.readyURL = c.base + "/readyz"
	}
	return c
}

// BaseURL is the node's URL the client asks.
func (c *Client) BaseURL() string { return c.base }

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
		return answer{}, newHTTPError(http.MethodGet, path, resp, body)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return answer{}, &bodyError{err}
	}
	return answer{body: body, contentType: resp.Header.Get("Content-Type")}, nil
}

// bodyError is a 200 answer whose body broke off.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the answer: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// decode decodes a 200 answer into v; what names the JSON expected, for
// the error.
func (a answer) decode(path, what string, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return &AnswerError{Method: http.MethodGet, Path: path, What: what, ContentType: a.contentType, Err: err}
	}
	return nil
}

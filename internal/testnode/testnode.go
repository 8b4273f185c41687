// Package testnode starts real Shoal nodes for tests: each with its own
// embedded store in a temporary directory, serving real HTTP on loopback.
package testnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/node"
)

// Secret is the AUTH_SECRET of every test node.
const Secret = "test-secret-0123456789abcdef"

// Node is a running node under test.
type Node struct {
	*node.Node
	Config config.Config
	t      testing.TB
	closed bool
}

// Config returns a configuration for a node on loopback with its data under
// dir.
func Config(dir string) config.Config {
	c := config.Defaults()
	c.NodeID = "test-node"
	c.HTTPAddr = "127.0.0.1:0"
	c.DataDir = dir
	c.AuthSecret = Secret
	return c
}

// Start starts a node with cfg and stops it when the test ends.
func Start(t testing.TB, cfg config.Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, Logger(t))
	if err != nil {
		t.Fatalf("starting node: %v", err)
	}
	tn := &Node{Node: n, Config: cfg, t: t}
	t.Cleanup(tn.Stop)
	return tn
}

// WaitReady waits until the node answers /readyz with 200: its lease
// voter's startup wait is over and it knows a master for every partition.
func (n *Node) WaitReady() {
	n.t.Helper()
	Eventually(n.t, 30*time.Second, n.Config.NodeID+" answers /readyz with 200", func() (bool, string) {
		r := n.Client("").Do("GET", "/readyz", nil)
		return r.Status == 200, fmt.Sprintf("%d %s", r.Status, r.Body)
	})
}

// StartNew starts a node on a fresh temporary directory.
func StartNew(t testing.TB) *Node {
	return Start(t, Config(t.TempDir()))
}

// Stop closes the node (once).
func (n *Node) Stop() {
	if n.closed {
		return
	}
	n.closed = true
	if err := n.Close(context.Background()); err != nil {
		n.t.Errorf("closing node: %v", err)
	}
}

// Logger sends a node's logs to the test log at warn level and above, or
// from the level SHOAL_TEST_LOG names (debug or info).
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	switch os.Getenv("SHOAL_TEST_LOG") {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	}
	w := &testWriter{t: t}
	// Some goroutines (memberlist's) may still log a line after their owner
	// stopped; once the test is over those lines are dropped, since
	// testing panics on a log after the end.
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Token mints a token for user valid for an hour, for the default
// TOKEN_AUDIENCE.
func Token(t testing.TB, user string) string {
	t.Helper()
	tok, err := api.MintToken([]byte(Secret), api.TokenSpec{User: user, Audience: config.Defaults().TokenAudience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// AdminToken mints an admin token valid for an hour, for the default
// TOKEN_AUDIENCE.
func AdminToken(t testing.TB) string {
	t.Helper()
	tok, err := api.MintToken([]byte(Secret), api.TokenSpec{Admin: true, Audience: config.Defaults().TokenAudience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Client talks to one node as one principal.
type Client struct {
	t     testing.TB
	Base  string
	Token string
	HTTP  *http.Client
}

// Client returns a client of n using token.
func (n *Node) Client(token string) *Client { return NewClient(n.t, n.URL(), token) }

// NewClient returns a client of the node at base using token.
func NewClient(t testing.TB, base, token string) *Client {
	return &Client{t: t, Base: base, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// API is the typed client of the node's admin and health routes
// (client.Client), through c's HTTP client and token: tests ask
// GET /v1/cluster, placements and rollback lists with it, and keep Do for
// documents and for answers they check byte by byte.
func (c *Client) API() *client.Client {
	return client.New(c.Base, c.Token, client.WithHTTPClient(c.HTTP))
}

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

// Do sends a request with an optional body (string, []byte, or a value to
// encode as JSON) and extra headers as key, value pairs.
func (c *Client) Do(method, path string, body any, headers ...string) *Response {
	c.t.Helper()
	r, err := c.TryDo(method, path, body, headers...)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// TryDo is Do returning transport errors instead of failing the test
// (safe from any goroutine).
func (c *Client) TryDo(method, path string, body any, headers ...string) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

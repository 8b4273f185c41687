package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Headers of a signed node-to-node request. HeaderNode is the sending node,
// HeaderTo the node the request is addressed to; both are signed. Each node
// keeps its own nonce cache, so without a signed destination a request
// captured on its way to one node could be replayed to another within the
// window; a node refuses a request addressed to any node but itself.
const (
	HeaderNode      = "X-Shoal-Node"
	HeaderTo        = "X-Shoal-To"
	HeaderTime      = "X-Shoal-Time"
	HeaderNonce     = "X-Shoal-Nonce"
	HeaderSignature = "X-Shoal-Signature"
)

// MaxInternalBody bounds the body of an internal request.
const MaxInternalBody = 64 << 20

// deriveKey makes a key for one purpose from the cluster secret, so the
// gossip key and the signing key are unrelated.
func deriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("shoal/" + purpose))
	return m.Sum(nil)
}

// Signer signs and verifies node-to-node HTTP requests with a key derived
// from CLUSTER_SECRET: an HMAC-SHA256 over the method, path and query, a hash
// of the body, a timestamp, a nonce, the sending node and the destination
// node. Verification refuses signatures older or newer than the skew window,
// any nonce seen within it, and requests addressed to another node.
type Signer struct {
	key    []byte
	node   string
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	seen   map[string]time.Time // nonce -> when it can be forgotten
	pruned time.Time
}

// NewSigner creates the signer of node for the cluster secret: it signs as
// node and admits only requests addressed to node. now is the
// clock (time.Now in production).
func NewSigner(secret []byte, node string, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{key: deriveKey(secret, "internal-http"), node: node, window: 30 * time.Second, now: now, seen: map[string]time.Time{}}
}

func (s *Signer) mac(method, target string, body []byte, ts, nonce, from, to string) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "shoal-internal-v2\n%s\n%s\n%x\n%s\n%s\n%s\n%s", method, target, sum, ts, nonce, from, to)
	return m.Sum(nil)
}

func requestTarget(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return r.URL.EscapedPath()
	}
	return r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// Sign adds the signature headers to req, whose body is body, addressed to
// the node to: only that node will accept it.
func (s *Signer) Sign(req *http.Request, body []byte, to string) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic("cluster: no randomness for a nonce: " + err.Error())
	}
	nonce := hex.EncodeToString(n[:])
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	req.Header.Set(HeaderNode, s.node)
	req.Header.Set(HeaderTo, to)
	req.Header.Set(HeaderTime, ts)
	req.Header.Set(HeaderNonce, nonce)
	req.Header.Set(HeaderSignature, hex.EncodeToString(s.mac(req.Method, requestTarget(req), body, ts, nonce, s.node, to)))
}

// Errors of Verify.
var (
	ErrUnsigned     = errors.New("the request is not signed (it needs the headers " + HeaderNode + ", " + HeaderTo + ", " + HeaderTime + ", " + HeaderNonce + " and " + HeaderSignature + ")")
	ErrBadSignature = errors.New("the signature does not verify (another CLUSTER_SECRET, or the request was altered)")
	ErrStale        = errors.New("the signature's timestamp is outside the allowed clock skew")
	ErrReplayed     = errors.New("the request was already received once (replay)")
	ErrMisdirected  = errors.New("the request is addressed to another node")
)

// Verify checks the signature of r with body and that r is addressed to
// this signer's node; it returns the signing node.
func (s *Signer) Verify(r *http.Request, body []byte) (string, error) {
	node, to, ts, nonce, sig := r.Header.Get(HeaderNode), r.Header.Get(HeaderTo), r.Header.Get(HeaderTime), r.Header.Get(HeaderNonce), r.Header.Get(HeaderSignature)
	if node == "" || to == "" || ts == "" || nonce == "" || sig == "" {
		return "", ErrUnsigned
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(r.Method, requestTarget(r), body, ts, nonce, node, to)) {
		return node, ErrBadSignature
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return node, ErrBadSignature
	}
	if to != s.node {
		return node, fmt.Errorf("%w: it was signed for node %q and reached node %q; unless it was replayed, "+
			"the peer list of node %q gives %q a URL that reaches %q: fix that URL", ErrMisdirected, to, s.node, node, to, s.node)
	}
	now := s.now()
	if d := now.Sub(time.UnixMilli(ms)); d > s.window || d < -s.window {
		return node, ErrStale
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.pruned) > s.window {
		for k, until := range s.seen {
			if now.After(until) {
				delete(s.seen, k)
			}
		}
		s.pruned = now
	}
	key := node + "/" + nonce
	if _, dup := s.seen[key]; dup {
		return node, ErrReplayed
	}
	// A nonce is remembered until its timestamp leaves the window.
	s.seen[key] = time.UnixMilli(ms).Add(s.window)
	return node, nil
}

// Middleware admits only requests signed by a node of the cluster and
// addressed to this one. Anything
// else gets 401 and a log line. Client bearer tokens are never looked at.
func (s *Signer) Middleware(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxInternalBody))
		if err != nil {
			http.Error(w, "internal request body unreadable", http.StatusBadRequest)
			return
		}
		node, err := s.Verify(r, body)
		if err != nil {
			log.Warn("internal request refused", "from", r.RemoteAddr, "claimed_node", node, "to", r.Header.Get(HeaderTo),
				"path", r.URL.Path, "reason", err)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"type":"urn:shoal:problem:unauthorized","title":"Unauthorized","status":401,"detail":%q}`+"\n",
				"internal endpoints answer only requests signed with the cluster secret and addressed to this node: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

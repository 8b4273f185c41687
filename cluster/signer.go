package cluster

import (
	"bytes"
	"context"
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

	"github.com/shoal-db/shoal/internal/logsafe"
	"github.com/shoal-db/shoal/internal/readall"
)

// Headers of a signed node-to-node request. HeaderNode is the sending node,
// HeaderTo the node the request is addressed to; both are signed. Each node
// keeps its own nonce cache, so without a signed destination a request
// captured on its way to one node could be replayed to another within the
// window; a node refuses a request addressed to any node but itself.
//
// A request carries two signatures. HeaderHeadSignature covers everything
// but the body (method, target, declared Content-Length, time, nonce,
// sender, destination): the receiver checks it, and every other header,
// before it reads a byte of the body, so a request without the cluster
// secret never gets its body buffered. HeaderSignature covers the same and
// a hash of the body, and is checked once the declared length is read.
const (
	HeaderNode          = "X-Shoal-Node"
	HeaderTo            = "X-Shoal-To"
	HeaderTime          = "X-Shoal-Time"
	HeaderNonce         = "X-Shoal-Nonce"
	HeaderSignature     = "X-Shoal-Signature"
	HeaderHeadSignature = "X-Shoal-Head-Signature"
)

// MaxInternalBody bounds the body of an internal request. The largest are
// replication batches (replicate.DefaultMaxBatchBytes, 8 MiB as estimated
// before encoding); the rest is margin for the estimate.
const MaxInternalBody = 64 << 20

// Sizes of the signature headers' values, in bytes once hex-decoded.
const (
	nonceBytes = 16
	macBytes   = sha256.Size
)

// Refused internal requests are logged at most refusalLogMax times per
// refusalLogWindow; the next line logged says how many were held back.
const (
	refusalLogMax    = 10
	refusalLogWindow = time.Minute
)

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
// node (and a second one over all of it but the body). Verification
// refuses signatures older or newer than the skew window, any nonce seen
// within it, requests addressed to another node, and senders that are not
// nodes of the cluster.
type Signer struct {
	key    []byte
	node   string
	window time.Duration
	now    func() time.Time
	known  func(id string) bool

	mu     sync.Mutex
	seen   map[string]time.Time // nonce -> when it can be forgotten
	pruned time.Time

	answerMACs sync.Pool // HMACs under key, for answerMAC
}

// NewSigner creates the signer of node for the cluster secret: it signs as
// node and admits only requests addressed to node, from a sender for which
// known reports true (the peers of the list and the nodes gossip knows;
// nil: no sender is admitted, the signer only signs) and that is not node
// itself. now is the clock (time.Now if nil).
func NewSigner(secret []byte, node string, now func() time.Time, known func(id string) bool) *Signer {
	if now == nil {
		now = time.Now
	}
	if known == nil {
		known = func(string) bool { return false }
	}
	s := &Signer{key: deriveKey(secret, "internal-http"), node: node, window: 30 * time.Second, now: now, known: known,
		seen: map[string]time.Time{}}
	s.answerMACs.New = func() any { return hmac.New(sha256.New, s.key) }
	return s
}

func (s *Signer) mac(method, target string, body []byte, ts, nonce, from, to string) []byte {
	sum := sha256.Sum256(body)
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "shoal-internal-v2\n%s\n%s\n%x\n%s\n%s\n%s\n%s", method, target, sum, ts, nonce, from, to)
	return m.Sum(nil)
}

func (s *Signer) headMAC(method, target string, length int64, ts, nonce, from, to string) []byte {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "shoal-internal-head-v1\n%s\n%s\n%d\n%s\n%s\n%s\n%s", method, target, length, ts, nonce, from, to)
	return m.Sum(nil)
}

func requestTarget(r *http.Request) string {
	if r.URL.RawQuery == "" {
		return r.URL.EscapedPath()
	}
	return r.URL.EscapedPath() + "?" + r.URL.RawQuery
}

// Sign adds the signature headers to req, whose body is body, addressed to
// the node to: only that node will accept it. It sets req.ContentLength to
// the length of body, which is signed.
func (s *Signer) Sign(req *http.Request, body []byte, to string) {
	var n [nonceBytes]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic("cluster: no randomness for a nonce: " + err.Error())
	}
	nonce := hex.EncodeToString(n[:])
	ts := strconv.FormatInt(s.now().UnixMilli(), 10)
	req.ContentLength = int64(len(body))
	target := requestTarget(req)
	req.Header.Set(HeaderNode, s.node)
	req.Header.Set(HeaderTo, to)
	req.Header.Set(HeaderTime, ts)
	req.Header.Set(HeaderNonce, nonce)
	req.Header.Set(HeaderHeadSignature, hex.EncodeToString(s.headMAC(req.Method, target, req.ContentLength, ts, nonce, s.node, to)))
	req.Header.Set(HeaderSignature, hex.EncodeToString(s.mac(req.Method, target, body, ts, nonce, s.node, to)))
}

// StreamKey is the key that authenticates the frames of a stream opened
// by r (replicate.StreamProtocol): a request this signer signed (Sign),
// on the node that opens the stream, or one it verified, on the node that
// serves it. It is derived from the signing key and r's nonce, sender and
// destination, which r's signatures cover: only the two nodes can derive
// it, and every stream has its own (a nonce is accepted once).
func (s *Signer) StreamKey(r *http.Request) []byte {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "shoal-stream-v1\n%s\n%s\n%s", r.Header.Get(HeaderNonce), r.Header.Get(HeaderNode), r.Header.Get(HeaderTo))
	return m.Sum(nil)
}

// Admits reports whether calls from node are still admitted: it is a node
// of the cluster and not this one. A stream, admitted once when it opened,
// asks it again for every request it carries.
func (s *Signer) Admits(node string) bool { return node != s.node && s.known(node) }

// Errors of Verify.
var (
	ErrUnsigned     = errors.New("the request is not signed (it needs one each of the headers " + HeaderNode + ", " + HeaderTo + ", " + HeaderTime + ", " + HeaderNonce + ", " + HeaderHeadSignature + " and " + HeaderSignature + ")")
	ErrBadSignature = errors.New("the signature does not verify (another CLUSTER_SECRET, or the request was altered)")
	ErrStale        = errors.New("the signature's timestamp is outside the allowed clock skew")
	ErrReplayed     = errors.New("the request was already received once (replay)")
	ErrMisdirected  = errors.New("the request is addressed to another node")
	ErrUnknownNode  = errors.New("the sending node is not a node of this cluster (neither in this node's peer list nor known from gossip)")
	// ErrLengthRequired and ErrTooLarge refuse a body whose length is not
	// declared, or is declared over MaxInternalBody.
	ErrLengthRequired = errors.New("an internal request must declare its body's Content-Length")
	ErrTooLarge       = fmt.Errorf("an internal request body may not be larger than %d bytes", MaxInternalBody)
)

// claim is what a request's headers say; admit has checked all of it but
// the body signature.
type claim struct {
	node, to, ts, nonce string
	ms                  int64
	sig                 []byte
}

// singleValue is the one value of header name in h, "" if it is missing
// or repeated.
func singleValue(h http.Header, name string) string {
	if v := h.Values(name); len(v) == 1 {
		return v[0]
	}
	return ""
}

// hexHeader decodes a header value of exactly n bytes in hex.
func hexHeader(v string, n int) ([]byte, bool) {
	if len(v) != 2*n {
		return nil, false
	}
	b, err := hex.DecodeString(v)
	return b, err == nil
}

// admit checks everything about r that does not need its body, cheapest
// first: the headers' presence and form, the declared length, the time
// window, the destination, the sender, the head signature and the nonce
// (not recorded: only a request whose body verifies is remembered). The
// error it returns names only values it has checked the size of.
func (s *Signer) admit(r *http.Request) (claim, error) {
	var c claim
	c.node, c.to, c.ts, c.nonce = singleValue(r.Header, HeaderNode), singleValue(r.Header, HeaderTo), singleValue(r.Header, HeaderTime), singleValue(r.Header, HeaderNonce)
	head, sig := singleValue(r.Header, HeaderHeadSignature), singleValue(r.Header, HeaderSignature)
	if c.node == "" || c.to == "" || c.ts == "" || c.nonce == "" || head == "" || sig == "" {
		return c, ErrUnsigned
	}
	if err := ValidNodeID(c.node); err != nil {
		c.node = ""
		return c, fmt.Errorf("%w: %s is not a node id", ErrUnsigned, HeaderNode)
	}
	if err := ValidNodeID(c.to); err != nil {
		return c, fmt.Errorf("%w: %s is not a node id", ErrUnsigned, HeaderTo)
	}
	var err error
	if len(c.ts) > 19 {
		return c, fmt.Errorf("%w: %s is not a time in milliseconds", ErrUnsigned, HeaderTime)
	}
	if c.ms, err = strconv.ParseInt(c.ts, 10, 64); err != nil {
		return c, fmt.Errorf("%w: %s is not a time in milliseconds", ErrUnsigned, HeaderTime)
	}
	if _, ok := hexHeader(c.nonce, nonceBytes); !ok {
		return c, fmt.Errorf("%w: %s is not %d bytes in hex", ErrUnsigned, HeaderNonce, nonceBytes)
	}
	headMAC, ok := hexHeader(head, macBytes)
	if !ok {
		return c, fmt.Errorf("%w: %s is not %d bytes in hex", ErrUnsigned, HeaderHeadSignature, macBytes)
	}
	if c.sig, ok = hexHeader(sig, macBytes); !ok {
		return c, fmt.Errorf("%w: %s is not %d bytes in hex", ErrUnsigned, HeaderSignature, macBytes)
	}
	switch {
	case r.ContentLength < 0:
		return c, ErrLengthRequired
	case r.ContentLength > MaxInternalBody:
		return c, ErrTooLarge
	}
	now := s.now()
	if d := now.Sub(time.UnixMilli(c.ms)); d > s.window || d < -s.window {
		return c, ErrStale
	}
	if c.to != s.node {
		return c, fmt.Errorf("%w: it was signed for node %q and reached node %q; unless it was replayed, "+
			"the peer list of node %q gives %q a URL that reaches %q: fix that URL", ErrMisdirected, c.to, s.node, c.node, c.to, s.node)
	}
	if c.node == s.node || !s.known(c.node) {
		return c, fmt.Errorf("%w: %q", ErrUnknownNode, c.node)
	}
	if !hmac.Equal(headMAC, s.headMAC(r.Method, requestTarget(r), r.ContentLength, c.ts, c.nonce, c.node, c.to)) {
		return c, ErrBadSignature
	}
	// The head verifies: its nonce is spent now, before the body is read,
	// so a captured head sent again with another body costs one body read,
	// not one per copy. (A request whose body then fails is not retried
	// with the same nonce: every call signs afresh.)
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
	key := c.node + "/" + c.nonce
	if _, dup := s.seen[key]; dup {
		return c, ErrReplayed
	}
	// A nonce is remembered until its timestamp leaves the window; the
	// window check above used the same now, so it cannot be pruned early.
	s.seen[key] = time.UnixMilli(c.ms).Add(s.window)
	return c, nil
}

// accept checks the body signature of a request admit let through (and
// spent the nonce of), whose body of the declared length is body.
func (s *Signer) accept(r *http.Request, c claim, body []byte) error {
	if int64(len(body)) != r.ContentLength ||
		!hmac.Equal(c.sig, s.mac(r.Method, requestTarget(r), body, c.ts, c.nonce, c.node, c.to)) {
		return ErrBadSignature
	}
	return nil
}

// Verify checks the signatures of r with body (whose length r must
// declare), that r is addressed to this signer's node and that its sender
// is a node of the cluster; it returns the signing node ("" when the
// sender's id was not even well formed).
func (s *Signer) Verify(r *http.Request, body []byte) (string, error) {
	c, err := s.admit(r)
	if err == nil {
		err = s.accept(r, c, body)
	}
	return c.node, err
}

// ErrBodyUnreadable: a request whose headers verified could not be read
// to its declared length.
var ErrBodyUnreadable = errors.New("the body of the declared length could not be read")

// VerifyRequest checks r as Verify does, but reads its body (at most max
// bytes, the length r declares) only once everything else about it is
// checked (as Middleware does): a request without the cluster secret gets
// no body read. Once read, r.Body reads the body again, whether it
// verifies or not. It returns the signing node.
func (s *Signer) VerifyRequest(r *http.Request, max int64) (string, error) {
	c, err := s.admit(r)
	if err != nil {
		return c.node, err
	}
	if r.ContentLength > max {
		return c.node, fmt.Errorf("%w: %d bytes declared, more than %d", ErrTooLarge, r.ContentLength, max)
	}
	body, err := readall.Sized(io.LimitReader(r.Body, r.ContentLength), r.ContentLength)
	if err == nil && int64(len(body)) < r.ContentLength {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return c.node, fmt.Errorf("%w: %w", ErrBodyUnreadable, err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return c.node, s.accept(r, c, body)
}

type signedByKey struct{}

// SignedBy is the node that signed the request whose context is ctx, as
// Middleware verified it ("" if it did not).
func SignedBy(ctx context.Context) string {
	n, _ := ctx.Value(signedByKey{}).(string)
	return n
}

// Middleware admits only requests signed by a node of the cluster and
// addressed to this one. It checks every header before it reads the body,
// then reads exactly the declared length and checks the body's signature.
// Anything else is refused (401, or 411/413 for a missing or excessive
// length) with a log line; the log lines are rate-limited and what they
// quote of the request is clipped. Client bearer tokens are never looked
// at. The handler finds the sender with SignedBy. The answer to a request
// admitted is sealed (SealAnswers); a refusal is not.
func (s *Signer) Middleware(log *slog.Logger, next http.Handler) http.Handler {
	logs := logsafe.NewLimiter(refusalLogMax, refusalLogWindow, s.now)
	refuse := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		if ok, suppressed := logs.Allow(); ok {
			args := []any{"from", logsafe.Clip(r.RemoteAddr), "claimed_node", logsafe.Clip(r.Header.Get(HeaderNode)), "to", logsafe.Clip(r.Header.Get(HeaderTo)),
				"path", logsafe.Clip(r.URL.Path), "status", status, "reason", err}
			if suppressed > 0 {
				args = append(args, "suppressed", suppressed)
			}
			log.Warn("internal request refused", args...)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Connection", "close") // the unread body is not worth draining
		w.WriteHeader(status)
		title, detail := http.StatusText(status), "internal endpoints answer only requests signed with the cluster secret and addressed to this node: "+err.Error()
		typ := "urn:shoal:problem:unauthorized"
		switch status {
		case http.StatusLengthRequired, http.StatusRequestEntityTooLarge, http.StatusBadRequest, http.StatusRequestTimeout:
			typ, detail = "urn:shoal:problem:invalid-internal-request", err.Error()
		}
		fmt.Fprintf(w, `{"type":%q,"title":%q,"status":%d,"detail":%q}`+"\n", typ, title, status, detail)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.admit(r)
		if err != nil {
			status := http.StatusUnauthorized
			switch {
			case errors.Is(err, ErrLengthRequired):
				status = http.StatusLengthRequired
			case errors.Is(err, ErrTooLarge):
				status = http.StatusRequestEntityTooLarge
			}
			refuse(w, r, status, err)
			return
		}
		// admit bounded the declared length; read that much and no more.
		body, err := readall.Sized(io.LimitReader(r.Body, r.ContentLength), r.ContentLength)
		if err == nil && int64(len(body)) < r.ContentLength {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			status := http.StatusBadRequest
			if isTimeout(err) {
				status = http.StatusRequestTimeout
			}
			refuse(w, r, status, fmt.Errorf("the body of the declared %d bytes could not be read: %w", r.ContentLength, err))
			return
		}
		if err := s.accept(r, c, body); err != nil {
			refuse(w, r, http.StatusUnauthorized, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sealed, finish := s.SealAnswers(w, r)
		next.ServeHTTP(sealed, r.WithContext(context.WithValue(r.Context(), signedByKey{}, c.node)))
		finish()
	})
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

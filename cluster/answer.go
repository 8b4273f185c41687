package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/shoal-db/shoal/internal/logsafe"
	"golang.org/x/net/http/httpguts"
)

// HeaderAnswerSignature seals the answer to a signed node-to-node request:
// an HMAC-SHA256, under the signing key, of the answer's status, headers
// and body, bound to the request it answers (its method, target, nonce,
// sender and destination). Only a node with the cluster secret can make
// one, and only for that request: an answer cannot be forged, altered or
// given to another request on the way, as a request cannot.
const HeaderAnswerSignature = "X-Shoal-Answer-Signature"

// MaxInternalAnswer bounds the answer to a node-to-node request: Send
// reads the whole answer to check its seal. The largest are lease
// decisions for every partition (about 8 MB at 65,536) and forwarded
// reads (a query page by MAX_PAGE_BYTES, 4 MiB by default and at most 32
// MiB, and its last document by MAX_DOCUMENT_BYTES, at most 16 MiB).
const MaxInternalAnswer = 64 << 20

// ErrUnsealedAnswer marks an answer whose seal is missing or does not
// verify: another CLUSTER_SECRET, or the answer was altered or forged on
// its way.
var ErrUnsealedAnswer = errors.New("the answer is not sealed by the node the request went to (another CLUSTER_SECRET, or the answer was altered on its way)")

// unsealedHeaders are the headers the HTTP layers on either side add or
// rewrite after the answering handler: the seal leaves them out.
var unsealedHeaders = []string{"Connection", "Content-Length", "Date", "Keep-Alive", "Trailer", "Transfer-Encoding", HeaderAnswerSignature}

// answerMAC is the seal of an answer (status, header, body) that node
// from gives to the request with the given method, target and nonce that
// node to sent it.
func (s *Signer) answerMAC(status int, header http.Header, body []byte, method, target, nonce, from, to string) []byte {
	sum := sha256.Sum256(body)
	b := make([]byte, 0, 512)
	b = append(b, "shoal-answer-v1\n"...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, '\n')
	b = hex.AppendEncode(b, sum[:])
	for _, f := range [...]string{method, target, nonce, from, to} {
		b = append(append(b, '\n'), f...)
	}
	b = append(b, '\n')
	// As the caller reads them: keys canonical, each value as net/http
	// writes it (line breaks made spaces, then trimmed). Keys net/http
	// does not send (not a valid field name) are left out; keys that
	// differ only in case are merged in the order net/http writes them
	// (sorted).
	type key struct{ canonical, raw string }
	keys := make([]key, 0, len(header))
	for raw := range header {
		k := http.CanonicalHeaderKey(raw)
		if !slices.Contains(unsealedHeaders, k) && httpguts.ValidHeaderFieldName(raw) {
			keys = append(keys, key{k, raw})
		}
	}
	slices.SortFunc(keys, func(x, y key) int { return cmp.Or(cmp.Compare(x.canonical, y.canonical), cmp.Compare(x.raw, y.raw)) })
	for _, k := range keys {
		// Each value on its own line, lengths first: no header can be
		// made to read as another.
		for _, v := range header[k.raw] {
			v = textproto.TrimString(headerNewlines.Replace(v))
			b = strconv.AppendInt(b, int64(len(k.canonical)), 10)
			b = append(append(append(b, ':'), k.canonical...), ':')
			b = strconv.AppendInt(b, int64(len(v)), 10)
			b = append(append(append(b, ':'), v...), '\n')
		}
	}
	m := s.answerMACs.Get().(hash.Hash)
	defer s.answerMACs.Put(m)
	m.Reset()
	m.Write(b)
	return m.Sum(nil)
}

// headerNewlines is how net/http writes a header value's line breaks.
var headerNewlines = strings.NewReplacer("\n", " ", "\r", " ")

// SealAnswers has the answer to r, a request Verify or Middleware
// accepted, sealed (HeaderAnswerSignature) as it is sent: the handler's
// writes to the writer returned are held until finish, which seals and
// sends them. A handler that takes the connection over (Hijack: a
// replication stream) sends nothing through it, and finish sends nothing
// either; the stream seals its own frames.
func (s *Signer) SealAnswers(w http.ResponseWriter, r *http.Request) (sealed http.ResponseWriter, finish func()) {
	a := &sealingWriter{w: w}
	return a, func() {
		if a.hijacked {
			return
		}
		status := a.status
		if status == 0 {
			status = http.StatusOK
		}
		if _, typed := w.Header()["Content-Type"]; !typed && a.body.Len() > 0 {
			// As net/http would after the seal: the seal covers it.
			w.Header().Set("Content-Type", http.DetectContentType(a.body.Bytes()))
		}
		mac := s.answerMAC(status, w.Header(), a.body.Bytes(), r.Method, requestTarget(r), r.Header.Get(HeaderNonce), s.node, r.Header.Get(HeaderNode))
		w.Header().Set(HeaderAnswerSignature, hex.EncodeToString(mac))
		w.WriteHeader(status)
		_, _ = w.Write(a.body.Bytes())
	}
}

// sealingWriter holds an answer's status and body until it is sealed.
type sealingWriter struct {
	w        http.ResponseWriter
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (a *sealingWriter) Header() http.Header { return a.w.Header() }

func (a *sealingWriter) WriteHeader(status int) {
	if a.status == 0 && status >= 200 { // an informational answer is not the answer
		a.status = status
	}
}

func (a *sealingWriter) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(p)
}

// Flush sends nothing: the answer goes once it is sealed.
func (a *sealingWriter) Flush() {}

// Hijack hands the connection to the handler (http.ResponseController
// finds it here): nothing is sent through this writer afterwards.
func (a *sealingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(a.w).Hijack()
	if err == nil {
		a.hijacked = true
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the writer underneath (its
// deadlines).
func (a *sealingWriter) Unwrap() http.ResponseWriter { return a.w }

// CheckAnswer reads resp's whole body (at most MaxInternalAnswer bytes)
// and checks its seal against req, the request this signer signed and
// sent to the node to; resp.Body then reads the body again. Send checks
// every answer to a signed request this way.
func (s *Signer) CheckAnswer(req *http.Request, resp *http.Response, to string) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxInternalAnswer+1))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the answer of %s (%s): %w", to, resp.Status, err)
	}
	if len(body) > MaxInternalAnswer {
		return fmt.Errorf("the answer of %s (%s) is larger than %d bytes", to, resp.Status, MaxInternalAnswer)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	sig, ok := hexHeader(singleValue(resp.Header, HeaderAnswerSignature), macBytes)
	if !ok || !hmac.Equal(sig, s.answerMAC(resp.StatusCode, resp.Header, body, req.Method, requestTarget(req), req.Header.Get(HeaderNonce), to, s.node)) {
		if resp.StatusCode >= 400 {
			// A refusal before the request was verified (401: another
			// secret, a clock out of the window) is not sealed: say what
			// it says.
			return fmt.Errorf("%s answered %s (%s): %w", to, resp.Status, logsafe.Clip(string(body)), ErrUnsealedAnswer)
		}
		return fmt.Errorf("%s answered %s: %w", to, resp.Status, ErrUnsealedAnswer)
	}
	return nil
}

package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/shoal-db/shoal/api/wire"
)

// Sentinels an *HTTPError matches with errors.Is, by its status code.
var (
	ErrUnauthorized = errors.New("unauthorized (401)")        // no token, or one the node refuses
	ErrForbidden    = errors.New("forbidden (403)")           // a token that may not do this (not an admin's)
	ErrNotFound     = errors.New("not found (404)")           // no such route or thing
	ErrUnavailable  = errors.New("service unavailable (503)") // starting, stopping, or a part not running
	// ErrOutcomeUnknown matches a write that may or may not have been
	// applied: an answer of a node that says so (504, or 503 with the
	// problem type timeout: the master's lease ran out after the commit),
	// any other 5xx but a 503 of type unavailable, and a request that may
	// have reached the node but got no answer (*UnansweredError). The
	// client never sends such a write again; read the document to find
	// out.
	ErrOutcomeUnknown = errors.New("the write may or may not have been applied")
)

// HTTPError is an answer with a status other than 200.
type HTTPError struct {
	Method string // "GET"
	Path   string // the route asked, without the query: "/v1/cluster"
	// StatusCode is the answer's status code, Status its status line
	// ("503 Service Unavailable").
	StatusCode int
	Status     string
	// Problem is the node's problem details (RFC 9457, as api writes
	// them); nil when the body is not JSON.
	Problem *wire.Problem
	// Body is the start of the answer's body, as it came.
	Body []byte
	// NodeURL is the base URL of the node asked; ServedBy the id of the
	// node that answered (X-Served-By: the master, when the node asked
	// forwarded the request and relays its answer).
	NodeURL, ServedBy string
	// RetryAfter is the wait a 503 asks for (Retry-After), 0 when none.
	RetryAfter time.Duration
	// Master and Epoch are the partition's master and its lease epoch as
	// the answering node knows them, on a 421 (X-Shoal-Master,
	// X-Shoal-Epoch); "" and 0 when it names none.
	Master string
	Epoch  uint64
}

// Answer headers a client reads.
const (
	headerServedBy = "X-Served-By"
	headerMaster   = "X-Shoal-Master"
	headerEpoch    = "X-Shoal-Epoch"
)

func newHTTPError(method, path string, resp *http.Response, body []byte) *HTTPError {
	e := &HTTPError{Method: method, Path: path, StatusCode: resp.StatusCode, Status: resp.Status,
		ServedBy: resp.Header.Get(headerServedBy), RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	if m := resp.Header.Get(headerMaster); m != "" {
		if epoch, err := strconv.ParseUint(resp.Header.Get(headerEpoch), 10, 64); err == nil {
			e.Master, e.Epoch = m, epoch
		}
	}
	var p wire.Problem
	if json.Unmarshal(body, &p) == nil {
		e.Problem = &p
	}
	if len(body) > keptErrorBytes {
		body = body[:keptErrorBytes]
	}
	e.Body = body
	return e
}

// retryAfter is the wait a Retry-After header value asks for at now:
// seconds or an HTTP date; 0 when there is none or it does not parse.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// problemType is the answer's problem type ("" when it is not problem
// JSON).
func (e *HTTPError) problemType() string {
	if e.Problem == nil {
		return ""
	}
	return e.Problem.Type
}

// OutcomeUnknown reports whether the answer leaves a write's outcome
// unknown: a 5xx answer to a write, but a 503 of problem type
// unavailable, which the node answers only before anything is written
// (no master reachable, the partition changing master, the node
// shutting down). Never for a read.
func (e *HTTPError) OutcomeUnknown() bool {
	return isWrite(e.Method) && e.StatusCode >= 500 &&
		!(e.StatusCode == http.StatusServiceUnavailable && e.problemType() == wire.TypeUnavailable)
}

// Message is what the node said of the failure: its problem's detail, else
// its title; "" when it said nothing readable.
func (e *HTTPError) Message() string {
	switch {
	case e.Problem == nil:
		return ""
	case e.Problem.Detail != "":
		return e.Problem.Detail
	default:
		return e.Problem.Title
	}
}

// Answer says what came back, without the request: "status 401: bad
// token".
func (e *HTTPError) Answer() string {
	if m := e.Message(); m != "" {
		return fmt.Sprintf("status %d: %s", e.StatusCode, m)
	}
	return fmt.Sprintf("status %d", e.StatusCode)
}

// Error is "GET /v1/cluster answered status 401: bad token".
func (e *HTTPError) Error() string {
	return e.Method + " " + e.Path + " answered " + e.Answer()
}

// Is matches the sentinel of the status code.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrUnavailable:
		return e.StatusCode == http.StatusServiceUnavailable
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrPreconditionFailed:
		return e.StatusCode == http.StatusPreconditionFailed
	case ErrTimeout:
		return e.StatusCode == http.StatusGatewayTimeout
	case ErrMisdirected:
		return e.StatusCode == http.StatusMisdirectedRequest
	case ErrOutcomeUnknown:
		return e.OutcomeUnknown()
	}
	return false
}

// UnansweredError is a write whose request may have reached the node but
// whose answer never came: the connection broke, or the context ended,
// after the request was written. Its outcome is unknown (it matches
// ErrOutcomeUnknown); Err is http.Client's error, so errors.Is sees the
// system's and the context's errors through it.
type UnansweredError struct {
	Method, Path string
	NodeURL      string // the base URL of the node asked
	Err          error
}

// Error is "POST /v1/users/alice/collections/notes/documents to
// http://10.0.0.1:8080: no answer after the request was sent, so the
// write may or may not have been applied: EOF".
func (e *UnansweredError) Error() string {
	return fmt.Sprintf("%s %s to %s: no answer after the request was sent, so the write may or may not have been applied: %v", e.Method, e.Path, e.NodeURL, e.Err)
}

func (e *UnansweredError) Unwrap() error { return e.Err }

// Is matches ErrOutcomeUnknown.
func (e *UnansweredError) Is(target error) bool { return target == ErrOutcomeUnknown }

// AnswerError is a 200 answer that is not the JSON the route gives: the
// URL is not a Shoal node's, or not the node's base URL.
type AnswerError struct {
	Method, Path string
	// What names the JSON expected: "cluster status".
	What        string
	ContentType string
	// Err is why the body did not decode; nil when it decoded but lacks
	// what every answer of the route has (Missing says what).
	Err     error
	Missing string
}

// Error is "the answer is not Shoal's cluster status JSON (why)".
func (e *AnswerError) Error() string {
	why := e.Missing
	if e.Err != nil {
		why = fmt.Sprintf("%v; content type %q", e.Err, e.ContentType)
	}
	return fmt.Sprintf("the answer is not Shoal's %s JSON (%s)", e.What, why)
}

func (e *AnswerError) Unwrap() error { return e.Err }

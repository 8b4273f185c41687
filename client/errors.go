package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/shoal-db/shoal/api"
)

// Sentinels an *HTTPError matches with errors.Is, by its status code.
var (
	ErrUnauthorized = errors.New("unauthorized (401)")        // no token, or one the node refuses
	ErrForbidden    = errors.New("forbidden (403)")           // a token that may not do this (not an admin's)
	ErrNotFound     = errors.New("not found (404)")           // no such route or thing
	ErrUnavailable  = errors.New("service unavailable (503)") // starting, stopping, or a part not running
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
	Problem *api.Problem
	// Body is the start of the answer's body, as it came.
	Body []byte
}

func newHTTPError(method, path string, resp *http.Response, body []byte) *HTTPError {
	e := &HTTPError{Method: method, Path: path, StatusCode: resp.StatusCode, Status: resp.Status}
	var p api.Problem
	if json.Unmarshal(body, &p) == nil {
		e.Problem = &p
	}
	if len(body) > keptErrorBytes {
		body = body[:keptErrorBytes]
	}
	e.Body = body
	return e
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
	}
	return false
}

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

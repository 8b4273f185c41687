package api

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem is an RFC 9457 problem detail. Type is stable: clients branch on
// it, never on Title or Detail.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Current is the current version, on a failed If-Match.
	Current *int64 `json:"current_version,omitempty"`

	retryAfter int // seconds, for 503
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// The problem types Shoal answers with.
const (
	TypeInvalidName        = "urn:shoal:problem:invalid-name"
	TypeInvalidDocument    = "urn:shoal:problem:invalid-document"
	TypeInvalidFilter      = "urn:shoal:problem:invalid-filter"
	TypeInvalidQuery       = "urn:shoal:problem:invalid-query"
	TypeQueryTooExpensive  = "urn:shoal:problem:query-too-expensive"
	TypeInvalidHeader      = "urn:shoal:problem:invalid-header"
	TypeUnauthorized       = "urn:shoal:problem:unauthorized"
	TypeForbidden          = "urn:shoal:problem:forbidden"
	TypeNotFound           = "urn:shoal:problem:not-found"
	TypeRouteNotFound      = "urn:shoal:problem:route-not-found"
	TypeMethodNotAllowed   = "urn:shoal:problem:method-not-allowed"
	TypeAlreadyExists      = "urn:shoal:problem:already-exists"
	TypePreconditionFailed = "urn:shoal:problem:precondition-failed"
	TypeBodyTooLarge       = "urn:shoal:problem:body-too-large"
	TypeDocumentTooLarge   = "urn:shoal:problem:document-too-large"
	TypeUnavailable        = "urn:shoal:problem:unavailable"
	TypeTimeout            = "urn:shoal:problem:timeout"
	TypeInternal           = "urn:shoal:problem:internal"
)

func problem(status int, typ, title, detail string) *Problem {
	return &Problem{Type: typ, Title: title, Status: status, Detail: detail}
}

func badRequest(typ, detail string) *Problem {
	return problem(http.StatusBadRequest, typ, "Bad request", detail)
}

func notFound(detail string) *Problem {
	return problem(http.StatusNotFound, TypeNotFound, "Not found", detail)
}

func unavailable(detail string) *Problem {
	p := problem(http.StatusServiceUnavailable, TypeUnavailable, "Service unavailable", detail)
	p.retryAfter = 1
	return p
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="shoal"`)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

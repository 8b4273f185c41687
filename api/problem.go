package api

import (
	"encoding/json"
	"net/http"
	"strconv"
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
	p.RetryAfter = 1
	return p
}

func writeProblem(w http.ResponseWriter, p *Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="shoal"`)
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON writes v as JSON, without escaping <, > and & (as a
// document's size is measured: see writePage).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

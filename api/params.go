package api

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/shoal-db/shoal/internal/logsafe"
)

// queryParams parses the request's query string strictly. r.URL.Query()
// silently drops what does not parse (a bad percent-escape such as %zz, a
// ';' separator), so a malformed filter or limit would be answered as if
// it were absent, and Get reads a parameter given twice as its first
// value; here either is a 400.
func queryParams(r *http.Request) (url.Values, *Problem) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest(TypeInvalidQuery, "the query string does not parse ("+err.Error()+
			"): separate parameters with '&' and percent-encode reserved characters in values ('%' as %25, ';' as %3B), as url.QueryEscape or encodeURIComponent do")
	}
	for k, vs := range q {
		if len(vs) > 1 {
			// Read as its first value, the others would be ignored.
			return nil, badRequest(TypeInvalidQuery, fmt.Sprintf("the query string gives %q %d times: give each parameter once", logsafe.ClipTo(k, 40), len(vs)))
		}
	}
	return q, nil
}

// checkQuery refuses a request whose query string does not parse, on every
// route below it, before anything is read, forwarded or done; past it,
// r.URL.Query() loses nothing.
func checkQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, prob := queryParams(r); prob != nil {
			writeProblem(w, prob)
			return
		}
		next.ServeHTTP(w, r)
	})
}

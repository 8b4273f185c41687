package api

import (
	"net/http"
	"net/url"
)

// queryParams parses the request's query string strictly. r.URL.Query()
// silently drops what does not parse (a bad percent-escape such as %zz, a
// ';' separator), so a malformed filter or limit would be answered as if
// it were absent; here it is a 400.
func queryParams(r *http.Request) (url.Values, *Problem) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest(TypeInvalidQuery, "the query string does not parse ("+err.Error()+
			"): separate parameters with '&' and percent-encode reserved characters in values ('%' as %25, ';' as %3B), as url.QueryEscape or encodeURIComponent do")
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

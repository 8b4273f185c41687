package api

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkHeaderProblem: a refused header is a 4xx problem with a type, whose
// detail echoes a bounded part of the input.
func checkHeaderProblem(t *testing.T, what string, prob *Problem, status int, typ string) {
	t.Helper()
	if prob.Status != status || prob.Type != typ {
		t.Fatalf("%s refused with %d %s, want %d %s", what, prob.Status, prob.Type, status, typ)
	}
	if len(prob.Detail) > maxDetail {
		t.Fatalf("%s refused with a detail of %d bytes: %.120q...", what, len(prob.Detail), prob.Detail)
	}
}

// FuzzRequestHeaders: the request headers and query string the API parses
// never panic; each either is refused with a 4xx problem of its type
// (bounded detail) or is accepted as the value it canonically spells.
func FuzzRequestHeaders(f *testing.F) {
	for _, s := range []struct{ ifMatch, token, wc, wt, pref, query string }{
		{`"3"`, "2:1.7", "majority", "5s", "nearest", "filter=%7B%7D&limit=5"},
		{`3`, "", "", "", "", ""},
		{`*`, "0:0.0", "1", "500ms", "master", "sort=-a,b&cursor=x"},
		{`W/"1"`, "2:01.7", "all", "-1s", "local", "filter=...%zz"},
		{`"+3"`, "2:1.7 ", "ALL", "0", "Nearest", "limit=5;x=y"},
		{`"03"`, "-1:1.2", "2", "soon", "any", "a=%"},
		{`""3`, "99999999999999999999:1.1", "majority ", "1e3s", " local", "a=1&a=2&=&&b"},
		{`"0"`, "2:18446744073709551615.1", "", "9223372036854775807ns", "", "x=%E2%82%AC+%2B"},
		{`"-1"`, "2:18446744073709551616.1", "", "", "", "%"},
		{`"1", "2"`, "2:1", "", "", "", strings.Repeat("a=b&", 50)},
		{strings.Repeat("9", 30), strings.Repeat("x", 2000), strings.Repeat("y", 2000), strings.Repeat("z", 2000), strings.Repeat("w", 2000), strings.Repeat("%", 2000)},
	} {
		f.Add(s.ifMatch, s.token, s.wc, s.wt, s.pref, s.query, uint8(2))
	}
	f.Fuzz(func(t *testing.T, im, token, wc, wt, pref, query string, partition uint8) {
		r := httptest.NewRequest("GET", "/v1/users/alice/collections/c/documents", nil)
		r.URL.RawQuery = query
		r.Header = http.Header{"If-Match": {im}, headerConsistencyToken: {token}, "X-Write-Concern": {wc},
			"X-Write-Timeout": {wt}, headerReadPreference: {pref}}

		switch v, prob := ifMatch(r); {
		case prob != nil:
			if strings.HasPrefix(strings.TrimSpace(im), "W/") {
				checkHeaderProblem(t, "If-Match", prob, http.StatusPreconditionFailed, TypePreconditionFailed)
			} else {
				checkHeaderProblem(t, "If-Match", prob, http.StatusBadRequest, TypeInvalidHeader)
			}
		case strings.TrimSpace(im) == "":
			if v != -1 {
				t.Fatalf("no If-Match read as %d", v)
			}
		case strings.TrimSpace(im) == "*":
			if v != 0 {
				t.Fatalf("If-Match * read as %d", v)
			}
		default:
			n := strconv.FormatInt(v, 10)
			if h := strings.TrimSpace(im); v < 1 || (h != `"`+n+`"` && h != n) {
				t.Fatalf("If-Match %q accepted as version %d: an ETag is \"%d\"", im, v, v)
			}
		}

		p := int(partition)
		switch pos, prob := readToken(r, p); {
		case prob != nil:
			checkHeaderProblem(t, "X-Consistency-Token", prob, http.StatusBadRequest, TypeInvalidHeader)
		case token == "":
			if pos != nil {
				t.Fatalf("no token read as %v", pos)
			}
		default:
			if got := strconv.Itoa(p) + ":" + pos.String(); got != token {
				t.Fatalf("X-Consistency-Token %q accepted as %q", token, got)
			}
		}

		if prob := checkWriteConcern(r); prob != nil {
			checkHeaderProblem(t, "X-Write-Concern", prob, http.StatusBadRequest, TypeInvalidHeader)
		} else {
			switch wc {
			case "", "1", "majority", "all":
			default:
				t.Fatalf("X-Write-Concern %q accepted", wc)
			}
			if wt != "" {
				if d, err := time.ParseDuration(wt); err != nil || d <= 0 {
					t.Fatalf("X-Write-Timeout %q accepted", wt)
				}
			}
		}

		if got, prob := readPreference(r); prob != nil {
			checkHeaderProblem(t, "X-Read-Preference", prob, http.StatusBadRequest, TypeInvalidHeader)
		} else if got != pref || (pref != "" && pref != "master" && pref != "nearest" && pref != "local") {
			t.Fatalf("X-Read-Preference %q accepted as %q", pref, got)
		}

		if q, prob := queryParams(r); prob != nil {
			checkHeaderProblem(t, "the query string", prob, http.StatusBadRequest, TypeInvalidQuery)
		} else {
			again, err := url.ParseQuery(q.Encode())
			if err != nil {
				t.Fatalf("query %q accepted as %v, which does not re-encode: %v", query, q, err)
			}
			if len(q) == 0 {
				q = url.Values{}
			}
			if !reflect.DeepEqual(again, q) {
				t.Fatalf("query %q accepted as %v, re-read as %v", query, q, again)
			}
		}
	})
}

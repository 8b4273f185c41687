package api

import (
	"net/http"
	"testing"
)

// Prefer is read as RFC 7240 says: preferences separated by commas
// outside quoted strings, names case-insensitive, values a token or a
// quoted string, and only the first instance of a preference counts.
// Found by a review: a comma inside another preference's quoted value,
// a later return=minimal after return=representation, and broken quotes
// were each taken as asking for a minimal answer.
func TestPreferIsReadAsTheRFCSays(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		want    bool
	}{
		{[]string{"return=minimal"}, true},
		{[]string{"RETURN = minimal"}, true},
		{[]string{`return="minimal"`}, true},
		{[]string{"handling=lenient, return=minimal; x=1"}, true},
		{[]string{"wait=10", "return=minimal"}, true},
		{[]string{`foo="a; b, c", return=minimal`}, true},
		{[]string{"return=representation"}, false},
		{[]string{""}, false},
		{nil, false},
		{[]string{`foo="a, return=minimal"`}, false},
		{[]string{"return=representation, return=minimal"}, false},
		{[]string{"return=representation", "return=minimal"}, false},
		{[]string{`return=minimal"`}, false},
		{[]string{`return="minimal`}, false},
		{[]string{`return=""minimal""`}, false},
		{[]string{"return=minimalist"}, false},
		{[]string{"xreturn=minimal"}, false},
		{[]string{`return="min\imal"`}, true},
		{[]string{`return="mini\mal"`}, true},
	} {
		r, _ := http.NewRequest(http.MethodPut, "/", nil)
		for _, h := range tc.headers {
			r.Header.Add("Prefer", h)
		}
		if got := prefersMinimal(r); got != tc.want {
			t.Errorf("Prefer %q: minimal %v, want %v", tc.headers, got, tc.want)
		}
	}
}

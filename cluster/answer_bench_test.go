package cluster

import (
	"net/http"
	"testing"
)

// BenchmarkAnswerMAC measures the seal of a typical answer (a write's,
// answered minimally): a forwarded write pays it twice, once to seal on
// the master and once to check on the forwarding node.
func BenchmarkAnswerMAC(b *testing.B) {
	s := NewSigner([]byte("0123456789abcdef0123"), "a", nil, nil)
	h := http.Header{}
	h.Set("Etag", `"1"`)
	h.Set("Location", "/v1/users/u1/collections/c/documents/d2")
	h.Set("Preference-Applied", "return=minimal")
	h.Set("Vary", "Prefer")
	h.Set("X-Consistency-Token", "225:1.2")
	h.Set("X-Served-By", "a")
	b.ReportAllocs()
	for b.Loop() {
		s.answerMAC(http.StatusCreated, h, nil, http.MethodPut, "/v1/users/u1/collections/c/documents/d2?w=majority", "0123456789abcdef0123456789abcdef", "a", "b")
	}
}

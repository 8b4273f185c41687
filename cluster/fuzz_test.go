package cluster

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzVerify: arbitrary signature headers never panic and are never
// accepted; a request signed by a known node is accepted once whatever its
// path and body, and refused when its body or length is altered.
func FuzzVerify(f *testing.F) {
	f.Add("a", "b", "1800000000000", "00112233445566778899aabbccddeeff", "zz", "zz", "/internal/v1/ping", []byte("body"))
	f.Add("", "", "", "", "", "", "/internal/v1/replicate?x=1", []byte(nil))
	f.Add("a\x00", "b", "-1", "0", "00", "00", "/%zz", []byte("{}"))
	f.Fuzz(func(t *testing.T, node, to, ts, nonce, head, sig, path string, body []byte) {
		now := time.Unix(1_800_000_000, 0)
		clock := func() time.Time { return now }
		receiver := NewSigner([]byte(testSecret), "b", clock, knownIDs("a"))
		target := "/internal/v1/x"
		if u, err := url.ParseRequestURI(path); err == nil && u.Host == "" && u.Scheme == "" && len(path) > 0 && path[0] == '/' &&
			!strings.ContainsAny(path, " \r\n\t#\x00") {
			target = path
		}
		req := httptest.NewRequest("POST", "http://b"+target, bytes.NewReader(body))
		for k, v := range map[string]string{HeaderNode: node, HeaderTo: to, HeaderTime: ts, HeaderNonce: nonce, HeaderHeadSignature: head, HeaderSignature: sig} {
			req.Header[k] = []string{v}
		}
		if _, err := receiver.Verify(req, body); err == nil {
			t.Fatalf("accepted forged headers %q", req.Header)
		}
		signed := httptest.NewRequest("POST", "http://b"+target, bytes.NewReader(body))
		NewSigner([]byte(testSecret), "a", clock, nil).Sign(signed, body, "b")
		altered := signed.Clone(signed.Context())
		altered.Header = signed.Header.Clone()
		// (On a receiver of its own: a head that verifies spends its nonce,
		// so the signed request would be refused as a replay after it.)
		if _, err := NewSigner([]byte(testSecret), "b", clock, knownIDs("a")).Verify(altered, append(append([]byte(nil), body...), 'x')); err == nil {
			t.Fatal("accepted a body one byte longer than signed")
		}
		if from, err := receiver.Verify(signed, body); err != nil || from != "a" {
			t.Fatalf("refused a signed request to %q: %v", target, err)
		}
		if _, err := receiver.Verify(signed, body); err == nil {
			t.Fatal("accepted a replay")
		}
	})
}

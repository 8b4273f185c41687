package api

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A token is verified once, then taken from the node's verified tokens;
// keeping it must not outlive it: from the moment its exp (and the
// leeway) has passed, the same token is refused as expired, as it is
// when it was never kept. And keeping a token vouches for no other.
func TestAVerifiedTokenIsRefusedOnceItExpires(t *testing.T) {
	issued := time.Now().Truncate(time.Second)
	clock := issued
	s := New(Config{NodeID: "n", PartitionCount: 1, MaxBodyBytes: 1 << 20, AuthSecret: []byte(fuzzSecret),
		TokenAudience: fuzzAudience, TokenMaxTTL: fuzzMaxTTL, Now: func() time.Time { return clock }}, nil, nil)
	token := signClaims(t, fuzzSecret, jwt.MapClaims{"sub": "alice", "aud": fuzzAudience,
		"iat": issued.Unix(), "exp": issued.Add(time.Minute).Unix()})
	auth := func(token string) (Principal, *Problem) {
		r := httptest.NewRequest("GET", "/v1/users/alice/collections", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return s.authenticate(r)
	}
	for i := range 2 {
		if p, prob := auth(token); prob != nil || p.User != "alice" || p.Admin {
			t.Fatalf("request %d: got %+v, %v; want alice", i, p, prob)
		}
	}
	if _, ok := s.verified.get(token, clock); !ok {
		t.Fatal("the verified token was not kept: the test proves nothing")
	}

	// Signed with another secret, or the same claims tampered with: refused
	// though a token with the same claims is kept.
	forged := signClaims(t, "another-secret", jwt.MapClaims{"sub": "alice", "aud": fuzzAudience,
		"iat": issued.Unix(), "exp": issued.Add(time.Minute).Unix()})
	if _, prob := auth(forged); prob == nil {
		t.Fatal("a token signed with another secret was taken")
	}
	parts := strings.Split(token, ".")
	if _, prob := auth(parts[0] + "." + parts[1] + "." + strings.ToUpper(parts[2])); prob == nil {
		t.Fatal("a token with a changed signature was taken")
	}

	clock = issued.Add(time.Minute + tokenLeeway - time.Millisecond)
	if _, prob := auth(token); prob != nil {
		t.Fatalf("within the leeway after exp: %v", prob)
	}
	clock = issued.Add(time.Minute + tokenLeeway)
	for i := range 2 {
		_, prob := auth(token)
		if prob == nil || !strings.Contains(prob.Detail, "expired") {
			t.Fatalf("request %d once the token expired: got %v, want a refusal as expired", i, prob)
		}
	}
}

package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-db/shoal/api/doc"
)

const (
	fuzzSecret   = "fuzz-secret-0123456789abcdef"
	fuzzAudience = "shoal-fuzz"
	fuzzMaxTTL   = time.Hour
	// maxDetail bounds what a refusal echoes of its input.
	maxDetail = 600
)

func fuzzAuthServer() *Server {
	// authenticate reads only the configuration: no store is needed.
	return New(Config{NodeID: "n", PartitionCount: 1, MaxBodyBytes: 1 << 20, AuthSecret: []byte(fuzzSecret),
		TokenAudience: fuzzAudience, TokenMaxTTL: fuzzMaxTTL}, nil, nil)
}

// signClaims signs claims as HS256 with secret (the fuzz target's raw
// material, beyond what MintToken would make).
func signClaims(t testing.TB, secret string, claims jwt.MapClaims) string {
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// checkAuthenticated checks, without the JWT library, that an accepted
// Authorization header carries an HS256 token signed with fuzzSecret, for
// fuzzAudience, valid now and for at most fuzzMaxTTL, and that the
// principal is what the token says: admin, or a valid user name.
func checkAuthenticated(t *testing.T, header string, p Principal, before time.Time) {
	t.Helper()
	scheme, raw, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		t.Fatalf("accepted the scheme %q", scheme)
	}
	parts := strings.Split(strings.TrimSpace(raw), ".")
	if len(parts) != 3 {
		t.Fatalf("accepted a token of %d parts", len(parts))
	}
	var head struct{ Alg string }
	if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err != nil || json.Unmarshal(b, &head) != nil || head.Alg != "HS256" {
		t.Fatalf("accepted a token whose header is %q (alg %q)", parts[0], head.Alg)
	}
	mac := hmac.New(sha256.New, []byte(fuzzSecret))
	mac.Write([]byte(parts[0] + "." + parts[1]))
	if sig, err := base64.RawURLEncoding.DecodeString(parts[2]); err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		t.Fatalf("accepted a token that does not verify with the secret: %q", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("accepted an undecodable payload: %v", err)
	}
	var claims map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		t.Fatalf("accepted a payload that is not a JSON object: %v", err)
	}
	seconds := func(name string) (float64, bool) {
		n, ok := claims[name].(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("accepted %s %q", name, n)
		}
		return f, true
	}
	now := float64(time.Now().Unix())
	exp, ok := seconds("exp")
	if !ok {
		t.Fatalf("accepted a token without a numeric exp: %s", b)
	}
	// One second of slack for the claims' whole-second precision.
	if exp < float64(before.Unix())-5-1 {
		t.Fatalf("accepted a token that expired at %v (now %v): %s", exp, now, b)
	}
	if exp-now > (fuzzMaxTTL+clockSkew).Seconds()+1 {
		t.Fatalf("accepted a token valid for another %vs: %s", exp-now, b)
	}
	if iat, ok := seconds("iat"); ok {
		if iat-now > clockSkew.Seconds()+1 {
			t.Fatalf("accepted a token issued %vs in the future: %s", iat-now, b)
		}
		if exp-iat > fuzzMaxTTL.Seconds()+1 {
			t.Fatalf("accepted a token valid for %vs (exp - iat): %s", exp-iat, b)
		}
	} else if _, present := claims["iat"]; present {
		t.Fatalf("accepted a non-numeric iat: %s", b)
	}
	switch aud := claims["aud"].(type) {
	case string:
		if aud != fuzzAudience {
			t.Fatalf("accepted the audience %q: %s", aud, b)
		}
	case []any:
		found := false
		for _, a := range aud {
			found = found || a == fuzzAudience
		}
		if !found {
			t.Fatalf("accepted the audiences %v: %s", aud, b)
		}
	default:
		t.Fatalf("accepted a token without the audience: %s", b)
	}
	sub, _ := claims["sub"].(string)
	if p.User != sub {
		t.Fatalf("principal user %q from sub %q", p.User, sub)
	}
	if p.Admin != (claims["role"] == "admin") {
		t.Fatalf("principal admin=%v from role %v", p.Admin, claims["role"])
	}
	if !p.Admin {
		if err := doc.ValidUser(p.User); err != nil {
			t.Fatalf("accepted a user token whose user %.80q is not a valid user name: %v", p.User, err)
		}
	}
	if p.User != "" {
		if err := doc.ValidUser(p.User); err != nil {
			t.Fatalf("accepted a token whose sub %.80q is not a valid user name: %v", p.User, err)
		}
	}
}

func checkRefusal(t *testing.T, prob *Problem) {
	t.Helper()
	if prob.Status != 401 || prob.Type != TypeUnauthorized {
		t.Fatalf("refused with %d %s", prob.Status, prob.Type)
	}
	if len(prob.Detail) > maxDetail {
		t.Fatalf("a refusal's detail is %d bytes: %.200q...", len(prob.Detail), prob.Detail)
	}
}

// FuzzAuthorization: any Authorization header is refused with a 401
// (never a panic), unless it is a token the secret signed, for the
// audience, current and within TOKEN_MAX_TTL, whose principal is admin or
// a valid user.
func FuzzAuthorization(f *testing.F) {
	mint := func(spec TokenSpec) string {
		tok, err := MintToken([]byte(fuzzSecret), spec)
		if err != nil {
			f.Fatal(err)
		}
		return tok
	}
	now := time.Now().Unix()
	for _, h := range []string{
		"", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "bearer x.y.z", "Bearer a.b", "Bearer ...", "Bearer \x00.\x00.\x00",
		"Bearer " + mint(TokenSpec{User: "alice", Audience: fuzzAudience, TTL: time.Minute}),
		"BEARER   " + mint(TokenSpec{Admin: true, Audience: fuzzAudience, TTL: fuzzMaxTTL}),
		"Bearer " + mint(TokenSpec{User: "bob", Admin: true, Audience: fuzzAudience, TTL: time.Hour}),
		"Bearer " + mint(TokenSpec{User: "alice", Audience: "other", TTL: time.Minute}),
		"Bearer " + mint(TokenSpec{User: "alice", TTL: time.Minute}),
		"Bearer " + mint(TokenSpec{User: "alice", Audience: fuzzAudience, TTL: 2 * fuzzMaxTTL}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": "../carol", "aud": fuzzAudience, "exp": now + 60, "iat": now}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": strings.Repeat("u", 2000), "aud": fuzzAudience, "exp": now + 60}),
		"Bearer " + signClaims(f, "another secret", jwt.MapClaims{"sub": "alice", "aud": fuzzAudience, "exp": now + 60}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": "alice", "aud": []any{"x", fuzzAudience}, "exp": now + 60, "iat": now}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": "alice", "aud": fuzzAudience, "exp": now + 60, "iat": now + 3600}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": "alice", "aud": fuzzAudience, "exp": now + 60, "iat": "yesterday"}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": "alice", "aud": fuzzAudience}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": 7, "aud": fuzzAudience, "exp": now + 60}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"role": "admin", "aud": 3, "exp": now + 60}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"aud": fuzzAudience, "exp": now + 60}),
		"Bearer " + signClaims(f, fuzzSecret, jwt.MapClaims{"sub": "alice", "aud": fuzzAudience, "exp": 1e300}),
	} {
		f.Add(h)
	}
	s := fuzzAuthServer()
	f.Fuzz(func(t *testing.T, header string) {
		checkAuthorization(t, s, header)
	})
}

// FuzzTokenClaims: tokens the secret signed, with arbitrary claims, are
// accepted only when they carry the audience, are current and within
// TOKEN_MAX_TTL, and name admin or a valid user.
func FuzzTokenClaims(f *testing.F) {
	f.Add("alice", "", fuzzAudience, false, int64(0), int64(60), false)
	f.Add("", "admin", fuzzAudience, true, int64(-10), int64(3000), false)
	f.Add("alice", "", fuzzAudience, false, int64(0), int64(7200), false)
	f.Add("alice", "", fuzzAudience, false, int64(0), int64(7200), true)
	f.Add("alice", "", fuzzAudience, false, int64(600), int64(700), false)
	f.Add("alice", "", "other", false, int64(0), int64(60), false)
	f.Add("a b", "", fuzzAudience, false, int64(0), int64(60), false)
	f.Add("", "root", fuzzAudience, false, int64(0), int64(60), false)
	f.Add("x/y", "admin", fuzzAudience, false, int64(0), int64(60), false)
	f.Add("alice", "", fuzzAudience, false, int64(0), int64(-60), false)
	s := fuzzAuthServer()
	f.Fuzz(func(t *testing.T, sub, role, aud string, audList bool, iatOff, expOff int64, noIat bool) {
		now := time.Now().Unix()
		claims := jwt.MapClaims{"exp": now + expOff%(1<<40)}
		if !noIat {
			claims["iat"] = now + iatOff%(1<<40)
		}
		if sub != "" {
			claims["sub"] = sub
		}
		if role != "" {
			claims["role"] = role
		}
		if audList {
			claims["aud"] = []string{aud, "other"}
		} else if aud != "" {
			claims["aud"] = aud
		}
		header := "Bearer " + signClaims(t, fuzzSecret, claims)
		checkAuthorization(t, s, header)
	})
}

// A token is never minted for a user name no path can carry.
func TestMintTokenRefusesInvalidUser(t *testing.T) {
	for _, user := range []string{"../carol", "a b", strings.Repeat("u", 129)} {
		if tok, err := MintToken([]byte(fuzzSecret), TokenSpec{User: user, TTL: time.Minute}); err == nil {
			t.Errorf("minted %q for user %.40q", tok, user)
		}
	}
}

// checkAuthorization authenticates a request with the Authorization header
// and checks the refusal or the principal it gives.
func checkAuthorization(t *testing.T, s *Server, header string) {
	t.Helper()
	r := httptest.NewRequest("GET", "/v1/users/alice/collections", nil)
	r.Header.Set("Authorization", header)
	before := time.Now()
	p, prob := s.authenticate(r)
	if prob != nil {
		checkRefusal(t, prob)
		return
	}
	checkAuthenticated(t, header, p, before)
}

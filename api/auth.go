package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/internal/logsafe"
)

// Principal is who a request acts as.
type Principal struct {
	User  string // the token's subject; empty for admin tokens without one
	Admin bool
}

// CanAccess reports whether p may act on user's data.
func (p Principal) CanAccess(user string) bool { return p.Admin || p.User == user }

// TokenSpec is what a minted token says.
type TokenSpec struct {
	User  string // its sub claim; empty for an admin token without one
	Admin bool   // role=admin
	// Audience is its aud claim: the nodes' TOKEN_AUDIENCE (empty: none).
	Audience string
	// TTL is how long it is valid: positive, and at most the nodes'
	// TOKEN_MAX_TTL.
	TTL time.Duration
}

// MintToken returns an HS256 token as spec says, issued now.
func MintToken(secret []byte, spec TokenSpec) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("AUTH_SECRET is empty: tokens cannot be signed")
	}
	if spec.User == "" && !spec.Admin {
		return "", errors.New("a token needs a user (--user) or the admin role (--admin)")
	}
	if spec.User != "" {
		if err := doc.ValidUser(spec.User); err != nil {
			return "", fmt.Errorf("the token's user cannot be used: %w", err)
		}
	}
	if spec.TTL <= 0 {
		return "", errors.New("the token lifetime must be positive")
	}
	now := time.Now()
	claims := jwt.MapClaims{"iat": now.Unix(), "exp": now.Add(spec.TTL).Unix()}
	if spec.Audience != "" {
		claims["aud"] = spec.Audience
	}
	if spec.User != "" {
		claims["sub"] = spec.User
	}
	if spec.Admin {
		claims["role"] = "admin"
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// DefaultTokenMaxTTL is TOKEN_MAX_TTL's default, used when Config leaves it
// zero.
const DefaultTokenMaxTTL = 24 * time.Hour

// clockSkew is how far in the future a token's iat may be: the clock of the
// machine that minted it may run a little ahead of this node's.
const clockSkew = time.Minute

// authenticate checks the request's bearer token.
func (s *Server) authenticate(r *http.Request) (Principal, *Problem) {
	if s.cfg.Insecure {
		return Principal{Admin: true}, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, unauthorized("this route needs an Authorization: Bearer <token> header; mint a token with `shoal token --user NAME`")
	}
	scheme, raw, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(raw) == "" {
		return Principal{}, unauthorized("the Authorization header must be `Bearer <token>`")
	}
	raw = strings.TrimSpace(raw)
	now := s.now()
	if p, ok := s.verified.get(raw, now); ok {
		return p, nil
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.cfg.AuthSecret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(tokenLeeway),
		jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		switch {
		case errors.Is(err, jwt.ErrTokenExpired):
			return Principal{}, unauthorized("the token has expired; mint a new one")
		case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
			return Principal{}, unauthorized("the token has no exp claim; tokens must expire")
		case errors.Is(err, jwt.ErrTokenSignatureInvalid):
			return Principal{}, unauthorized("the token's signature does not verify: it was signed with another AUTH_SECRET")
		default:
			return Principal{}, unauthorized(fmt.Sprintf("the token is not valid: %v", err))
		}
	}
	if prob := s.checkTokenTimes(claims, now); prob != nil {
		return Principal{}, prob
	}
	if prob := s.checkAudience(claims); prob != nil {
		return Principal{}, prob
	}
	var p Principal
	p.User, _ = claims.GetSubject()
	if p.User != "" {
		// A sub that no user can have would never match a user's path, but
		// it is no principal either: refuse it (an admin token's too).
		if err := doc.ValidUser(p.User); err != nil {
			return Principal{}, unauthorized("the token's sub is not a valid user name: " + err.Error())
		}
	}
	if role, _ := claims["role"].(string); role == "admin" {
		p.Admin = true
	}
	if p.User == "" && !p.Admin {
		return Principal{}, unauthorized("the token has neither a sub (user) nor role=admin")
	}
	exp, _ := claims.GetExpirationTime() // present: checkTokenTimes requires it
	s.verified.put(raw, p, exp.Time)
	return p, nil
}

// tokenLeeway is how long past its exp a token is still taken (clocks of
// the minting machine and of this node differ a little).
const tokenLeeway = 5 * time.Second

// maxVerifiedTokens bounds the tokens verifiedTokens keeps.
const maxVerifiedTokens = 4096

// verifiedTokens keeps the tokens this node has verified, with what they
// grant, so that a client sending the same token with every request (as
// clients do) pays for checking its signature and decoding its claims
// once rather than per request: under majority writes that was 3.3% of a
// node's CPU. Only a token that passed every check is kept, and only
// until its exp (and the leeway) has passed: every other check a token
// passed at some moment it passes at every later one (its iat only gets
// less far in the future, its remaining life only shorter; the secret
// and TOKEN_AUDIENCE do not change while the node runs), so a token kept
// is refused from the moment it would be refused unkept. When full it is
// emptied: only tokens signed with AUTH_SECRET ever enter it, so it fills
// only with as many clients, and is refilled one verification each.
type verifiedTokens struct {
	mu sync.Mutex
	m  map[string]verifiedToken
}

type verifiedToken struct {
	p   Principal
	exp time.Time
}

func (v *verifiedTokens) get(raw string, now time.Time) (Principal, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.m[raw]
	if !ok {
		return Principal{}, false
	}
	if !now.Before(t.exp.Add(tokenLeeway)) {
		delete(v.m, raw) // expired: verified again, and refused
		return Principal{}, false
	}
	return t.p, true
}

func (v *verifiedTokens) put(raw string, p Principal, exp time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= maxVerifiedTokens {
		v.m = make(map[string]verifiedToken)
	}
	v.m[raw] = verifiedToken{p: p, exp: exp}
}

func unauthorized(detail string) *Problem {
	return problem(http.StatusUnauthorized, TypeUnauthorized, "Unauthorized", detail)
}

// checkTokenTimes refuses a token issued in the future (beyond clockSkew) or
// valid for longer than TOKEN_MAX_TTL: exp - iat when it says when it was
// issued, and in any case exp - now, so that a token without iat cannot
// outlive the maximum either. exp is present (the parser requires it).
func (s *Server) checkTokenTimes(claims jwt.MapClaims, now time.Time) *Problem {
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return unauthorized("the token has no valid exp claim; tokens must expire")
	}
	iat, err := claims.GetIssuedAt()
	if err != nil {
		return unauthorized("the token's iat claim is not a number of seconds since 1970; mint a new token with `shoal token`")
	}
	if iat != nil {
		if ahead := iat.Sub(now); ahead > clockSkew {
			return unauthorized(fmt.Sprintf("the token's iat (issued at) is %s in the future, more than the %s of clock skew allowed: check the clock of the machine that minted it", ahead.Round(time.Second), clockSkew))
		}
		if life := exp.Sub(iat.Time); life > s.tokenMaxTTL {
			return unauthorized(fmt.Sprintf("the token is valid for %s (exp - iat), longer than TOKEN_MAX_TTL (%s): mint one with a shorter --ttl", life, s.tokenMaxTTL))
		}
	}
	if left := exp.Sub(now); left > s.tokenMaxTTL+clockSkew {
		return unauthorized(fmt.Sprintf("the token is valid for another %s, longer than TOKEN_MAX_TTL (%s): mint one with a shorter --ttl", left.Round(time.Second), s.tokenMaxTTL))
	}
	return nil
}

// checkAudience refuses a token whose aud does not name TOKEN_AUDIENCE
// (unless that is empty). aud may be one string or a list (RFC 7519).
func (s *Server) checkAudience(claims jwt.MapClaims) *Problem {
	want := s.cfg.TokenAudience
	if want == "" {
		return nil
	}
	aud, err := claims.GetAudience()
	if err != nil {
		return unauthorized(fmt.Sprintf("the token's aud claim is neither a string nor a list of strings; it must be %q (TOKEN_AUDIENCE)", want))
	}
	if len(aud) == 0 {
		return unauthorized(fmt.Sprintf("the token has no aud claim; tokens for this cluster must have aud %q (TOKEN_AUDIENCE): mint one with `shoal token`", want))
	}
	if !slices.Contains(aud, want) {
		shown := make([]string, 0, min(len(aud), 4))
		for _, a := range aud[:min(len(aud), 4)] {
			shown = append(shown, strconv.Quote(logsafe.ClipTo(a, 64)))
		}
		return unauthorized(fmt.Sprintf("the token is for the audience %s, not for this cluster's %q (TOKEN_AUDIENCE)", strings.Join(shown, ", "), want))
	}
	return nil
}

// now reads the clock tokens are checked against.
func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Principal is who a request acts as.
type Principal struct {
	User  string // the token's subject; empty for admin tokens without one
	Admin bool
}

// CanAccess reports whether p may act on user's data.
func (p Principal) CanAccess(user string) bool { return p.Admin || p.User == user }

// MintToken returns an HS256 token for user (or an admin token) that
// expires after ttl.
func MintToken(secret []byte, user string, admin bool, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("AUTH_SECRET is empty: tokens cannot be signed")
	}
	if user == "" && !admin {
		return "", errors.New("a token needs a user (--user) or the admin role (--admin)")
	}
	if ttl <= 0 {
		return "", errors.New("the token lifetime must be positive")
	}
	now := time.Now()
	claims := jwt.MapClaims{"iat": now.Unix(), "exp": now.Add(ttl).Unix()}
	if user != "" {
		claims["sub"] = user
	}
	if admin {
		claims["role"] = "admin"
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

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
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(strings.TrimSpace(raw), claims, func(*jwt.Token) (any, error) { return s.cfg.AuthSecret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5*time.Second))
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
	var p Principal
	p.User, _ = claims.GetSubject()
	if role, _ := claims["role"].(string); role == "admin" {
		p.Admin = true
	}
	if p.User == "" && !p.Admin {
		return Principal{}, unauthorized("the token has neither a sub (user) nor role=admin")
	}
	return p, nil
}

func unauthorized(detail string) *Problem {
	return problem(http.StatusUnauthorized, TypeUnauthorized, "Unauthorized", detail)
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/internal/config"
)

func token(args []string, stdout, stderr io.Writer) int {
	// The nodes' token settings, read as `shoal serve` reads them, so that
	// the token passes their checks.
	cfg, err := config.Resolve(config.OSSource(), "TOKEN_AUDIENCE", "TOKEN_MAX_TTL")
	if err != nil {
		fmt.Fprintf(stderr, "shoal token: %v\n", err)
		return 2
	}
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "", "the user the token acts as (its sub claim)")
	admin := fs.Bool("admin", false, "an admin token: reaches every user's data and the cluster routes")
	ttl := fs.Duration("ttl", cfg.TokenMaxTTL, "how long the token is valid, at most TOKEN_MAX_TTL (default: TOKEN_MAX_TTL)")
	audience := fs.String("audience", cfg.TokenAudience, "the token's aud claim (default: TOKEN_AUDIENCE)")
	secret := fs.String("auth-secret", "", "the secret to sign with (default: AUTH_SECRET from the environment or .env)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal token --user NAME [--admin] [--ttl 24h]")
		fmt.Fprintln(stderr, "Prints an HS256 token signed with AUTH_SECRET, for the header Authorization: Bearer <token>.")
		fmt.Fprintln(stderr, "TOKEN_AUDIENCE and TOKEN_MAX_TTL are read from the environment or .env, as the nodes read them.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *user != "" {
		if err := doc.ValidUser(*user); err != nil {
			fmt.Fprintf(stderr, "shoal token: %v\n", err)
			return 2
		}
	}
	if *ttl > cfg.TokenMaxTTL {
		fmt.Fprintf(stderr, "shoal token: --ttl %s is longer than TOKEN_MAX_TTL (%s): the nodes would refuse the token; use a shorter --ttl or raise TOKEN_MAX_TTL on every node (and here)\n", *ttl, cfg.TokenMaxTTL)
		return 2
	}
	key := *secret
	if key == "" {
		if key, err = config.AuthSecret(config.OSSource()); err != nil {
			fmt.Fprintf(stderr, "shoal token: %v\n", err)
			return 2
		}
	}
	tok, err := api.MintToken([]byte(key), api.TokenSpec{User: *user, Admin: *admin, Audience: *audience, TTL: *ttl})
	if err != nil {
		fmt.Fprintf(stderr, "shoal token: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

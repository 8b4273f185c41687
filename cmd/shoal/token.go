package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/api/doc"
	"github.com/shoal-db/shoal/internal/config"
)

func token(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.String("user", "", "the user the token acts as (its sub claim)")
	admin := fs.Bool("admin", false, "an admin token: reaches every user's data and the cluster routes")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid")
	secret := fs.String("auth-secret", "", "the secret to sign with (default: AUTH_SECRET from the environment or .env)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal token --user NAME [--admin] [--ttl 24h]")
		fmt.Fprintln(stderr, "Prints an HS256 token signed with AUTH_SECRET, for the header Authorization: Bearer <token>.")
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
	key := *secret
	if key == "" {
		var err error
		if key, err = config.AuthSecret(config.OSSource()); err != nil {
			fmt.Fprintf(stderr, "shoal token: %v\n", err)
			return 2
		}
	}
	tok, err := api.MintToken([]byte(key), *user, *admin, *ttl)
	if err != nil {
		fmt.Fprintf(stderr, "shoal token: %v\n", err)
		return 2
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

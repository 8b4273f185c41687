package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/internal/testnode"
)

// The test binary doubles as the shoal binary when SHOAL_RUN_MAIN is set, so
// tests can run real `shoal` processes without building one.
func TestMain(m *testing.M) {
	if os.Getenv("SHOAL_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv("SHOAL_RUN_FERRETDB") == "1" { // a node's MongoDB in fault runs on the mongo engine
		os.Exit(storetest.ServeMain(os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

func shoalCmd(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SHOAL_RUN_MAIN=1")
	cmd.Dir = t.TempDir()
	return cmd
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestServeStopsCleanlyOnSIGTERM(t *testing.T) {
	addr := freePort(t)
	dir := t.TempDir()
	cmd := shoalCmd(t, "serve", "--http-addr", addr, "--data-dir", dir, "--node-id", "sig")
	cmd.Env = append(cmd.Env, "AUTH_SECRET=0123456789abcdef0123")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not ready in time; logs:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling an external process: nothing to wait on
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shoal serve exited with %v after SIGTERM; logs:\n%s", err, logs.String())
		}
	case <-ctx.Done():
		t.Fatalf("shoal serve did not exit after SIGTERM; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "node stopped") {
		t.Fatalf("no clean stop in logs:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "pebble")); err != nil {
		t.Fatalf("no store files under DATA_DIR: %v", err)
	}
}

func TestServeRefusesToStartWithoutSecret(t *testing.T) {
	cmd := shoalCmd(t, "serve", "--http-addr", "127.0.0.1:0")
	cmd.Env = append(cmd.Env, "AUTH_SECRET=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "AUTH_SECRET is empty") {
		t.Fatalf("started without a secret or unclear error: %v\n%s", err, out)
	}
}

func TestServeHelpListsSettings(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"serve", "--help"}, &out, &out); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, k := range []string{"NODE_ID", "HTTP_ADDR", "DATA_DIR", "MONGO_URI", "MONGO_DB", "AUTH_SECRET", "PARTITION_COUNT", "MAX_BODY_BYTES", "default :8080", "default 271"} {
		if !strings.Contains(out.String(), k) {
			t.Errorf("serve --help lacks %q", k)
		}
	}
}

func TestTokenCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"token", "--user", "alice", "--auth-secret", "0123456789abcdef"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if parts := strings.Split(strings.TrimSpace(out.String()), "."); len(parts) != 3 {
		t.Fatalf("not a JWT: %q", out.String())
	}
	errb.Reset()
	if code := run([]string{"token", "--user", "bad name", "--auth-secret", "0123456789abcdef"}, &out, &errb); code == 0 {
		t.Fatal("minted a token for an invalid user name")
	}
}

// `shoal token` mints what the nodes accept: the aud they check and a
// lifetime within their TOKEN_MAX_TTL, both read from the environment as
// `shoal serve` reads them; it refuses to mint a token they would refuse.
func TestTokenCommandMintsTokensNodesAccept(t *testing.T) {
	t.Setenv("TOKEN_AUDIENCE", "shoal")
	t.Setenv("TOKEN_MAX_TTL", "24h")
	mint := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append([]string{"token", "--auth-secret", testnode.Secret}, args...), &out, &errb)
		return strings.TrimSpace(out.String()), errb.String(), code
	}
	tok, stderr, code := mint("--user", "alice")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, claims); err != nil {
		t.Fatal(err)
	}
	iat, _ := claims.GetIssuedAt()
	exp, _ := claims.GetExpirationTime()
	if aud, _ := claims.GetAudience(); len(aud) != 1 || aud[0] != "shoal" || iat == nil || exp == nil || exp.Sub(iat.Time) != 24*time.Hour {
		t.Fatalf("token claims %v: want aud shoal and exp = iat + 24h", claims)
	}
	n := testnode.StartNew(t)
	r := n.Client(tok).Do("GET", "/v1/users/alice/collections", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("a node refused the token `shoal token` minted: %d %s", r.Status, r.Body)
	}
	if _, stderr, code := mint("--user", "alice", "--ttl", "48h"); code == 0 || !strings.Contains(stderr, "TOKEN_MAX_TTL") {
		t.Fatalf("--ttl 48h over TOKEN_MAX_TTL 24h: exit %d, %q; want a refusal naming TOKEN_MAX_TTL", code, stderr)
	}
	t.Setenv("TOKEN_MAX_TTL", "72h")
	t.Setenv("TOKEN_AUDIENCE", "billing")
	tok, stderr, code = mint("--admin", "--ttl", "48h")
	if code != 0 {
		t.Fatalf("--ttl 48h with TOKEN_MAX_TTL 72h: exit %d: %s", code, stderr)
	}
	claims = jwt.MapClaims{}
	jwt.NewParser().ParseUnverified(tok, claims)
	if aud, _ := claims.GetAudience(); len(aud) != 1 || aud[0] != "billing" {
		t.Fatalf("with TOKEN_AUDIENCE=billing the token has aud %v", aud)
	}
}

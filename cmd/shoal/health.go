package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/shoal-db/shoal/client"
)

// health asks a node's /readyz and exits 0 when it answers 200, 1 otherwise.
// It exists for container health checks: the runtime image has no shell and
// no curl. Docker reserves exit code 2 for itself, so every failure,
// including a bad flag, is 1.
func health(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def, defErr := defaultHealthURL(os.LookupEnv)
	url := fs.String("url", def, "the readiness URL to ask (default: /readyz on HTTP_ADDR's port at 127.0.0.1, https when TLS_CERT_FILE is set)")
	caFile := fs.String("ca", os.Getenv("TLS_CA_FILE"), "PEM CA to verify an https node with (default: TLS_CA_FILE; unset: the system's roots)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: shoal health [--url http://127.0.0.1:8080/readyz] [--timeout 3s] [--ca FILE]")
		fmt.Fprintln(stderr, "Exits 0 when the URL answers 200, else prints why and exits 1 (for container health checks).")
		fs.PrintDefaults()
	}
	// Usage errors exit 1 too: Docker reserves 2 in health checks.
	if code, done := parseArgs(fs, args, stderr, 1); done {
		return code
	}
	urlSet := false
	fs.Visit(func(f *flag.Flag) { urlSet = urlSet || f.Name == "url" })
	if !urlSet && defErr != nil {
		fmt.Fprintf(stderr, "shoal health: %v (or pass --url)\n", defErr)
		return 1
	}
	if *timeout <= 0 {
		fmt.Fprintln(stderr, "shoal health: --timeout must be positive")
		return 1
	}
	t, err := caTransport(*caFile)
	if err != nil {
		fmt.Fprintf(stderr, "shoal health: %v\n", err)
		return 1
	}
	if err := checkReady(&http.Client{Transport: t}, *url, *timeout); err != nil {
		fmt.Fprintf(stderr, "shoal health: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ready\n", *url)
	return 0
}

// checkReady returns nil when u answers 200 within timeout, else why not.
func checkReady(hc *http.Client, u string, timeout time.Duration) error {
	if _, err := neturl.Parse(u); err != nil {
		return fmt.Errorf("bad --url %q: %v", u, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := client.New(u, "", client.ReadyURL(u), client.WithHTTPClient(hc)).Ready(ctx)
	var he *client.HTTPError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &he):
		msg := fmt.Sprintf("%s answered %s", u, he.Status)
		body := he.Body
		if len(body) > 512 {
			body = body[:512]
		}
		if b := strings.TrimSpace(string(body)); b != "" {
			msg += ": " + b
		}
		return errors.New(msg)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not answer within %s", u, timeout)
	default:
		return fmt.Errorf("%s: %v", u, err)
	}
}

// defaultHealthURL is /readyz on the port of HTTP_ADDR (default :8080),
// asked on the loopback address when HTTP_ADDR listens on every address,
// over https when TLS_CERT_FILE is set.
func defaultHealthURL(lookup func(string) (string, bool)) (string, error) {
	scheme := "http://"
	if v, ok := lookup("TLS_CERT_FILE"); ok && v != "" {
		scheme = "https://"
	}
	addr := ":8080"
	if v, ok := lookup("HTTP_ADDR"); ok && v != "" {
		addr = v
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return scheme + "127.0.0.1:8080/readyz", fmt.Errorf("HTTP_ADDR %q is not host:port or :port", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return scheme + net.JoinHostPort(host, port) + "/readyz", nil
}

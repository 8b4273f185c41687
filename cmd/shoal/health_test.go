package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/testnode"
)

func TestHealthAnswers(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ready"}`))
	}))
	defer ready.Close()
	starting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"detail":"the node is starting or shutting down"}`))
	}))
	defer starting.Close()
	// An address where nothing listens: take a free port and close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := "http://" + l.Addr().String() + "/readyz"
	l.Close()

	for _, tc := range []struct {
		name   string
		url    string
		code   int
		stderr string
	}{
		{"200 is healthy", ready.URL + "/readyz", 0, ""},
		{"503 is unhealthy", starting.URL + "/readyz", 1, "503"},
		{"404 is unhealthy", ready.URL + "/nope", 1, "404"},
		{"no server is unhealthy", nothing, 1, nothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			got := health([]string{"--url", tc.url, "--timeout", "2s"}, &out, &errOut)
			if got != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", got, tc.code, out.String(), errOut.String())
			}
			if tc.code != 0 && !strings.Contains(errOut.String(), tc.stderr) {
				t.Fatalf("stderr %q does not say why (want it to mention %q)", errOut.String(), tc.stderr)
			}
		})
	}
}

func TestHealthBadUsageIsUnhealthy(t *testing.T) {
	var out, errOut bytes.Buffer
	if got := health([]string{"--no-such-flag"}, &out, &errOut); got != 1 {
		t.Fatalf("exit %d for an unknown flag, want 1 (docker reserves 2)", got)
	}
	if got := health([]string{"--timeout", "0s"}, &out, &errOut); got != 1 {
		t.Fatalf("exit %d for a zero timeout, want 1", got)
	}
}

func TestHealthDefaultURLFromHTTPAddr(t *testing.T) {
	for _, tc := range []struct {
		addr  string // "-": unset
		want  string
		isErr bool
	}{
		{"-", "http://127.0.0.1:8080/readyz", false},
		{"", "http://127.0.0.1:8080/readyz", false},
		{":8080", "http://127.0.0.1:8080/readyz", false},
		{":9000", "http://127.0.0.1:9000/readyz", false},
		{"0.0.0.0:8081", "http://127.0.0.1:8081/readyz", false},
		{"[::]:8082", "http://[::1]:8082/readyz", false},
		{"10.0.0.5:8083", "http://10.0.0.5:8083/readyz", false},
		{"localhost:8084", "http://localhost:8084/readyz", false},
		{"8080", "", true},
	} {
		lookup := func(k string) (string, bool) {
			if k != "HTTP_ADDR" || tc.addr == "-" {
				return "", false
			}
			return tc.addr, true
		}
		got, err := defaultHealthURL(lookup)
		if tc.isErr {
			if err == nil {
				t.Errorf("HTTP_ADDR %q: no error, got %s", tc.addr, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("HTTP_ADDR %q: got %q, %v; want %q", tc.addr, got, err, tc.want)
		}
	}
}

func TestHealthUsesHTTPAddr(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HTTP_ADDR", ":"+port)
	var out, errOut bytes.Buffer
	if got := health(nil, &out, &errOut); got != 0 {
		t.Fatalf("exit %d with HTTP_ADDR=:%s; stderr %q", got, port, errOut.String())
	}
}

// A node serving HTTPS: `shoal health` asks https when TLS_CERT_FILE is
// set and verifies the node with TLS_CA_FILE (or --ca); without the CA it
// says the certificate does not verify.
func TestHealthOfAnHTTPSNode(t *testing.T) {
	dir := t.TempDir()
	if err := devcerts.Write(dir, []string{"test-node"}, nil); err != nil {
		t.Fatal(err)
	}
	cfg := testnode.Config(t.TempDir())
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, devcerts.CertFile("test-node")), filepath.Join(dir, devcerts.KeyFile("test-node"))
	n := testnode.Start(t, cfg)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(n.URL(), "https://"))
	if err != nil {
		t.Fatalf("a TLS node's url %s: %v", n.URL(), err)
	}
	t.Setenv("HTTP_ADDR", ":"+port)
	t.Setenv("TLS_CERT_FILE", cfg.TLSCertFile)
	t.Setenv("TLS_CA_FILE", filepath.Join(dir, devcerts.CAFile))
	var out, errOut bytes.Buffer
	if got := health([]string{"--timeout", "10s"}, &out, &errOut); got != 0 || !strings.Contains(out.String(), "https://127.0.0.1:"+port+"/readyz: ready") {
		t.Fatalf("exit %d; stdout %q, stderr %q", got, out.String(), errOut.String())
	}
	t.Setenv("TLS_CA_FILE", "")
	out.Reset()
	if got := health([]string{"--timeout", "10s"}, &out, &errOut); got != 1 || !strings.Contains(errOut.String(), "certificate") {
		t.Fatalf("without the CA: exit %d; stdout %q, stderr %q", got, out.String(), errOut.String())
	}
}

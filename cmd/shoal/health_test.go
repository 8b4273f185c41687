package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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

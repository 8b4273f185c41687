package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// `shoal certs` writes a CA and a certificate per node that verifies with
// it for the node's name, loopback and the extra hosts, for serving and
// for presenting itself; keys are private; a second run keeps the CA, so
// a node added later verifies with the same one.
func TestCertsWritesACAAndNodeCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errb bytes.Buffer
	if code := run([]string{"certs", "--dir", dir, "--nodes", "node1, node2", "--hosts", "db.example,10.0.0.5"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "node2: TLS_CERT_FILE="+filepath.Join(dir, "node2.pem")) {
		t.Errorf("the output does not say which file is which setting:\n%s", out.String())
	}
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, node := range []string{"node1", "node2"} {
		c := readCert(t, filepath.Join(dir, node+".pem"))
		for _, name := range []string{node, "localhost", "127.0.0.1", "db.example", "10.0.0.5"} {
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("%s for %s (usage %v): %v", node, name, usage, err)
				}
			}
		}
		if fi, err := os.Stat(filepath.Join(dir, node+"-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s's key: %v, mode %v; want 0600", node, err, fi.Mode().Perm())
		}
	}
	if code := run([]string{"certs", "--dir", dir, "--nodes", "node3"}, &out, &errb); code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errb.String())
	}
	if again := readCert(t, filepath.Join(dir, "ca.pem")); !again.Equal(ca) {
		t.Errorf("a second run replaced the CA")
	}
	if _, err := readCert(t, filepath.Join(dir, "node3.pem")).Verify(x509.VerifyOptions{Roots: roots, DNSName: "node3"}); err != nil {
		t.Errorf("node3, added later: %v", err)
	}
	if code := run([]string{"certs", "--dir", dir, "--nodes", "../x"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "not a plain name") {
		t.Errorf("a node name with a path: exit %d, %s", code, errb.String())
	}
}

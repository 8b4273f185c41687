package nodetls

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/devcerts"
)

func filesFor(dir, node string, require bool) Files {
	return Files{Cert: filepath.Join(dir, devcerts.CertFile(node)), Key: filepath.Join(dir, devcerts.KeyFile(node)),
		CA: filepath.Join(dir, devcerts.CAFile), RequireClientCert: require}
}

func load(t *testing.T, f Files) *Material {
	t.Helper()
	m, err := Load(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// serve runs an HTTPS server on loopback with m's server config; its
// handler says whether the client presented a certificate the CA signed.
func serve(t *testing.T, m *Material) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{TLSConfig: m.ServerConfig(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			io.WriteString(w, "verified "+r.TLS.VerifiedChains[0][0].Subject.CommonName)
			return
		}
		io.WriteString(w, "anonymous")
	})}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func client(m *Material) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: m.Transport()}
}

func TestTheSettingsMustGoTogether(t *testing.T) {
	for _, c := range []struct {
		f    Files
		want string
	}{
		{Files{Cert: "c"}, "TLS_CERT_FILE and TLS_KEY_FILE go together"},
		{Files{Key: "k"}, "TLS_CERT_FILE and TLS_KEY_FILE go together"},
		{Files{Cert: "c", Key: "k", RequireClientCert: true}, "TLS_CLIENT_AUTH=require needs"},
		{Files{CA: "a", RequireClientCert: true}, "TLS_CLIENT_AUTH=require needs"},
	} {
		if _, err := Load(c.f, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", c.f, err, c.want)
		}
	}
	dir := t.TempDir()
	if err := devcerts.Write(dir, []string{"node1"}, nil); err != nil {
		t.Fatal(err)
	}
	f := filesFor(dir, "node1", false)
	f.Key = f.CA // a key file that is not the certificate's key
	if _, err := Load(f, nil); err == nil || !strings.Contains(err.Error(), "TLS_CERT_FILE") {
		t.Errorf("a wrong key: %v, want an error naming TLS_CERT_FILE", err)
	}
	f = filesFor(dir, "node1", false)
	f.CA = f.Key // no certificate in it
	if _, err := Load(f, nil); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}

// With node certificates required, a node's own certificate is verified,
// a client without one still connects (users' clients have none, and the
// routes for nodes check for one), and a certificate from another CA
// fails the handshake.
func TestNodeCertificatesAreVerifiedAndOthersRefused(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	if err := devcerts.Write(dir, []string{"node1", "node2"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := devcerts.Write(other, []string{"node2"}, nil); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, load(t, filesFor(dir, "node1", true)))
	url := "https://" + addr + "/"

	if got, err := get(client(load(t, filesFor(dir, "node2", true))), url); err != nil || got != "verified node2" {
		t.Errorf("a node of the cluster: %q, %v; want verified node2", got, err)
	}
	anonymous := load(t, Files{CA: filepath.Join(dir, devcerts.CAFile)})
	if got, err := get(client(anonymous), url); err != nil || got != "anonymous" {
		t.Errorf("a client with the CA and no certificate: %q, %v; want anonymous", got, err)
	}
	stranger := filesFor(other, "node2", true)
	stranger.CA = filepath.Join(dir, devcerts.CAFile) // it trusts the server, the server does not trust it
	if got, err := get(client(load(t, stranger)), url); err == nil {
		t.Errorf("a certificate from another CA was let in: %q", got)
	}
	// A client that does not have the cluster's CA refuses the server.
	if got, err := get(client(load(t, filesFor(other, "node2", false))), url); err == nil || !strings.Contains(err.Error(), "signed by TLS_CA_FILE") {
		t.Errorf("a server from another CA: %q, %v; want a refusal naming TLS_CA_FILE", got, err)
	}
}

// Plain HTTP to a node that serves HTTPS fails with an answer that says so.
func TestPlainHTTPToAnHTTPSNodeSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := devcerts.Write(dir, []string{"node1"}, nil); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, load(t, filesFor(dir, "node1", false)))
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Errorf("plain HTTP: %d %q, want 400 naming HTTPS", resp.StatusCode, body)
	}
}

// A certificate replaced on disk is served from the next look at the
// files on (once a second at most), without a restart; files that do not
// load leave the previous ones in use.
func TestARotatedCertificateIsServedWithoutARestart(t *testing.T) {
	dir := t.TempDir()
	if err := devcerts.Write(dir, []string{"node1"}, nil); err != nil {
		t.Fatal(err)
	}
	m := load(t, filesFor(dir, "node1", false))
	now := time.Now()
	m.now = func() time.Time { return now }
	addr := serve(t, m)
	caPool := func() *x509.CertPool {
		pool := x509.NewCertPool()
		pem, err := os.ReadFile(filepath.Join(dir, devcerts.CAFile))
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			t.Fatalf("reading the CA: %v", err)
		}
		return pool
	}()
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: caPool, ServerName: "node1"})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := served()
	if err := devcerts.Write(dir, []string{"node1"}, nil); err != nil { // same CA, a new certificate
		t.Fatal(err)
	}
	// Make sure the files look changed even on a coarse clock.
	later := time.Now().Add(time.Minute)
	for _, f := range []string{devcerts.CertFile("node1"), devcerts.KeyFile("node1")} {
		if err := os.Chtimes(filepath.Join(dir, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if got := served(); got != first {
		t.Fatalf("the files were looked at again within a second")
	}
	now = now.Add(checkEvery)
	second := served()
	if second == first {
		t.Fatalf("still serving the first certificate after the files changed")
	}
	// A half-written rotation: the previous pair stays in use.
	if err := os.WriteFile(filepath.Join(dir, devcerts.KeyFile("node1")), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(checkEvery)
	if got := served(); got != second {
		t.Errorf("a key that does not load replaced the certificate in use")
	}
}

// A server is verified for the host dialed, an IP address too: a
// certificate of the cluster's CA that is good for other hosts only is
// refused (the first version verified by the TLS server name, which Go
// leaves empty for an IP address, so any certificate of the CA passed for
// 127.0.0.1).
func TestAServerIsVerifiedForTheAddressDialed(t *testing.T) {
	dir := t.TempDir()
	if err := devcerts.Write(dir, []string{"node1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := devcerts.WriteExact(dir, "elsewhere", []string{"10.9.9.9", "other"}); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, load(t, filesFor(dir, "elsewhere", false)))
	c := client(load(t, Files{CA: filepath.Join(dir, devcerts.CAFile)}))
	if got, err := get(c, "https://"+addr+"/"); err == nil {
		t.Fatalf("a certificate for 10.9.9.9 and other passed for %s: %q", addr, got)
	}
	_, port, _ := net.SplitHostPort(addr)
	if got, err := get(c, "https://localhost:"+port+"/"); err == nil {
		t.Fatalf("a certificate for 10.9.9.9 and other passed for localhost: %q", got)
	}
	good := serve(t, load(t, filesFor(dir, "node1", false)))
	if got, err := get(c, "https://"+good+"/"); err != nil || got != "anonymous" {
		t.Fatalf("node1's own certificate at %s: %q, %v", good, got, err)
	}
}

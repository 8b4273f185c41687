package devcluster

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/cluster"
)

func TestCheckFlags(t *testing.T) {
	for _, tc := range []struct {
		nodes, http, gossip int
		ok                  bool
	}{
		{3, 8081, 7947, true},
		{1, 65535, 7947, true},
		{0, 8081, 7947, false},
		{MaxNodes + 1, 8081, 7947, false},
		{3, 65534, 7947, false},
		{3, 0, 7947, false},
		{3, 8081, 8083, false}, // gossip of node3 is HTTP of node3
		{3, 8081, 8084, true},
		{3, 8084, 8081, true},
	} {
		err := CheckFlags(tc.nodes, tc.http, tc.gossip)
		if (err == nil) != tc.ok {
			t.Errorf("CheckFlags(%d, %d, %d) = %v, want ok=%v", tc.nodes, tc.http, tc.gossip, err, tc.ok)
		}
	}
}

func TestPrepare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rel", ".shoal-dev")
	s, err := Prepare(dir, 3, 8081, 7947, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(s.Dir) || s.PeersPath != filepath.Join(s.Dir, "peers.json") {
		t.Fatalf("paths: %+v", s)
	}
	fi, err := os.Stat(filepath.Join(dir, "secrets.env"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.env: %v %v", fi, err)
	}
	if len(s.Secrets.Auth) != 64 || len(s.Secrets.Cluster) != 64 || s.Secrets.Auth == s.Secrets.Cluster {
		t.Fatalf("secrets are not 32 random bytes in hex each: %+v", s.Secrets)
	}
	if claims := jwtClaims(t, readTrim(t, filepath.Join(dir, "admin.token"))); claims["role"] != "admin" ||
		time.Until(time.Unix(int64(claims["exp"].(float64)), 0)) < 29*24*time.Hour {
		t.Fatalf("admin.token is not an admin token for 30 days: %v", claims)
	}
	if claims := jwtClaims(t, readTrim(t, s.UserTokenPath)); claims["sub"] != tokenUser || claims["role"] != nil {
		t.Fatalf("user token: %v", claims)
	}
	if len(s.List.Peers) != 3 {
		t.Fatalf("peers: %+v", s.List)
	}

	// A second run keeps the secrets and the peer list the user edited.
	edited := []byte(`{"peers":[
  {"id":"node1","url":"http://127.0.0.1:9081","gossip":"127.0.0.1:9947","voter":true},
  {"id":"node2","url":"http://127.0.0.1:9082","gossip":"127.0.0.1:9948"},
  {"id":"node3","url":"http://127.0.0.1:9083","gossip":"127.0.0.1:9949","replica":false}
]}`)
	if err := os.WriteFile(s.PeersPath, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Prepare(dir, 3, 8081, 7947, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Secrets != s.Secrets {
		t.Fatal("the secrets changed on the second run")
	}
	if got, _ := os.ReadFile(s.PeersPath); !bytes.Equal(got, edited) || !bytes.Equal(s2.PeersData, edited) || s2.List.Peers[0].URL != "http://127.0.0.1:9081" {
		t.Fatalf("the edited peer list was not kept:\n%s", got)
	}

	// Without --nodes, any count is kept; with another --nodes it is replaced.
	if s3, err := Prepare(dir, 5, 8081, 7947, true, false); err != nil || len(s3.List.Peers) != 3 {
		t.Fatalf("keepAnyCount: %v %+v", err, s3.List)
	}
	s4, err := Prepare(dir, 5, 8081, 7947, false, false)
	if err != nil || len(s4.List.Peers) != 5 {
		t.Fatalf("--nodes 5: %v %+v", err, s4.List)
	}
	if l, err := cluster.ParsePeerList(readFile(t, s.PeersPath), ""); err != nil || len(l.Peers) != 5 {
		t.Fatalf("file not rewritten: %v %+v", err, l)
	}

	// A broken peer list or broken secrets stop it with a clear error.
	os.WriteFile(s.PeersPath, []byte(`{"peers":[`), 0o644)
	if _, err := Prepare(dir, 3, 8081, 7947, true, false); err == nil || !strings.Contains(err.Error(), "not a valid peer list") {
		t.Fatalf("broken peers.json: %v", err)
	}
	os.Remove(s.PeersPath)
	os.WriteFile(filepath.Join(dir, "secrets.env"), []byte("AUTH_SECRET=short\n"), 0o644)
	if _, err := Prepare(dir, 3, 8081, 7947, true, false); err == nil || !strings.Contains(err.Error(), "delete the file") {
		t.Fatalf("broken secrets.env: %v", err)
	}
}

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readTrim(t *testing.T, path string) string {
	return strings.TrimSpace(string(readFile(t, path)))
}

// --tls: https urls, the dev CA and a certificate per node, a transport
// that trusts the CA; a directory made with --tls stays TLS without the
// flag; --tls on a directory of http urls says what to do; a node added
// later gets its certificate when first started.
func TestPrepareWithTLS(t *testing.T) {
	dir := t.TempDir()
	s, err := Prepare(dir, 3, 8081, 7947, true, true)
	if err != nil {
		t.Fatal(err)
	}
	if !s.TLS || s.Transport == nil || !strings.HasPrefix(s.List.Peers[0].URL, "https://127.0.0.1:") {
		t.Fatalf("TLS %v, transport %v, url %s", s.TLS, s.Transport, s.List.Peers[0].URL)
	}
	for _, f := range []string{"ca.pem", "node1.pem", "node3-key.pem"} {
		if _, err := os.Stat(filepath.Join(CertDir(s.Dir), f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	key := readFile(t, filepath.Join(CertDir(s.Dir), "node1-key.pem"))
	if again, err := Prepare(dir, 3, 8081, 7947, true, false); err != nil || !again.TLS {
		t.Errorf("the same directory without --tls: TLS %v, %v", again.TLS, err)
	}
	if !bytes.Equal(readFile(t, filepath.Join(CertDir(s.Dir), "node1-key.pem")), key) {
		t.Errorf("a second run replaced node1's key: a restart of shoal dev keeps the nodes' certificates")
	}
	env, err := s.nodeTLSEnv("node4")
	if err != nil || len(env) != 4 || env[3] != [2]string{"TLS_CLIENT_AUTH", "require"} {
		t.Fatalf("node4's settings: %v, %v", env, err)
	}
	if _, err := os.Stat(env[0][1]); err != nil {
		t.Errorf("node4's certificate was not written: %v", err)
	}
	plain := t.TempDir()
	if _, err := Prepare(plain, 3, 8081, 7947, true, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(plain, 3, 8081, 7947, true, true); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("--tls over http urls: %v", err)
	}
	if p, _, err := AddNode(dir); err != nil || !strings.HasPrefix(p.URL, "https://") {
		t.Errorf("add-node in a TLS directory: %+v, %v", p, err)
	}
}

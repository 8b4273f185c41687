package devcluster

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/nodetls"
)

// `shoal dev --tls`: the nodes serve HTTPS with certificates of a
// development CA kept in DIR/certs (devcerts), and require each other's
// certificates on /internal/ (TLS_CLIENT_AUTH=require). A node added later
// gets its certificate when it is first started.

// CertDir is where a TLS dev cluster keeps its CA and node certificates.
func CertDir(dir string) string { return filepath.Join(dir, "certs") }

// CAPath is the dev CA's certificate, for clients (curl --cacert).
func (s Setup) CAPath() string { return filepath.Join(CertDir(s.Dir), devcerts.CAFile) }

// usesTLS reports whether a peer list's urls are https.
func usesTLS(l cluster.PeerList) bool {
	return len(l.Peers) > 0 && strings.HasPrefix(l.Peers[0].URL, "https://")
}

// scheme is the url scheme of a dev cluster's peers.
func scheme(useTLS bool) string {
	if useTLS {
		return "https://"
	}
	return "http://"
}

// transport is what clients of the cluster's nodes send through: one that
// trusts the dev CA when the cluster uses TLS, else nil (the default).
func (s Setup) transport() (http.RoundTripper, error) {
	if !s.TLS {
		return nil, nil
	}
	m, err := nodetls.Load(nodetls.Files{CA: s.CAPath()}, nil)
	if err != nil {
		return nil, err
	}
	return m.Transport(), nil
}

// ensureCert writes node id's certificate unless it has one already (a
// restart of `shoal dev` keeps the nodes' keys).
func (s Setup) ensureCert(id string) error {
	dir := CertDir(s.Dir)
	if _, err := os.Stat(filepath.Join(dir, devcerts.CertFile(id))); err == nil {
		return nil
	}
	if err := devcerts.Write(dir, []string{id}, nil); err != nil {
		return fmt.Errorf("writing %s's certificate: %w", id, err)
	}
	return nil
}

// nodeTLSEnv is node id's TLS settings, its certificate written first if
// it has none yet (a node added while the cluster runs).
func (s Setup) nodeTLSEnv(id string) ([][2]string, error) {
	if !s.TLS {
		return nil, nil
	}
	if err := s.ensureCert(id); err != nil {
		return nil, err
	}
	dir := CertDir(s.Dir)
	return [][2]string{{"TLS_CERT_FILE", filepath.Join(dir, devcerts.CertFile(id))}, {"TLS_KEY_FILE", filepath.Join(dir, devcerts.KeyFile(id))},
		{"TLS_CA_FILE", s.CAPath()}, {"TLS_CLIENT_AUTH", "require"}}, nil
}

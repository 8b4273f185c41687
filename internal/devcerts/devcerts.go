// Package devcerts writes a development CA and node certificates (`shoal
// certs`, `shoal dev --tls`, the TLS tests): ECDSA P-256 keys and
// crypto/x509 certificates, each node's good for serving HTTPS and for
// presenting itself to the other nodes. A production cluster uses
// certificates from its own CA; these are for trying TLS out.
package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/shoal-db/shoal/internal/atomicfile"
)

// Validity of what Write makes.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	nodeValidity = 825 * 24 * time.Hour // the longest browsers and most tools accept
)

// CAFile and CAKeyFile are the CA's files in the directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// CertFile and KeyFile are node's certificate and key files in the
// directory.
func CertFile(node string) string { return node + ".pem" }
func KeyFile(node string) string  { return node + "-key.pem" }

// Write writes into dir a CA (kept when dir already holds one, so that
// certificates for nodes added later verify with the same CA) and, for
// each node, a certificate for the node's name, localhost, 127.0.0.1, ::1
// and hosts (names or IP addresses), signed by the CA. Keys are written
// readable by their owner only.
func Write(dir string, nodes, hosts []string) error {
	if len(nodes) == 0 {
		return errors.New("no node to write a certificate for: name at least one")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ca, caKey, err := loadOrMakeCA(dir)
	if err != nil {
		return err
	}
	for _, node := range nodes {
		if err := writeNode(dir, ca, caKey, node, append([]string{node, "localhost", "127.0.0.1", "::1"}, hosts...)); err != nil {
			return err
		}
	}
	return nil
}

// WriteCA writes a CA into dir, unless it already holds one.
func WriteCA(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_, _, err := loadOrMakeCA(dir)
	return err
}

// WriteExact writes, with the CA in dir (made if missing), a certificate
// named node that is good for hosts and nothing else: for tests of a
// certificate presented for the wrong host.
func WriteExact(dir, node string, hosts []string) error {
	ca, caKey, err := loadOrMakeCA(dir)
	if err != nil {
		return err
	}
	return writeNode(dir, ca, caKey, node, hosts)
}

func writeNode(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, node string, hosts []string) error {
	if node == "" || filepath.Base(node) != node {
		return fmt.Errorf("node name %q: not a plain name (it names its files)", node)
	}
	certPEM, keyPEM, err := nodeCert(ca, caKey, node, hosts)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, CertFile(node)), certPEM, 0o644); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, KeyFile(node)), keyPEM, 0o600)
}

func loadOrMakeCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if _, err := os.Stat(certPath); err == nil {
		pair, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("the CA in %s does not load (%w): remove %s and %s to make a new one, then every node's certificate again", dir, err, CAFile, CAKeyFile)
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, fmt.Errorf("the CA key %s is not an ECDSA key", keyPath)
		}
		ca, err := x509.ParseCertificate(pair.Certificate[0])
		return ca, key, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Shoal development CA", Organization: []string{"Shoal"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	ca, key, certPEM, keyPEM, err := issue(tmpl, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := atomicfile.Write(certPath, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// issue makes a key and a certificate of tmpl for it, signed by
// parentKey as parent (by the new key itself when parent is nil: a CA).
func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (cert *x509.Certificate, key *ecdsa.PrivateKey, certPEM, keyPEM []byte, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	cert, err = x509.ParseCertificate(der)
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), err
}

func nodeCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, node string, hosts []string) (certPEM, keyPEM []byte, err error) {
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: node, Organization: []string{"Shoal"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(nodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// A node serves HTTPS and presents itself to the other nodes.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	_, _, certPEM, keyPEM, err = issue(tmpl, ca, caKey)
	return certPEM, keyPEM, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

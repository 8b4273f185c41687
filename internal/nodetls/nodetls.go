// Package nodetls loads a node's TLS files (TLS_CERT_FILE, TLS_KEY_FILE,
// TLS_CA_FILE) and keeps them current: a certificate, key or CA replaced
// on disk is used from the next handshake on, without a restart.
//
// The server side serves the node's certificate and, when node
// certificates are required (TLS_CLIENT_AUTH=require), asks clients for
// one and verifies any it is given against the CA: a certificate from
// another CA fails the handshake, and a client without one still
// connects (users' clients need none), so that routes for nodes only
// (/internal/) check for a verified one themselves. The client
// side (DialTLS), used for every call to another node and for an https
// peer list, verifies servers against the CA (the system's roots without
// one) and for the host dialed, name or IP address, and presents the
// node's certificate when asked. Files are looked at again at most once a
// second; open connections keep what they started with.
package nodetls

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Files names a node's TLS files. Cert and Key come together; CA alone
// makes a node that serves plain HTTP verify https peers with it.
type Files struct {
	Cert, Key, CA string
	// RequireClientCert: /internal/ takes requests only from clients with
	// a certificate the CA signed (TLS_CLIENT_AUTH=require).
	RequireClientCert bool
}

// Enabled reports whether any TLS file is set.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Check says what is wrong with the combination, in words that name the
// settings.
func (f Files) Check() error {
	switch {
	case (f.Cert == "") != (f.Key == ""):
		return errors.New("TLS_CERT_FILE and TLS_KEY_FILE go together: set both to serve HTTPS, or neither")
	case f.RequireClientCert && (f.Cert == "" || f.CA == ""):
		return errors.New("TLS_CLIENT_AUTH=require needs TLS_CERT_FILE, TLS_KEY_FILE and TLS_CA_FILE: nodes present their own certificates to each other and verify them with the CA")
	}
	return nil
}

// checkEvery bounds how often a handshake reads the files to see whether
// they changed.
const checkEvery = time.Second

// Material is a node's current TLS certificate and CA, re-read when
// their files change.
type Material struct {
	files Files
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate // nil: no certificate (CA only)
	pool    *x509.CertPool   // nil: the system's roots
	stamp   stamp
	checked time.Time
}

// stamp is what says a file changed: a hash of its content, per file
// (cert, key, CA). Times and sizes would miss a key replaced by one of the
// same size with its time kept (cp -p, rsync -t, tar).
type stamp [3][sha256.Size]byte

// Load reads the files once (an error names the file and what to do)
// and returns the material that keeps them current.
func Load(f Files, log *slog.Logger) (*Material, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	m := &Material{files: f, log: log, now: time.Now}
	st, err := m.stampNow()
	if err != nil {
		return nil, err
	}
	cert, pool, err := read(f)
	if err != nil {
		return nil, err
	}
	m.cert, m.pool, m.stamp, m.checked = cert, pool, st, m.now()
	return m, nil
}

// read loads the certificate pair and the CA.
func read(f Files) (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if f.Cert != "" {
		c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("TLS_CERT_FILE %s with TLS_KEY_FILE %s: %w (both must be PEM, the key the certificate's own)", f.Cert, f.Key, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("TLS_CA_FILE: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("TLS_CA_FILE %s holds no PEM certificate", f.CA)
		}
	}
	return cert, pool, nil
}

func (m *Material) stampNow() (stamp, error) {
	var st stamp
	for i, name := range []string{m.files.Cert, m.files.Key, m.files.CA} {
		if name == "" {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return st, fmt.Errorf("TLS file: %w", err)
		}
		st[i] = sha256.Sum256(data)
	}
	return st, nil
}

// current is the certificate and CA to use now: read again when a file's
// content changed (looked at once a second at most). Files that do not load
// (a rotation half written, a key that does not match yet) leave the
// previous ones in use; the next look tries again.
func (m *Material) current() (*tls.Certificate, *x509.CertPool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if now.Sub(m.checked) < checkEvery {
		return m.cert, m.pool
	}
	m.checked = now
	st, err := m.stampNow()
	if err != nil || st == m.stamp {
		if err != nil {
			m.log.Warn("could not look at the TLS files; still using the ones loaded before", "err", err)
		}
		return m.cert, m.pool
	}
	cert, pool, err := read(m.files)
	if err != nil {
		m.log.Warn("the TLS files changed but do not load; still using the ones loaded before", "err", err)
		return m.cert, m.pool
	}
	m.cert, m.pool, m.stamp = cert, pool, st
	m.log.Info("TLS files changed on disk: using them from now on")
	return m.cert, m.pool
}

// Serving reports whether the node serves HTTPS (it has a certificate).
func (m *Material) Serving() bool { return m != nil && m.files.Cert != "" }

// ServerConfig is the tls.Config the node's HTTPS server uses (nil when
// the node serves plain HTTP).
func (m *Material) ServerConfig() *tls.Config {
	if !m.Serving() {
		return nil
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := m.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, Certificates: []tls.Certificate{*cert}}
			if m.files.RequireClientCert {
				// Asked, verified if given: users' clients have none; the
				// routes for nodes only check for one.
				c.ClientCAs, c.ClientAuth = pool, tls.VerifyClientCertIfGiven
			}
			return c, nil
		},
	}
}

// clientConfig is the tls.Config of one connection to host (a name or an
// IP address): the server is verified against the CA as it is now (the
// system's roots without one) and for host, and the node's certificate is
// presented when asked.
func (m *Material) clientConfig(host string) *tls.Config {
	_, pool := m.current()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		RootCAs:    pool,
		ServerName: host,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert, _ := m.current(); cert != nil {
				return cert, nil
			}
			return &tls.Certificate{}, nil // none: the server decides
		},
	}
}

// handshakeTimeout bounds a TLS handshake without a shorter deadline.
const handshakeTimeout = 10 * time.Second

// DialTLS is an http.Transport's DialTLSContext for calls to other nodes
// and for an https peer list: each connection, dialed with dial, verifies
// the server against the CA as it is now (a config built per connection,
// so that a CA replaced on disk counts from the next one) and for the host
// it dials, and presents the node's certificate when asked.
func (m *Material) DialTLS(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
		conn := tls.Client(raw, m.clientConfig(host))
		if err := conn.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("TLS with %s: %w (is the node's certificate signed by TLS_CA_FILE and good for %s?)", addr, err, host)
		}
		return conn, nil
	}
}

// Transport is an http.Transport with the default one's settings whose
// https connections go through DialTLS.
func (m *Material) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialTLSContext = m.DialTLS((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	return t
}

package devcluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/atomicfile"
	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/wording"
)

const (
	// DefaultDir is the cluster directory when --dir is not given.
	DefaultDir = ".shoal-dev"
	// MaxNodes is the most nodes --nodes accepts.
	MaxNodes = 50
	// PeersRefresh is how often the nodes re-read the peer list
	// (PEERS_REFRESH).
	PeersRefresh = "2s"

	firstVoters   = 3 // the first nodes of a new peer list vote
	tokenTTL      = 30 * 24 * time.Hour
	tokenAudience = "shoal"
	tokenUser     = "alice" // the user whose token is written beside the admin's
)

// CheckFlags checks the node count and the first HTTP and gossip ports of
// `shoal dev`, and says which flag is wrong and what it accepts.
func CheckFlags(nodes, httpPort, gossipPort int) error {
	switch {
	case nodes < 1 || nodes > MaxNodes:
		return fmt.Errorf("--nodes %d: use 1..%d", nodes, MaxNodes)
	case httpPort < 1 || httpPort+nodes-1 > 65535:
		return fmt.Errorf("--http-port %d: ports %d..%d must be within 1..65535", httpPort, httpPort, httpPort+nodes-1)
	case gossipPort < 1 || gossipPort+nodes-1 > 65535:
		return fmt.Errorf("--gossip-port %d: ports %d..%d must be within 1..65535", gossipPort, gossipPort, gossipPort+nodes-1)
	case httpPort < gossipPort+nodes && gossipPort < httpPort+nodes:
		return fmt.Errorf("--http-port %d and --gossip-port %d overlap for %d nodes: HTTP and gossip both use TCP, so their port ranges must be apart",
			httpPort, gossipPort, nodes)
	}
	return nil
}

// Setup is what Prepare made ready in the cluster directory.
type Setup struct {
	Dir, PeersPath string // absolute
	Secrets        Secrets
	List           cluster.PeerList
	PeersData      []byte   // the peer list file as the nodes start with it
	Notes          []string // what was created or reused, for the log
	Reused         bool     // peers.json existed and is used as it is
	AdminToken     string
	UserTokenPath  string
	// TLS: the nodes serve HTTPS with certificates in CertDir(Dir).
	TLS bool
	// Transport carries requests to the nodes: it trusts the dev CA with
	// TLS; nil: the default.
	Transport http.RoundTripper
}

// Prepare creates dir (made absolute) with its secrets, peer list and
// tokens. An existing peers.json is kept as it is when it has nodes peers,
// or whatever its count when keepAnyCount (--nodes not given). With useTLS
// the peers' urls are https and the certificates are written (a kept
// peer list of https urls makes the cluster TLS too).
func Prepare(dir string, nodes, httpPort, gossipPort int, keepAnyCount, useTLS bool) (Setup, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Setup{}, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return Setup{}, fmt.Errorf("creating the cluster directory: %w", err)
	}
	s := Setup{Dir: abs, PeersPath: filepath.Join(abs, "peers.json")}
	var created bool
	if s.Secrets, created, err = loadOrCreateSecrets(filepath.Join(abs, "secrets.env")); err != nil {
		return Setup{}, err
	}
	if created {
		s.Notes = append(s.Notes, "generated AUTH_SECRET and CLUSTER_SECRET in "+filepath.Join(abs, "secrets.env")+" (kept for the next runs)")
	}
	data, err := os.ReadFile(s.PeersPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.Notes = append(s.Notes, "wrote the peer list "+s.PeersPath)
	case err != nil:
		return Setup{}, fmt.Errorf("reading the peer list: %w", err)
	default:
		list, perr := cluster.ParsePeerList(data, "")
		if perr != nil {
			return Setup{}, fmt.Errorf("%s is not a valid peer list: %v; fix it, or delete it to have `shoal dev` write a new one", s.PeersPath, perr)
		}
		if useTLS && !usesTLS(list) {
			return Setup{}, fmt.Errorf("%s lists http:// urls, and --tls asks for https: delete it to have `shoal dev --tls` write a new one (the nodes' data stays), or run without --tls", s.PeersPath)
		}
		if len(list.Peers) == nodes || keepAnyCount {
			s.List, s.PeersData, s.Reused = list, data, true
			s.Notes = append(s.Notes, fmt.Sprintf("using the peer list %s as it is (%s)", s.PeersPath, wording.Plural(len(list.Peers), "peer")))
		} else {
			s.Notes = append(s.Notes, fmt.Sprintf("replaced the peer list %s: it had %s and --nodes asks for %d",
				s.PeersPath, wording.Plural(len(list.Peers), "peer"), nodes))
		}
	}
	if s.PeersData == nil {
		s.List = LoopbackPeerList(nodes, httpPort, gossipPort, useTLS)
		s.PeersData = FormatPeerList(s.List)
		if err := atomicfile.Write(s.PeersPath, s.PeersData, 0o644); err != nil {
			return Setup{}, fmt.Errorf("writing the peer list: %w", err)
		}
	}
	if s.TLS = usesTLS(s.List); s.TLS {
		if err := devcerts.WriteCA(CertDir(abs)); err != nil {
			return Setup{}, fmt.Errorf("writing the development CA: %w", err)
		}
		for _, id := range SortedIDs(s.List) {
			if err := s.ensureCert(id); err != nil {
				return Setup{}, err
			}
		}
		s.Notes = append(s.Notes, "the development CA and the nodes' certificates are in "+CertDir(abs)+" (clients: curl --cacert "+s.CAPath()+")")
		if s.Transport, err = s.transport(); err != nil {
			return Setup{}, err
		}
	}
	secret := []byte(s.Secrets.Auth)
	if s.AdminToken, err = api.MintToken(secret, api.TokenSpec{Admin: true, Audience: tokenAudience, TTL: tokenTTL}); err != nil {
		return Setup{}, err
	}
	if err := atomicfile.Write(filepath.Join(abs, "admin.token"), []byte(s.AdminToken+"\n"), 0o600); err != nil {
		return Setup{}, fmt.Errorf("writing the admin token: %w", err)
	}
	userToken, err := api.MintToken(secret, api.TokenSpec{User: tokenUser, Audience: tokenAudience, TTL: tokenTTL})
	if err != nil {
		return Setup{}, err
	}
	s.UserTokenPath = filepath.Join(abs, tokenUser+".token")
	if err := atomicfile.Write(s.UserTokenPath, []byte(userToken+"\n"), 0o600); err != nil {
		return Setup{}, fmt.Errorf("writing the user token: %w", err)
	}
	return s, nil
}

// Secrets are the cluster's shared secrets, kept in DIR/secrets.env.
type Secrets struct {
	Auth, Cluster string // AUTH_SECRET and CLUSTER_SECRET
}

// loadOrCreateSecrets reads path, or creates it (mode 0600) with new random
// secrets; created says which.
func loadOrCreateSecrets(path string) (Secrets, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		s := Secrets{Auth: randomHex(32), Cluster: randomHex(32)}
		content := "# Secrets of the `shoal dev` cluster in this directory; keep them private.\n" +
			"AUTH_SECRET=" + s.Auth + "\nCLUSTER_SECRET=" + s.Cluster + "\n"
		if err := atomicfile.Write(path, []byte(content), 0o600); err != nil {
			return Secrets{}, false, fmt.Errorf("writing the secrets: %w", err)
		}
		return s, true, nil
	}
	if err != nil {
		return Secrets{}, false, fmt.Errorf("reading the secrets: %w", err)
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return Secrets{}, false, fmt.Errorf("%s: line %q is not KEY=VALUE; fix it, or delete the file to generate new secrets", path, line)
		}
		vals[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	s := Secrets{Auth: vals["AUTH_SECRET"], Cluster: vals["CLUSTER_SECRET"]}
	for k, v := range map[string]string{"AUTH_SECRET": s.Auth, "CLUSTER_SECRET": s.Cluster} {
		if len(v) < 16 {
			return Secrets{}, false, fmt.Errorf("%s: %s is missing or shorter than 16 bytes; fix it, or delete the file to generate new secrets", path, k)
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
		if err := os.Chmod(path, 0o600); err != nil {
			return Secrets{}, false, fmt.Errorf("making %s private: %w", path, err)
		}
	}
	return s, false, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/devcerts"
)

const (
	tlsComposeFile  = "docker-compose.tls.yml"
	tlsPeersExample = "peers.tls.example.json"
	tlsInside       = "/etc/shoal/tls"
)

// The TLS variant (docker-compose.tls.yml over docker-compose.yml): every
// node serves HTTPS with its own certificate under the names `shoal certs`
// writes, mounted read-only from ./certs, requires the other nodes'
// certificates, publishes an https PUBLIC_URL, and reads a peer list of
// https urls that matches the services; the README gives the command.
func TestComposeTLSVariant(t *testing.T) {
	root := repoRoot(t)
	p := loadComposeFiles(t, []string{composeFile, tlsComposeFile}, []string{"*"})
	nodes, _ := split(t, p)
	if len(nodes) != 4 {
		t.Fatalf("nodes %v, want node1..node4 with every profile", nodes)
	}
	for _, name := range nodes {
		svc := p.Services[name]
		cfg, err := resolveConfig(svc)
		if err != nil {
			t.Errorf("service %s: %v", name, err)
			continue
		}
		want := map[string]string{
			"TLS_CERT_FILE":   tlsInside + "/" + devcerts.CertFile(name),
			"TLS_KEY_FILE":    tlsInside + "/" + devcerts.KeyFile(name),
			"TLS_CA_FILE":     tlsInside + "/" + devcerts.CAFile,
			"TLS_CLIENT_AUTH": "require",
			"PUBLIC_URL":      "https://localhost:" + strconv.Itoa(firstHostPort+atoi(t, number(name))),
		}
		got := map[string]string{"TLS_CERT_FILE": cfg.TLSCertFile, "TLS_KEY_FILE": cfg.TLSKeyFile, "TLS_CA_FILE": cfg.TLSCAFile,
			"TLS_CLIENT_AUTH": cfg.TLSClientAuth, "PUBLIC_URL": cfg.PublicURL}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("service %s: %s %q, want %q", name, k, got[k], w)
			}
		}
		// Its own files only: the CA's certificate, its certificate and
		// key; not the CA's key, not another node's key.
		var tlsMounts []string
		for _, v := range svc.Volumes {
			if strings.HasPrefix(v.Target, tlsInside+"/") || v.Target == tlsInside {
				tlsMounts = append(tlsMounts, v.Target)
			}
		}
		slices.Sort(tlsMounts)
		wantMounts := []string{want["TLS_CA_FILE"], want["TLS_KEY_FILE"], want["TLS_CERT_FILE"]}
		slices.Sort(wantMounts)
		if !slices.Equal(tlsMounts, wantMounts) {
			t.Errorf("service %s mounts %v under %s, want exactly %v", name, tlsMounts, tlsInside, wantMounts)
		}
		for _, f := range wantMounts {
			if !mountsReadOnly(root, svc, filepath.Join(root, "certs", filepath.Base(f)), f) {
				t.Errorf("service %s does not mount ./certs/%s read-only at %s", name, filepath.Base(f), f)
			}
		}
		checkPeersMount(t, root, svc, filepath.Join(root, tlsPeersExample))
		if hc := svc.HealthCheck; hc == nil || !slices.Equal(hc.Test, types.HealthCheckTest{"CMD", "shoal", "health"}) {
			t.Errorf("service %s: health check %v, want shoal health (it asks https with TLS_CA_FILE when TLS_CERT_FILE is set)", name, hc)
		}
	}

	// The peer list: the plain one's nodes, at https urls.
	data, err := os.ReadFile(filepath.Join(root, tlsPeersExample))
	if err != nil {
		t.Fatal(err)
	}
	list, err := cluster.ParsePeerList(data, "")
	if err != nil {
		t.Fatalf("%s: %v", tlsPeersExample, err)
	}
	def := loadComposeFiles(t, []string{composeFile, tlsComposeFile}, nil)
	defNodes, _ := split(t, def)
	if !slices.Equal(list.IDs(), defNodes) {
		t.Errorf("%s lists %v, the nodes without a profile are %v", tlsPeersExample, list.IDs(), defNodes)
	}
	for _, peer := range list.Peers {
		svc := def.Services[peer.ID]
		if want := "https://" + svc.Name + ":" + port(t, svc, "HTTP_ADDR"); peer.URL != want {
			t.Errorf("peer %s has url %q, want %s", peer.ID, peer.URL, want)
		}
	}

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"docker compose -f docker-compose.yml -f docker-compose.tls.yml up", "shoal certs --dir certs --nodes node1,node2,node3,node4"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not give the command %q", want)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mountsReadOnly reports whether svc bind-mounts source at target,
// read-only.
func mountsReadOnly(root string, svc types.ServiceConfig, source, target string) bool {
	for _, v := range svc.Volumes {
		src := v.Source
		if !filepath.IsAbs(src) {
			src = filepath.Join(root, src)
		}
		if v.Target == target && v.Type == types.VolumeTypeBind && v.ReadOnly && filepath.Clean(src) == source {
			return true
		}
	}
	return false
}

package testcluster_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/devcerts"
	"github.com/shoal-db/shoal/internal/nodetls"
	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// A cluster over HTTPS, nodes requiring each other's certificates: a
// client with the CA uses the routes; a write sent to a node that is not
// the master is forwarded, acknowledged by a majority (so replicated) and
// read on every copy; after the master stops, a copy takes over and the
// write is still there.
func TestATLSClusterForwardsReplicatesAndFailsOver(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.TLS())
	token := testnode.AdminToken(t)
	user := "tls-user"
	p := shard.PartitionOf(user, testcluster.Partitions)
	master := c.MasterOf(p)
	var entry *testcluster.Node
	for _, n := range c.Nodes {
		if n.ID != master {
			entry = n
			break
		}
	}
	if !strings.HasPrefix(entry.URL(), "https://") {
		t.Fatalf("a TLS node's url is %s", entry.URL())
	}
	cl := entry.Client(token)
	path := "/v1/users/" + user + "/collections/c/documents/"
	if r := cl.Do("PUT", path+"a", map[string]any{"n": 1}, "X-Write-Concern", "majority"); r.Status != 201 || r.Header.Get("X-Served-By") != master {
		t.Fatalf("a majority write through %s: %d %s (served by %q, the master is %s)", entry.ID, r.Status, r.Body, r.Header.Get("X-Served-By"), master)
	}
	sameEverywhere(t, c, token, user, "a")
	// The other routes a client uses, through the same node.
	for _, rt := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"POST", path, map[string]any{"n": 2}, 201},
		{"PATCH", path + "a", map[string]any{"m": 1}, 200},
		{"GET", path + "a", nil, 200},
		{"GET", path + "?limit=10", nil, 200},
		{"GET", "/v1/users/" + user + "/collections", nil, 200},
		{"GET", "/v1/users/" + user + "/placement", nil, 200},
		{"GET", "/v1/cluster", nil, 200},
		{"GET", "/v1/admin/rollback", nil, 200},
		{"GET", "/healthz", nil, 200},
		{"GET", "/readyz", nil, 200},
		{"GET", "/metrics", nil, 200},
	} {
		if r := cl.Do(rt.method, rt.path, rt.body); r.Status != rt.want {
			t.Errorf("%s %s: %d %s, want %d", rt.method, rt.path, r.Status, r.Body, rt.want)
		}
	}

	c.Node(master).Stop()
	testnode.Eventually(t, 30*time.Second, "a copy takes the partition over", func() (bool, string) {
		m := c.MasterOf(p)
		return m != "" && m != master, "master " + m
	})
	if r := cl.Do("PUT", path+"b", map[string]any{"n": 3}, "X-Write-Concern", "majority"); r.Status != 201 {
		t.Fatalf("a write after the failover: %d %s", r.Status, r.Body)
	}
	if r := cl.Do("GET", path+"a", nil, "X-Read-Concern", "linearizable"); r.Status != 200 || r.JSON(t)["m"] != float64(1) {
		t.Fatalf("the write before the failover, read after it: %d %s", r.Status, r.Body)
	}
	// The deletes: a document, then the user.
	if r := cl.Do("DELETE", path+"b", nil); r.Status != 204 {
		t.Errorf("DELETE a document: %d %s", r.Status, r.Body)
	}
	if r := cl.Do("DELETE", "/v1/users/"+user+"/", nil); r.Status != 200 {
		t.Errorf("DELETE the user: %d %s", r.Status, r.Body)
	}
}

// What a TLS node refuses: /internal/ from a client without a node
// certificate (403, saying what to give it), a certificate from another
// CA (the handshake fails), and plain HTTP (400 that names HTTPS).
func TestATLSNodeRefusesStrangersOnItsInternalRoutes(t *testing.T) {
	c := testcluster.Start(t, 1, testcluster.TLS())
	url := c.Nodes[0].URL()
	ca := filepath.Join(c.CertDir, devcerts.CAFile)

	withCA, err := nodetls.Load(nodetls.Files{CA: ca}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: withCA.Transport()}).Get(url + "/internal/v1/ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), "TLS_CA_FILE") {
		t.Errorf("/internal/ without a node certificate: %d %s, want 403 naming TLS_CA_FILE", resp.StatusCode, body)
	}

	other := t.TempDir()
	if err := devcerts.Write(other, []string{"node2"}, nil); err != nil {
		t.Fatal(err)
	}
	stranger, err := nodetls.Load(nodetls.Files{Cert: filepath.Join(other, devcerts.CertFile("node2")), Key: filepath.Join(other, devcerts.KeyFile("node2")), CA: ca}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: stranger.Transport()}).Get(url + "/internal/v1/ping"); err == nil {
		resp.Body.Close()
		t.Errorf("a certificate from another CA was let in: %s", resp.Status)
	}

	plain := "http://" + strings.TrimPrefix(url, "https://")
	resp, err = http.Get(plain + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "HTTPS") {
		t.Errorf("plain HTTP to a TLS node: %d %s, want 400 naming HTTPS", resp.StatusCode, body)
	}

	// A client that does not trust the cluster's CA is told so by its
	// own TLS stack, before it sends anything.
	if _, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}).Get(url + "/healthz"); err == nil || !strings.Contains(fmt.Sprint(err), "certificate") {
		t.Errorf("a client without the CA: %v, want a certificate error", err)
	}
}

package devcluster

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/cluster"
)

func TestNodeFor(t *testing.T) {
	for _, tc := range []struct {
		url, gossip, addr string
		ok                bool
	}{
		{"http://127.0.0.1:8081", "127.0.0.1:7947", "127.0.0.1:8081", true},
		{"http://localhost:8081", "localhost:7947", "localhost:8081", true},
		{"http://[::1]:8081", "[::1]:7947", "[::1]:8081", true},
		{"http://127.0.0.2:8081", "127.0.0.2:7947", "127.0.0.2:8081", true},
		{"http://node1:8080", "node1:7946", "", false},
		{"http://127.0.0.1:8081", "10.0.0.1:7947", "", false},
		{"https://127.0.0.1:8081", "127.0.0.1:7947", "127.0.0.1:8081", true}, // shoal dev --tls
		{"ftp://127.0.0.1:8081", "127.0.0.1:7947", "", false},
		{"http://127.0.0.1", "127.0.0.1:7947", "", false},
	} {
		n, err := NodeFor(cluster.Peer{ID: "n", URL: tc.url, Gossip: tc.gossip})
		if (err == nil) != tc.ok || n.HTTPAddr != tc.addr {
			t.Errorf("NodeFor(%s, %s) = %q, %v; want %q ok=%v", tc.url, tc.gossip, n.HTTPAddr, err, tc.addr, tc.ok)
		}
	}
	local, skipped := LocalNodes(cluster.PeerList{Peers: []cluster.Peer{
		{ID: "node10", URL: "http://127.0.0.1:8090", Gossip: "127.0.0.1:7956"},
		{ID: "far", URL: "http://far:8080", Gossip: "far:7946"},
		{ID: "node2", URL: "http://127.0.0.1:8082", Gossip: "127.0.0.1:7948"},
	}})
	if len(local) != 2 || local[0].ID != "node2" || local[1].ID != "node10" || len(skipped) != 1 || !strings.Contains(skipped[0], "far") {
		t.Fatalf("LocalNodes: %+v %q", local, skipped)
	}
}

func TestChildEnv(t *testing.T) {
	parent := []string{"PATH=/bin", "MONGO_URI=mongodb://elsewhere", "AUTH_SECRET=parent", "HOME=/root", "SHOAL_RUN_MAIN=1", "INSECURE=true"}
	got := childEnv(parent, [][2]string{{"NODE_ID", "node1"}, {"AUTH_SECRET", "child"}})
	want := []string{"PATH=/bin", "HOME=/root", "SHOAL_RUN_MAIN=1", "NODE_ID=node1", "AUTH_SECRET=child"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

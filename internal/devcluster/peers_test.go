package devcluster

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/cluster"
)

func TestLoopbackPeerListParsesAndRoundTrips(t *testing.T) {
	l := LoopbackPeerList(4, 8081, 7947, false)
	want := []cluster.Peer{
		{ID: "node1", URL: "http://127.0.0.1:8081", Gossip: "127.0.0.1:7947", Sharding: true, Replica: true, Voter: true},
		{ID: "node2", URL: "http://127.0.0.1:8082", Gossip: "127.0.0.1:7948", Sharding: true, Replica: true, Voter: true},
		{ID: "node3", URL: "http://127.0.0.1:8083", Gossip: "127.0.0.1:7949", Sharding: true, Replica: true, Voter: true},
		{ID: "node4", URL: "http://127.0.0.1:8084", Gossip: "127.0.0.1:7950", Sharding: true, Replica: true, Voter: false},
	}
	if !reflect.DeepEqual(l.Peers, want) {
		t.Fatalf("LoopbackPeerList:\n%+v\nwant\n%+v", l.Peers, want)
	}
	data := FormatPeerList(l)
	parsed, err := cluster.ParsePeerList(data, "node2")
	if err != nil {
		t.Fatalf("the node's loader refuses what shoal dev writes: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(parsed, l) {
		t.Fatalf("round trip changed the list:\n%+v\n%+v", parsed, l)
	}
	if n := strings.Count(string(data), "\n"); n != 4+4 {
		t.Fatalf("want one peer per line:\n%s", data)
	}
}

func TestFormatPeerListNaturalOrder(t *testing.T) {
	l := LoopbackPeerList(11, 9001, 9501, false)
	parsed, err := cluster.ParsePeerList(FormatPeerList(l), "")
	if err != nil {
		t.Fatal(err)
	}
	data := string(FormatPeerList(parsed)) // the loader sorts node10 before node2; the file does not
	if strings.Index(data, `"node2"`) > strings.Index(data, `"node10"`) {
		t.Fatalf("node10 before node2:\n%s", data)
	}
}

func TestDiffPeerLists(t *testing.T) {
	p := func(id string, port int) cluster.Peer {
		return cluster.Peer{ID: id, URL: "http://127.0.0.1:" + strconv.Itoa(port), Gossip: "127.0.0.1:" + strconv.Itoa(port+1000), Sharding: true}
	}
	list := func(ps ...cluster.Peer) cluster.PeerList { return cluster.PeerList{Peers: ps} }
	voter := p("b", 2)
	voter.Voter = true
	for _, tc := range []struct {
		name     string
		old, cur cluster.PeerList
		want     peerDiff
	}{
		{"same", list(p("a", 1), p("b", 2)), list(p("a", 1), p("b", 2)), peerDiff{}},
		{"added", list(p("a", 1)), list(p("a", 1), p("b", 2), p("c", 3)), peerDiff{Added: []cluster.Peer{p("b", 2), p("c", 3)}}},
		{"removed", list(p("a", 1), p("b", 2)), list(p("a", 1)), peerDiff{Removed: []cluster.Peer{p("b", 2)}}},
		{"changed port", list(p("a", 1)), list(p("a", 5)), peerDiff{Changed: []cluster.Peer{p("a", 5)}}},
		{"changed flag", list(p("a", 1), p("b", 2)), list(p("a", 1), voter), peerDiff{Changed: []cluster.Peer{voter}}},
		{"all at once", list(p("a", 1), p("b", 2)), list(p("a", 7), p("c", 3)),
			peerDiff{Added: []cluster.Peer{p("c", 3)}, Removed: []cluster.Peer{p("b", 2)}, Changed: []cluster.Peer{p("a", 7)}}},
		{"from empty", list(), list(p("a", 1)), peerDiff{Added: []cluster.Peer{p("a", 1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := diffPeerLists(tc.old, tc.cur); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNextPeer(t *testing.T) {
	peer := func(id, url, gossip string) cluster.Peer {
		return cluster.Peer{ID: id, URL: url, Gossip: gossip, Sharding: true, Replica: true}
	}
	for _, tc := range []struct {
		name            string
		peers           []cluster.Peer
		id, url, gossip string
		wantErr         bool
	}{
		{name: "after shoal dev defaults", peers: LoopbackPeerList(3, 8081, 7947, false).Peers,
			id: "node4", url: "http://127.0.0.1:8084", gossip: "127.0.0.1:7950"},
		{name: "max port, not count", peers: []cluster.Peer{peer("node1", "http://127.0.0.1:8081", "127.0.0.1:7947"), peer("node2", "http://127.0.0.1:9000", "127.0.0.1:7990")},
			id: "node3", url: "http://127.0.0.1:9001", gossip: "127.0.0.1:7991"},
		{name: "id taken after a removal", peers: []cluster.Peer{peer("node1", "http://127.0.0.1:8081", "127.0.0.1:7947"), peer("node3", "http://127.0.0.1:8083", "127.0.0.1:7949")},
			id: "node4", url: "http://127.0.0.1:8084", gossip: "127.0.0.1:7950"},
		{name: "http port used by gossip", peers: []cluster.Peer{peer("node1", "http://127.0.0.1:8081", "127.0.0.1:8082")},
			id: "node2", url: "http://127.0.0.1:8083", gossip: "127.0.0.1:8084"},
		{name: "gossip port used by http", peers: []cluster.Peer{peer("node1", "http://127.0.0.1:7000", "127.0.0.1:6999"), peer("x", "http://127.0.0.1:7001", "127.0.0.1:6000")},
			id: "node3", url: "http://127.0.0.1:7002", gossip: "127.0.0.1:7003"},
		{name: "non-loopback peers count too", peers: []cluster.Peer{peer("node1", "http://node1:8080", "node1:7946")},
			id: "node2", url: "http://127.0.0.1:8081", gossip: "127.0.0.1:7947"},
		{name: "no room", peers: []cluster.Peer{peer("node1", "http://127.0.0.1:65535", "127.0.0.1:7946")}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nextPeer(cluster.PeerList{Peers: tc.peers})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			want := cluster.Peer{ID: tc.id, URL: tc.url, Gossip: tc.gossip, Sharding: true, Replica: true}
			if err != nil || got != want {
				t.Fatalf("got %+v, %v; want %+v", got, err, want)
			}
		})
	}
}

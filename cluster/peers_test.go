package cluster

import (
	"strings"
	"testing"
)

func TestParsePeerList(t *testing.T) {
	good := `{"peers":[
	  {"id":"node-2","url":"http://n2:8080","gossip":"n2:7946","voter":true},
	  {"id":"node-1","public_domain":"n1:8080","gossip":"n1:7946","sharding":true,"replica":false}]}`
	l, err := ParsePeerList([]byte(good), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l.IDs(), ","); got != "node-1,node-2" {
		t.Fatalf("ids %s, want sorted", got)
	}
	p1, _ := l.Get("node-1")
	if p1.URL != "http://n1:8080" || !p1.Sharding || p1.Replica || p1.Voter {
		t.Fatalf("node-1 resolved to %+v", p1)
	}
	p2, _ := l.Get("node-2")
	if !p2.Sharding || !p2.Replica || !p2.Voter {
		t.Fatalf("defaults not applied: %+v", p2)
	}

	bad := []struct{ name, doc, self, want string }{
		{"not json", `{"peers":[`, "", "not a JSON document"},
		{"not an object", `[1]`, "", "not a JSON document"},
		{"no peers", `{"peers":[]}`, "", "no peers"},
		{"unknown field", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2","shard":true}]}`, "", "unknown field"},
		{"missing id", `{"peers":[{"url":"http://a:1","gossip":"a:2"}]}`, "", `"id" is missing`},
		{"missing url", `{"peers":[{"id":"a","gossip":"a:2"}]}`, "", `"url" (or "public_domain") is missing`},
		{"missing gossip", `{"peers":[{"id":"a","url":"http://a:1"}]}`, "", `"gossip"`},
		{"gossip without port", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a"}]}`, "", "host:port"},
		{"url with path", `{"peers":[{"id":"a","url":"http://a:1/x","gossip":"a:2"}]}`, "", "base URL"},
		{"url and domain", `{"peers":[{"id":"a","url":"http://a:1","public_domain":"a:1","gossip":"a:2"}]}`, "", "not both"},
		{"bad id", `{"peers":[{"id":"-a","url":"http://a:1","gossip":"a:2"}]}`, "", "must start with"},
		{"duplicate id", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"},{"id":"a","url":"http://b:1","gossip":"b:2"}]}`, "", "appears twice"},
		{"duplicate url", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"},{"id":"b","url":"http://a:1","gossip":"b:2"}]}`, "", "same url"},
		{"duplicate gossip", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"},{"id":"b","url":"http://b:1","gossip":"a:2"}]}`, "", "same gossip"},
		{"self absent", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"}]}`, "me", `NODE_ID "me" is not in the peer list`},
		{"nobody shards", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2","sharding":false}]}`, "", "sharding"},
		{"trailing data", `{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"}]} {}`, "", "after its JSON"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			_, err := ParsePeerList([]byte(b.doc), b.self)
			if err == nil || !strings.Contains(err.Error(), b.want) {
				t.Fatalf("error %v, want one containing %q", err, b.want)
			}
		})
	}
}

func TestExamplePeerListParses(t *testing.T) {
	data, err := readFile("../peers.example.json")
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParsePeerList(data, "node1")
	if err != nil {
		t.Fatalf("peers.example.json: %v", err)
	}
	if len(l.Peers) != 3 {
		t.Fatalf("peers.example.json has %d peers, want 3", len(l.Peers))
	}
}

func FuzzParsePeerList(f *testing.F) {
	f.Add([]byte(`{"peers":[{"id":"a","url":"http://a:1","gossip":"a:2"}]}`), "a")
	f.Add([]byte(`{"peers":[{"id":"a","public_domain":"a:1","gossip":"a:2","voter":true}]}`), "")
	f.Add([]byte(`{"peers":null}`), "x")
	f.Fuzz(func(t *testing.T, data []byte, self string) {
		l, err := ParsePeerList(data, self)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, p := range l.Peers {
			if ValidNodeID(p.ID) != nil || p.URL == "" || p.Gossip == "" || seen[p.ID] {
				t.Fatalf("accepted an invalid peer %+v", p)
			}
			seen[p.ID] = true
		}
		if self != "" && !seen[self] {
			t.Fatalf("accepted a list without %q", self)
		}
	})
}

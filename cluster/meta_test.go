package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// A peer's gossiped metadata that is not what a node makes of itself (an
// id that is no node id or not the peer's name, a URL that is not a
// node's http(s) base URL, a negative free disk) is not taken: the peer is
// alive with unknown metadata, and its URL is not used to reach it.
func TestInvalidPeerMetadataIsRefused(t *testing.T) {
	var logs bytes.Buffer
	c := &Cluster{cfg: Config{NodeID: "b", Now: time.Now}, log: slog.New(slog.NewTextHandler(&logs, nil)),
		members: map[string]*memberInfo{}, gossiped: map[string]gossipedNode{}}
	good := `{"id":"x","url":"https://x.example:8443","iurl":"http://10.0.0.9:8080","free":5,"flags":"SR","ver":"1.2","inc":1700000000000}`
	for name, meta := range map[string]string{
		"a 10 KB id":         `{"id":"` + strings.Repeat("x", 10_000) + `","iurl":"http://x:8080","inc":1}`,
		"another node's id":  `{"id":"y","iurl":"http://x:8080","inc":1}`,
		"a non-http URL":     `{"id":"x","iurl":"file:///etc/passwd","inc":1}`,
		"a URL with a path":  `{"id":"x","iurl":"http://x:8080/internal/v1/steal?a=b","inc":1}`,
		"a URL with a user":  `{"id":"x","iurl":"http://u:p@x:8080","inc":1}`,
		"a relative URL":     `{"id":"x","iurl":"x:8080","inc":1}`,
		"negative free disk": `{"id":"x","iurl":"http://x:8080","free":-1,"inc":1}`,
		"unknown flags":      `{"id":"x","iurl":"http://x:8080","flags":"SSZ","inc":1}`,
		"a control char":     `{"id":"x","iurl":"http://x:8080","ver":"1\n2","inc":1}`,
		"not JSON":           `{"id":"x"`,
		"two documents":      `{"id":"x","inc":1} {}`,
		"over 512 bytes":     `{"id":"x","iurl":"http://x:8080","ver":"` + strings.Repeat("v", 600) + `","inc":1}`,
	} {
		for _, via := range []string{"event", "resync"} {
			c.members = map[string]*memberInfo{}
			// First valid metadata, then the invalid one: nothing of the
			// old is kept either.
			for _, m := range []string{good, meta} {
				n := memberlist.Node{Name: "x", Meta: []byte(m)}
				if via == "event" {
					c.apply(event{kind: evUpdate, node: n, at: time.Now()})
				} else {
					c.gossiped["x"] = gossipedNode{node: n, alive: true}
					c.resync()
				}
			}
			if got := c.members["x"].meta; got != (NodeMeta{}) {
				t.Errorf("%s by %s: took %+v", name, via, got)
			}
			if u, ok := c.PeerURL("x"); ok {
				t.Errorf("%s by %s: the peer is reached at %q", name, via, u)
			}
		}
	}
	if logs.Len() > 20_000 {
		t.Errorf("refusals logged %d bytes", logs.Len())
	}
	c.members = map[string]*memberInfo{}
	c.apply(event{kind: evJoin, node: memberlist.Node{Name: "x", Meta: []byte(good)}, at: time.Now()})
	want := NodeMeta{ID: "x", PublicURL: "https://x.example:8443", InternalURL: "http://10.0.0.9:8080", FreeBytes: 5, Flags: "SR", Version: "1.2", Incarnation: 1700000000000}
	if got := c.members["x"].meta; got != want {
		t.Errorf("valid metadata taken as %+v", got)
	}
	if u, _ := c.PeerURL("x"); u != "http://10.0.0.9:8080" {
		t.Errorf("the peer is reached at %q", u)
	}
}

// FuzzDecodeMeta: gossiped metadata never panics; what is accepted is
// valid (a node id, http(s) base URLs, known flags) and re-encodes to
// itself; and what encodeMeta makes of any valid NodeMeta is accepted,
// with at most the fields it had to drop missing.
func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"id":"x","url":"https://x.example:8443","iurl":"http://10.0.0.9:8080","free":5,"flags":"SR","ver":"1.2","inc":1700000000000}`),
		"n1", "http://pub.example/shoal", "http://n1:8080", uint64(1<<40), "SRV", "v1.0.0", int64(1))
	f.Add([]byte(`{"id":"x","inc":1}`), "n.1_a-b", "", "", uint64(0), "", "", int64(0))
	f.Add([]byte(`{"id":"","iurl":"ftp://x"}`), "", "ftp://x", "x:1", uint64(0), "Q", "\x00", int64(-1))
	f.Add([]byte(`{"id":"x","free":-1}`), strings.Repeat("n", 64), "http://"+strings.Repeat("h", 600), "https://n:1", uint64(1<<63), "VRS", strings.Repeat("v", 600), int64(1<<62))
	f.Add([]byte(`null`), "a", "https://[::1]:80", "http://[::1]:80/", uint64(1), "V", "é", int64(5))
	f.Add([]byte(`{"id":"x","inc":1,"new":"field"}`), "a", "http://a", "http://a?x", uint64(1), "S", "1", int64(5))
	f.Fuzz(func(t *testing.T, data []byte, id, pub, iurl string, free uint64, flags, ver string, inc int64) {
		if m, err := decodeMeta(data); err == nil {
			if err := m.check(); err != nil {
				t.Fatalf("accepted %q as invalid %+v: %v", data, m, err)
			}
			again, err := decodeMeta(encodeMeta(m, metaLimit))
			if err != nil || again != m {
				t.Fatalf("accepted %q as %+v, re-read as %+v (%v)", data, m, again, err)
			}
		} else if err.Error() == "" || len(err.Error()) > 600 {
			t.Fatalf("refused %q with %q", data, err)
		}
		m := NodeMeta{ID: id, PublicURL: pub, InternalURL: iurl, FreeBytes: free, Flags: flags, Version: ver, Incarnation: inc}
		if m.check() != nil {
			return
		}
		b := encodeMeta(m, metaLimit)
		if b == nil {
			return // even id and incarnation alone do not fit
		}
		got, err := decodeMeta(b)
		if err != nil {
			t.Fatalf("encodeMeta(%+v) = %s, refused: %v", m, b, err)
		}
		// encodeMeta drops the version, then the public URL, then all but
		// id and incarnation.
		full := got
		if got.Version == "" {
			full.Version = m.Version
		}
		if got.PublicURL == "" {
			full.PublicURL = m.PublicURL
		}
		if got.InternalURL == "" && got.Flags == "" && got.FreeBytes == 0 {
			full.InternalURL, full.Flags, full.FreeBytes = m.InternalURL, m.Flags, m.FreeBytes
		}
		if full != m {
			t.Fatalf("encodeMeta(%+v) = %s, read as %+v", m, b, got)
		}
		if raw, _ := json.Marshal(got); len(raw) > metaLimit {
			t.Fatalf("%d bytes of metadata", len(raw))
		}
	})
}

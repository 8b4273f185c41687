// Package cluster is how a node knows the other nodes: the configured peer
// list (loaded from PEERS_ENDPOINT and re-read), gossip membership through
// hashicorp/memberlist, the state of every peer (UP, SUSPECT, DOWN), node
// metadata such as free disk, and signed node-to-node HTTP calls.
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shoal-db/shoal/internal/nodeid"
)

// Peer is one node of the configured membership.
type Peer struct {
	ID       string `json:"id"`
	URL      string `json:"url"`    // base URL of the node's HTTP API
	Gossip   string `json:"gossip"` // host:port other nodes gossip with
	Sharding bool   `json:"sharding"`
	Replica  bool   `json:"replica"`
	Voter    bool   `json:"voter"`
}

// PeerList is the configured membership, sorted by id.
type PeerList struct {
	Peers []Peer `json:"peers"`
}

// Get returns the peer with id.
func (l PeerList) Get(id string) (Peer, bool) {
	for _, p := range l.Peers {
		if p.ID == id {
			return p, true
		}
	}
	return Peer{}, false
}

// rawPeer is a peer as written in the document; optional flags are pointers
// so a missing one takes its default.
type rawPeer struct {
	ID           string `json:"id"`
	URL          string `json:"url"`
	PublicDomain string `json:"public_domain"`
	Gossip       string `json:"gossip"`
	Sharding     *bool  `json:"sharding"`
	Replica      *bool  `json:"replica"`
	Voter        *bool  `json:"voter"`
}

// MaxPeerListBytes bounds the peer list document.
const MaxPeerListBytes = 1 << 20

// ParsePeerList parses and validates a peer list document for the node
// selfID (empty: no check that the node is listed). Flags default to
// sharding true, replica true, voter false.
func ParsePeerList(data []byte, selfID string) (PeerList, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc struct {
		Peers []rawPeer `json:"peers"`
	}
	if err := dec.Decode(&doc); err != nil {
		return PeerList{}, fmt.Errorf(`the peer list is not a JSON document of the form {"peers":[{"id","url","gossip","sharding","replica","voter"}]}: %v`, err)
	}
	if dec.More() {
		return PeerList{}, errors.New("the peer list has data after its JSON document")
	}
	if len(doc.Peers) == 0 {
		return PeerList{}, errors.New(`the peer list has no peers: it needs {"peers":[...]} with at least one entry`)
	}
	var list PeerList
	ids, urls, gossips := map[string]bool{}, map[string]string{}, map[string]string{}
	for i, rp := range doc.Peers {
		p, err := rp.resolve()
		if err != nil {
			name := rp.ID
			if name == "" {
				name = "#" + strconv.Itoa(i+1)
			}
			return PeerList{}, fmt.Errorf("peer %s: %w", name, err)
		}
		if ids[p.ID] {
			return PeerList{}, fmt.Errorf("peer id %q appears twice", p.ID)
		}
		ids[p.ID] = true
		if other, ok := urls[p.URL]; ok {
			return PeerList{}, fmt.Errorf("peers %s and %s have the same url %s", other, p.ID, p.URL)
		}
		urls[p.URL] = p.ID
		if other, ok := gossips[p.Gossip]; ok {
			return PeerList{}, fmt.Errorf("peers %s and %s have the same gossip address %s", other, p.ID, p.Gossip)
		}
		gossips[p.Gossip] = p.ID
		list.Peers = append(list.Peers, p)
	}
	sort.Slice(list.Peers, func(i, j int) bool { return list.Peers[i].ID < list.Peers[j].ID })
	if selfID != "" && !ids[selfID] {
		return PeerList{}, fmt.Errorf("this node's NODE_ID %q is not in the peer list (ids: %s)", selfID, strings.Join(list.IDs(), ", "))
	}
	sharding := false
	for _, p := range list.Peers {
		sharding = sharding || p.Sharding
	}
	if !sharding {
		return PeerList{}, errors.New(`no peer has "sharding": true, so no node could hold data`)
	}
	return list, nil
}

// IDs lists the peers' ids in order.
func (l PeerList) IDs() []string {
	ids := make([]string, len(l.Peers))
	for i, p := range l.Peers {
		ids[i] = p.ID
	}
	return ids
}

func (rp rawPeer) resolve() (Peer, error) {
	if err := ValidNodeID(rp.ID); err != nil {
		return Peer{}, err
	}
	p := Peer{ID: rp.ID, Sharding: true, Replica: true}
	switch {
	case rp.URL != "" && rp.PublicDomain != "":
		return Peer{}, errors.New(`give either "url" or "public_domain", not both`)
	case rp.URL != "":
		u, err := url.Parse(rp.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return Peer{}, fmt.Errorf(`"url" %q must be the node's base URL, like http://node1:8080`, rp.URL)
		}
		p.URL = u.Scheme + "://" + u.Host
	case rp.PublicDomain != "":
		if strings.Contains(rp.PublicDomain, "/") {
			return Peer{}, fmt.Errorf(`"public_domain" %q must be host or host:port, without a scheme or path`, rp.PublicDomain)
		}
		p.URL = "http://" + rp.PublicDomain
	default:
		return Peer{}, errors.New(`"url" (or "public_domain") is missing`)
	}
	if rp.Gossip == "" {
		return Peer{}, errors.New(`"gossip" (host:port for gossip) is missing`)
	}
	host, port, err := net.SplitHostPort(rp.Gossip)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return Peer{}, fmt.Errorf(`"gossip" %q must be host:port, like node1:7946`, rp.Gossip)
	}
	p.Gossip = rp.Gossip
	if rp.Sharding != nil {
		p.Sharding = *rp.Sharding
	}
	if rp.Replica != nil {
		p.Replica = *rp.Replica
	}
	if rp.Voter != nil {
		p.Voter = *rp.Voter
	}
	return p, nil
}

// ValidNodeID checks a node id: [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
func ValidNodeID(id string) error { return nodeid.Check(id) }

// FetchPeerList reads the peer list document from source: an http(s) URL or
// a file path. client fetches a URL (nil: a default client); it follows
// redirects only on the source's own scheme, host and port.
func FetchPeerList(ctx context.Context, source string, client *http.Client) ([]byte, error) {
	if strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://") {
		return fetchPeerListURL(ctx, source, client)
	}
	return readPeerListFile(source)
}

func fetchPeerListURL(ctx context.Context, source string, client *http.Client) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
	if err != nil {
		return nil, err
	}
	resp, err := sameOriginRedirects(client).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the peer list from %s: %w", source, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the peer list from %s: status %s", source, resp.Status)
	}
	return readLimited(resp.Body, source)
}

// sameOriginRedirects is a copy of client (the caller's is left as it is)
// that refuses a redirect leaving the first request's scheme, host and
// port: whoever answers on that address should not choose, by a redirect,
// which hosts this node takes its peers from, and an https source must not
// be downgraded to http. Redirects within the origin are checked further by
// the client's own CheckRedirect, if any.
func sameOriginRedirects(client *http.Client) *http.Client {
	c := &http.Client{}
	if client != nil {
		*c = *client
	}
	theirs := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if first := via[0].URL; !sameOrigin(first, req.URL) {
			return fmt.Errorf("refusing the redirect to %s: it leaves %s://%s, and the peer list is only taken from the scheme, host and port of PEERS_ENDPOINT; if that address is the right source, point PEERS_ENDPOINT at it",
				req.URL.Redacted(), first.Scheme, first.Host)
		}
		if theirs != nil {
			return theirs(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return c
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (an absent port being the scheme's default).
func sameOrigin(a, b *url.URL) bool {
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		switch strings.ToLower(u.Scheme) {
		case "http":
			return "80"
		case "https":
			return "443"
		}
		return ""
	}
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

// readPeerListFile reads a peer list file, refusing anything but a regular
// file (or a link to one): opening a FIFO would wait for a writer for ever,
// and a device or a directory is never a peer list. The open does not block
// (O_NONBLOCK), and what was opened is checked again, since the path may
// have been replaced between the look and the open. Reading a regular file
// cannot wait for a writer, and it is bounded by MaxPeerListBytes.
func readPeerListFile(source string) ([]byte, error) {
	info, err := os.Stat(source)
	if err != nil {
		return nil, fmt.Errorf("reading the peer list: %w", err)
	}
	if err := regularFile(source, info.Mode()); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(source, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("reading the peer list: %w", err)
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("reading the peer list: %w", err)
	}
	if err := regularFile(source, info.Mode()); err != nil {
		return nil, err
	}
	return readLimited(f, source)
}

// regularFile explains why a peer list file of mode m is refused, if it is.
func regularFile(source string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	kind := "special file"
	switch {
	case m.IsDir():
		kind = "directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		kind = "socket"
	case m&fs.ModeDevice != 0:
		kind = "device"
	}
	return fmt.Errorf("the peer list %s is a %s, not a regular file: point PEERS_ENDPOINT at a regular JSON file or an http(s) URL", source, kind)
}

func readLimited(r io.Reader, source string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPeerListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the peer list from %s: %w", source, err)
	}
	if len(data) > MaxPeerListBytes {
		return nil, fmt.Errorf("the peer list at %s is larger than %d bytes", source, MaxPeerListBytes)
	}
	return data, nil
}

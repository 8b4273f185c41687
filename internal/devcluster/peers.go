package devcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/atomicfile"
	"github.com/shoal-db/shoal/internal/wording"
)

// LoopbackPeerList is the peer list of n nodes on loopback, node i on
// httpPort+i-1 and gossipPort+i-1 (https urls with useTLS): every node
// shards and replicates, the first three vote.
func LoopbackPeerList(n, httpPort, gossipPort int, useTLS bool) cluster.PeerList {
	var l cluster.PeerList
	for i := 1; i <= n; i++ {
		l.Peers = append(l.Peers, cluster.Peer{
			ID:       "node" + strconv.Itoa(i),
			URL:      scheme(useTLS) + "127.0.0.1:" + strconv.Itoa(httpPort+i-1),
			Gossip:   "127.0.0.1:" + strconv.Itoa(gossipPort+i-1),
			Sharding: true, Replica: true, Voter: i <= firstVoters,
		})
	}
	return l
}

// FormatPeerList writes a peer list with one peer per line, in natural id
// order, for people to read and edit.
func FormatPeerList(l cluster.PeerList) []byte {
	peers := slices.Clone(l.Peers)
	slices.SortStableFunc(peers, func(a, b cluster.Peer) int {
		switch {
		case wording.NaturalLess(a.ID, b.ID):
			return -1
		case wording.NaturalLess(b.ID, a.ID):
			return 1
		}
		return 0
	})
	var b bytes.Buffer
	b.WriteString("{\n  \"peers\": [\n")
	for i, p := range peers {
		line, err := json.Marshal(p)
		if err != nil {
			panic(err) // a Peer is strings and booleans
		}
		b.WriteString("    ")
		b.Write(line)
		if i < len(peers)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("  ]\n}\n")
	return b.Bytes()
}

// SortedIDs lists a peer list's ids in natural order (node2 before node10).
func SortedIDs(l cluster.PeerList) []string {
	ids := l.IDs()
	slices.SortStableFunc(ids, wording.NaturalCmp)
	return ids
}

// peerDiff is how a peer list changed.
type peerDiff struct {
	Added, Removed, Changed []cluster.Peer // Changed holds the new entries
}

// diffPeerLists compares two peer lists by id.
func diffPeerLists(old, cur cluster.PeerList) peerDiff {
	var d peerDiff
	for _, p := range cur.Peers {
		o, ok := old.Get(p.ID)
		switch {
		case !ok:
			d.Added = append(d.Added, p)
		case o != p:
			d.Changed = append(d.Changed, p)
		}
	}
	for _, o := range old.Peers {
		if _, ok := cur.Get(o.ID); !ok {
			d.Removed = append(d.Removed, o)
		}
	}
	return d
}

// nextPeer is the peer `shoal dev add-node` appends: the next free
// node<N> id, and the ports one past the highest HTTP and gossip ports in
// use (skipping any port the list uses for the other purpose).
func nextPeer(l cluster.PeerList) (cluster.Peer, error) {
	n := len(l.Peers) + 1
	for {
		if _, taken := l.Get("node" + strconv.Itoa(n)); !taken {
			break
		}
		n++
	}
	used := map[int]bool{}
	maxHTTP, maxGossip := 0, 0
	for _, p := range l.Peers {
		if _, port, err := urlHostPort(p.URL); err == nil {
			used[port] = true
			maxHTTP = max(maxHTTP, port)
		}
		if _, ps, err := net.SplitHostPort(p.Gossip); err == nil {
			if port, err := strconv.Atoi(ps); err == nil {
				used[port] = true
				maxGossip = max(maxGossip, port)
			}
		}
	}
	if maxHTTP == 0 { // no port to follow: start at the defaults of `shoal dev`
		maxHTTP = 8080
	}
	if maxGossip == 0 {
		maxGossip = 7946
	}
	next := func(from int) int {
		for used[from] {
			from++
		}
		used[from] = true
		return from
	}
	h := next(maxHTTP + 1)
	g := next(maxGossip + 1)
	if h > 65535 || g > 65535 {
		return cluster.Peer{}, fmt.Errorf("no free port above the highest in the peer list (HTTP %d, gossip %d)", h, g)
	}
	return cluster.Peer{
		ID:       "node" + strconv.Itoa(n),
		URL:      scheme(usesTLS(l)) + "127.0.0.1:" + strconv.Itoa(h),
		Gossip:   "127.0.0.1:" + strconv.Itoa(g),
		Sharding: true, Replica: true, Voter: false,
	}, nil
}

// urlHostPort splits a peer's base URL into host and port (the scheme's
// default port when there is none).
func urlHostPort(u string) (string, int, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "", 0, fmt.Errorf("url %s has no scheme", u)
	}
	host, ps, err := net.SplitHostPort(rest)
	if err != nil {
		switch scheme {
		case "http":
			return rest, 80, nil
		case "https":
			return rest, 443, nil
		}
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, fmt.Errorf("url %s has a bad port", u)
	}
	return host, port, nil
}

// AddNode appends the next node to DIR/peers.json, replacing the file
// atomically, and returns the new peer and the file's path.
func AddNode(dir string) (cluster.Peer, string, error) {
	list, path, mode, err := readPeerList(dir)
	if err != nil {
		return cluster.Peer{}, "", err
	}
	p, err := nextPeer(list)
	if err != nil {
		return cluster.Peer{}, "", err
	}
	list.Peers = append(list.Peers, p)
	return p, path, writePeerList(path, list, mode)
}

// RemoveNode removes the peer id from DIR/peers.json, replacing the file
// atomically, and returns the removed peer and the file's path. It refuses
// an unknown id, the last sharding peer and the last voter.
func RemoveNode(dir, id string) (cluster.Peer, string, error) {
	list, path, mode, err := readPeerList(dir)
	if err != nil {
		return cluster.Peer{}, "", err
	}
	p, ok := list.Get(id)
	if !ok {
		return cluster.Peer{}, "", fmt.Errorf("%s has no peer %q; its peers are %s", path, id, strings.Join(SortedIDs(list), ", "))
	}
	var rest cluster.PeerList
	sharding, voters := 0, 0
	for _, o := range list.Peers {
		if o.ID == id {
			continue
		}
		rest.Peers = append(rest.Peers, o)
		if o.Sharding {
			sharding++
		}
		if o.Voter {
			voters++
		}
	}
	switch {
	case p.Sharding && sharding == 0:
		return cluster.Peer{}, "", fmt.Errorf("%s is the last sharding peer: its partitions would have nowhere to go; add a node first (`shoal dev add-node`)", id)
	case p.Voter && voters == 0:
		return cluster.Peer{}, "", fmt.Errorf("%s is the last lease voter: without one no master can be elected; make another peer a voter first "+
			"(\"voter\": true in %s) and wait until `shoal status` shows the voter change done", id, path)
	}
	if err := writePeerList(path, rest, mode); err != nil {
		return cluster.Peer{}, "", err
	}
	return p, path, nil
}

// readPeerList reads DIR/peers.json, and returns it with its path and
// file mode.
func readPeerList(dir string) (cluster.PeerList, string, os.FileMode, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return cluster.PeerList{}, "", 0, err
	}
	path := filepath.Join(abs, "peers.json")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cluster.PeerList{}, path, 0, fmt.Errorf("there is no peer list at %s: start `shoal dev --dir %s` first", path, ShellQuote(abs))
	}
	if err != nil {
		return cluster.PeerList{}, path, 0, err
	}
	data, err := cluster.FetchPeerList(context.Background(), path, http.DefaultClient)
	if err != nil {
		return cluster.PeerList{}, path, 0, err
	}
	list, err := cluster.ParsePeerList(data, "")
	if err != nil {
		return cluster.PeerList{}, path, 0, fmt.Errorf("%s is not a valid peer list (%v): fix it first", path, err)
	}
	return list, path, fi.Mode().Perm(), nil
}

// writePeerList replaces the file path with list, atomically, once the
// node's loader accepts it.
func writePeerList(path string, list cluster.PeerList, mode os.FileMode) error {
	out := FormatPeerList(list)
	if _, err := cluster.ParsePeerList(out, ""); err != nil {
		return fmt.Errorf("the new peer list would not be valid: %v", err)
	}
	if err := atomicfile.Write(path, out, mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

package devcluster

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/wording"
)

// Node is a peer `shoal dev` runs as a child process.
type Node struct {
	cluster.Peer
	HTTPAddr string // host:port of its url, where it listens
}

// NodeFor says how to run p on this machine, or why it cannot be: only
// peers whose url and gossip addresses are on loopback are run.
func NodeFor(p cluster.Peer) (Node, error) {
	rest, ok := strings.CutPrefix(p.URL, "http://")
	if !ok {
		rest, ok = strings.CutPrefix(p.URL, "https://")
	}
	if !ok {
		return Node{}, fmt.Errorf("its url %s is not http:// or https://", p.URL)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return Node{}, fmt.Errorf("its url %s has no port", p.URL)
	}
	if !isLoopbackHost(host) {
		return Node{}, fmt.Errorf("its url %s is not on loopback", p.URL)
	}
	ghost, _, err := net.SplitHostPort(p.Gossip)
	if err != nil || !isLoopbackHost(ghost) {
		return Node{}, fmt.Errorf("its gossip address %s is not on loopback", p.Gossip)
	}
	return Node{Peer: p, HTTPAddr: net.JoinHostPort(host, port)}, nil
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// LocalNodes splits a peer list into the nodes to run here, in natural id
// order, and notes about the others.
func LocalNodes(l cluster.PeerList) (local []Node, skipped []string) {
	for _, p := range l.Peers {
		n, err := NodeFor(p)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("not starting %s: %v; start it yourself", p.ID, err))
			continue
		}
		local = append(local, n)
	}
	slices.SortStableFunc(local, func(a, b Node) int {
		if wording.NaturalLess(a.ID, b.ID) {
			return -1
		}
		if wording.NaturalLess(b.ID, a.ID) {
			return 1
		}
		return 0
	})
	return local, skipped
}

// CheckPortsFree checks that every node's HTTP port (TCP) and gossip port
// (TCP and UDP) can be bound.
func CheckPortsFree(nodes []Node) error {
	for _, n := range nodes {
		if err := TCPFree(n.HTTPAddr); err != nil {
			return fmt.Errorf("%s's HTTP address %s is in use (%v)", n.ID, n.HTTPAddr, err)
		}
		if err := TCPFree(n.Gossip); err != nil {
			return fmt.Errorf("%s's gossip address %s is in use over TCP (%v)", n.ID, n.Gossip, err)
		}
		if err := UDPFree(n.Gossip); err != nil {
			return fmt.Errorf("%s's gossip address %s is in use over UDP (%v)", n.ID, n.Gossip, err)
		}
	}
	return nil
}

// TCPFree binds addr over TCP and lets it go again; the error says why it
// cannot be bound.
func TCPFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// UDPFree binds addr over UDP and lets it go again; the error says why it
// cannot be bound.
func UDPFree(addr string) error {
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// childEnv is the environment of a node: the parent's, without any key
// Shoal reads (so nothing leaks in from the shell), plus vars.
func childEnv(parent []string, vars [][2]string) []string {
	shoalKeys := map[string]bool{}
	for _, k := range config.Keys() {
		shoalKeys[k] = true
	}
	var env []string
	for _, kv := range parent {
		k, _, _ := strings.Cut(kv, "=")
		if !shoalKeys[k] {
			env = append(env, kv)
		}
	}
	for _, v := range vars {
		env = append(env, v[0]+"="+v[1])
	}
	return env
}

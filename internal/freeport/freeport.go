// Package freeport finds ports on 127.0.0.1 that are free for both TCP and
// UDP (a node's gossip uses both on one port), for test clusters, the
// fault suite and the benchmarks' own etcd.
package freeport

import (
	"fmt"
	"net"
)

// Find returns n ports on 127.0.0.1 free for both TCP and UDP right now.
// They are released before it returns, so another process may take one
// meanwhile: callers start their listeners at once.
func Find(n int) ([]int, error) {
	var ports []int
	var hold []interface{ Close() error }
	defer func() {
		for _, h := range hold {
			h.Close()
		}
	}()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 100*n {
			return nil, fmt.Errorf("could not find %d free ports on 127.0.0.1", n)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		hold = append(hold, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		hold = append(hold, u)
		ports = append(ports, port)
	}
	return ports, nil
}

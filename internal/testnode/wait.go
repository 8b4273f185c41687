package testnode

import (
	"fmt"
	"net"
	"testing"
	"time"
)

// Eventually polls cond until it holds or timeout passes, then fails the
// test with what cond last said. It is for conditions in other processes or
// over the network, which nothing can notify us of.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		last = detail
		if time.Since(start) > timeout {
			t.Fatalf("%s: not true after %s; last: %s", what, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreePorts returns n ports on 127.0.0.1 that are free for both TCP and
// UDP right now (gossip uses both on one port).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var hold []interface{ Close() error }
	defer func() {
		for _, h := range hold {
			h.Close()
		}
	}()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts > 100*n {
			t.Fatalf("could not find %d free ports", n)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			l.Close()
			continue
		}
		hold = append(hold, l, u)
		ports = append(ports, port)
	}
	return ports
}

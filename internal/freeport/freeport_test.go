package freeport

import (
	"fmt"
	"net"
	"testing"
)

// Each port found is distinct and can be listened on, over TCP and UDP.
func TestFindGivesDistinctPortsFreeForBoth(t *testing.T) {
	ports, err := Find(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d given twice: %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("tcp %d: %v", p, err)
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("udp %d: %v", p, err)
		}
		l.Close()
		u.Close()
	}
}

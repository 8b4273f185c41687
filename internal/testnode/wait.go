package testnode

import (
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/freeport"
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
	ports, err := freeport.Find(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

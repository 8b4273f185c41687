package node

import (
	"slices"
	"testing"
	"time"
)

// A master remembers a request for a while, and forgets it once the copy
// is checked or the node stops asking.
func TestCopyChecksForget(t *testing.T) {
	var c copyChecks
	t0 := time.Unix(1000, 0)
	c.ask(3, "y", t0)
	c.ask(3, "x", t0.Add(time.Second))
	if got := c.asking(3, t0.Add(2*time.Second), 5*time.Second); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("asking: %v", got)
	}
	if got := c.asking(4, t0, 5*time.Second); len(got) != 0 {
		t.Fatalf("another partition: %v", got)
	}
	if got := c.asking(3, t0.Add(5500*time.Millisecond), 5*time.Second); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("after y's request expired: %v", got)
	}
	c.done(3, []string{"x"})
	if got := c.asking(3, t0.Add(2*time.Second), 5*time.Second); len(got) != 0 || len(c.asked) != 0 {
		t.Fatalf("after x was checked: %v (%v)", got, c.asked)
	}
}

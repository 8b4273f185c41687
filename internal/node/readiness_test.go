package node

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReadinessWaitsForTheVotersAndForAMasterOfEveryPartition(t *testing.T) {
	if got := readinessOf(0, 0, time.Second, nil); got.Waiting != "" {
		t.Errorf("a node of its own, which has no startup wait, mastering every partition: %+v; want ready", got)
	}
	const ttl = 2 * time.Second
	for _, c := range []struct {
		name    string
		since   time.Duration
		none    []int
		waiting string // a part of what it waits for; "" ready
		listed  []int
	}{
		{"in the voter's startup wait", ttl / 2, nil, "startup wait", nil},
		{"a master for every partition", ttl, nil, "", nil},
		{"partitions without a master", 2 * ttl, []int{3, 8}, "a master for 2 partitions (e.g. partition 3)", nil},
		{"the wait is over: ready, listing them", readyWaitTTLs * ttl, []int{3, 8}, "", []int{3, 8}},
	} {
		got := readinessOf(c.since, ttl, ttl, c.none)
		if c.waiting == "" && got.Waiting != "" || c.waiting != "" && !strings.Contains(got.Waiting, c.waiting) || !slices.Equal(got.WithoutMaster, c.listed) {
			t.Errorf("%s: %+v; want waiting for %q, listing %v", c.name, got, c.waiting, c.listed)
		}
	}
}

// Once ready, a node stays ready: a master lost later is a fault the
// cluster repairs, and a load balancer that took every node out of
// service for it would make it an outage.
func TestReadinessOnceReachedIsKept(t *testing.T) {
	start := time.Unix(100, 0)
	none := []int{}
	r := &readiness{started: start, startWait: time.Second, leaseTTL: time.Second, withoutMaster: func() []int { return none }}
	if got := r.now(start.Add(time.Second / 2)); got.Waiting == "" {
		t.Fatal("ready during the voter's startup wait")
	}
	if got := r.now(start.Add(2 * time.Second)); got.Waiting != "" {
		t.Fatalf("not ready with a master for every partition: %+v", got)
	}
	none = []int{5}
	if got := r.now(start.Add(3 * time.Second)); got.Waiting != "" || !slices.Equal(got.WithoutMaster, []int{5}) {
		t.Fatalf("after a master was lost: %+v; want ready, listing partition 5", got)
	}
}

package replicate

import (
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// A catch-up streams a partition's documents in position order up to the
// master's last position when it began (its target), and its final chunk
// moves the replica to that target. A document the master overwrites
// meanwhile leaves its place at or before the target for one after it:
// the catch-up must still bring its newer state, or the replica holds
// the target by its own account while lacking the version written there,
// a version the master then counts as majority-held (seed 6018: four
// acknowledged majority register writes lost after a failover to such a
// replica). Here k is at version 2 within the target and overwritten
// (version 3) as the catch-up scans; the link is cut as soon as the
// replica holds the target, before any live batch can bring version 3.
func TestACatchUpBringsADocumentOverwrittenAsItScans(t *testing.T) {
	var (
		mu       sync.Mutex
		pr       *pair
		armed    bool
		atV1     store.Position        // the replica's position before the catch-up
		caughtUp = make(chan struct{}) // closed once the replica is past atV1
	)
	pr = newPairWith(t, pairOptions{
		beforeScan: func() {
			mu.Lock()
			fire := armed
			armed = false
			mu.Unlock()
			if fire {
				if res := pr.put(0, "k", map[string]any{"v": 3}, false); res.Err != nil {
					t.Error(res.Err)
				}
			}
		},
		applied: func(req Request) {
			mu.Lock()
			defer mu.Unlock()
			for _, b := range req.Batches {
				if atV1 != (store.Position{}) && b.UpTo.Compare(atV1) > 0 {
					pr.cut = true // send holds no lock once the replica applied
					atV1 = store.Position{}
					close(caughtUp)
				}
			}
		},
	})
	if res := pr.put(0, "k", map[string]any{"v": 1}, false); res.Err != nil {
		t.Fatal(res.Err)
	}
	pr.waitReplicated(t)
	mu.Lock()
	before := pr.master.Position(0)
	mu.Unlock()

	pr.setCut(true)
	if res := pr.put(0, "k", map[string]any{"v": 2}, false); res.Err != nil {
		t.Fatal(res.Err)
	}
	atV2 := pr.master.Position(0)
	for _, id := range []string{"f1", "f2", "f3", "f4", "f5"} {
		pr.write(t, id, false)
	}
	mu.Lock()
	armed, atV1 = true, before
	mu.Unlock()
	pr.setCut(false)
	select {
	case <-caughtUp:
	case <-time.After(30 * time.Second):
		t.Fatalf("the replica was never moved past %s by a catch-up", before)
	}
	acked, _ := pr.shipper.Acked("r", 0)
	if acked.Compare(atV2) < 0 {
		t.Fatalf("the catch-up moved the replica to %s, before version 2 of k at %s", acked, atV2)
	}
	for _, line := range partitionContents(t, pr.rstore, 0) {
		if len(line) > 2 && line[:2] == "k " {
			if line[:4] == "k v1" {
				t.Fatalf("the replica is acknowledged at %s, past version 2 of k at %s, and holds %s", acked, atV2, line)
			}
			return
		}
	}
	t.Fatal("the replica does not hold k")
}

package replicate

import (
	"context"
	"fmt"
	"runtime"
	"strings"
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
// before each of the catch-up's first scans (once, or again after it moved
// past the target: a hot register); the link is cut as soon as the
// replica holds the target, before any live batch can bring the newer
// versions.
func TestACatchUpBringsADocumentOverwrittenAsItScans(t *testing.T) {
	for _, overwrites := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d overwrites", overwrites), func(t *testing.T) { catchUpWhileOverwriting(t, overwrites) })
	}
}

func catchUpWhileOverwriting(t *testing.T, overwrites int) {
	var (
		mu       sync.Mutex
		pr       *pair
		armed    int                   // overwrites left, one before each scan
		atV1     store.Position        // the replica's position before the catch-up
		caughtUp = make(chan struct{}) // closed once the replica is past atV1
	)
	pr = newPairWith(t, pairOptions{
		beforeScan: func() {
			mu.Lock()
			fire := armed > 0
			armed--
			v := 3 + overwrites - armed
			mu.Unlock()
			if fire {
				if res := pr.put(0, "k", map[string]any{"v": v}, false); res.Err != nil {
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
	for _, id := range []string{"f1", "f2", "f3"} {
		pr.write(t, id, false)
	}
	awaitCatchUp(t, pr)
	mu.Lock()
	armed, atV1 = overwrites, before
	mu.Unlock()
	pr.setCut(false)
	select {
	case <-caughtUp:
	case <-time.After(30 * time.Second):
		t.Fatalf("the replica was never moved past %s by a catch-up", before)
	}
	// The replica applied the batch that moved it past version 1 (the
	// hook runs before its answer reaches the shipper): wait for that
	// answer. The link is cut from then on, so only that batch can move
	// the acknowledged position.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pr.shipper.WaitReplicated(ctx, 0, atV2, func() []string { return []string{"r"} }, 1); err != nil {
		acked, _ := pr.shipper.Acked("r", 0)
		t.Fatalf("the catch-up moved the replica to %s, before version 2 of k at %s", acked, atV2)
	}
	acked, _ := pr.shipper.Acked("r", 0)
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

// Writes that outrun a catch-up past its target end it without a claim
// (Config.ChaseChunks, 4 here), and the next one, after a rest, catches the replica up
// once they slow down: the replica ends holding exactly the master's
// documents.
func TestACatchUpOutrunByWritesStartsOver(t *testing.T) {
	var (
		mu     sync.Mutex
		pr     *pair
		scans  int
		before store.Position
		early  []store.Position // positions claimed while the writes outran the scan
	)
	const chase = 4
	const outrun = chase + 8 // scans during which each scan meets more writes than it reads
	pr = newPairWith(t, pairOptions{chaseChunks: chase,
		beforeScan: func() {
			mu.Lock()
			scans++
			n := scans
			mu.Unlock()
			if n > outrun {
				return
			}
			for i := range 4 {
				if res := pr.put(0, fmt.Sprintf("w%d-%d", n, i), map[string]any{"n": n}, false); res.Err != nil {
					t.Error(res.Err)
				}
			}
		},
		applied: func(req Request) {
			mu.Lock()
			defer mu.Unlock()
			for _, b := range req.Batches {
				if scans > 0 && scans <= outrun && b.UpTo.Compare(before) > 0 {
					early = append(early, b.UpTo)
				}
			}
		},
	})
	pr.write(t, "a", false)
	pr.waitReplicated(t)
	pr.setCut(true)
	pr.write(t, "b", false)
	mu.Lock()
	before = pr.master.Position(0)
	mu.Unlock()
	awaitCatchUp(t, pr)
	pr.setCut(false)
	pr.waitReplicated(t)
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("the replica was moved to %v while the writes outran the catch-up", early)
	}
	if scans <= outrun {
		t.Fatalf("only %d scans: the writes never outran the catch-up", scans)
	}
	if got, want := partitionContents(t, pr.rstore, 0), partitionContents(t, pr.mstore, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the replica holds %d documents, the master %d", len(got), len(want))
	}
}

// awaitCatchUp waits until the shipper has found that the replica needs a
// catch-up (a send failed on the cut link), so that un-cutting the link
// starts one rather than delivering the queued runs.
func awaitCatchUp(t *testing.T, pr *pair) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, l := range pr.shipper.Lags() {
			if l.Partition == 0 && l.CatchUp {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the shipper never found the replica behind")
		}
	}
}

// A commit that lands as a catch-up starts, after the master's last
// position was read as its target, is not in the catch-up's claim: it
// must be queued to follow it, or the replica, moved to the target,
// finds the queue starting past it (or empty, short of the master) and
// needs another catch-up. Under a steady write load nearly every
// catch-up met one while it counted what it had to send (a count on
// FerretDB reads the whole collection): replicas went from catch-up to
// catch-up without streaming, a majority write waited for each, and a
// swap's newcomer never caught up while writes paused (seed 2546 on the
// mongo engine). Here a commit lands at every step of the catch-up's
// start, whatever their order: during the count, and after each read of
// the master's last position, up to its first scan.
func TestACommitAsACatchUpStartsFollowsItWithoutAnother(t *testing.T) {
	var (
		mu      sync.Mutex
		pr      *pair
		armed   bool // until the catch-up's first scan
		commits int
		counts  int // catch-ups that counted what they had to send
		started = make(chan struct{})
	)
	commit := func() {
		mu.Lock()
		fire := armed
		if fire {
			commits++
		}
		mu.Unlock()
		if fire {
			pr.write(t, fmt.Sprintf("as-it-starts-%d", commits), false)
		}
	}
	pr = newPairWith(t, pairOptions{
		beforeCount: func() {
			mu.Lock()
			counts++
			mu.Unlock()
			commit()
		},
		afterLast: func() {
			if calledFrom("(*Shipper).catchUp") {
				commit()
			}
		},
		beforeScan: func() {
			mu.Lock()
			defer mu.Unlock()
			if armed {
				armed = false
				close(started)
			}
		},
	})
	pr.write(t, "a", false)
	pr.waitReplicated(t)
	pr.setCut(true)
	pr.write(t, "b", false)
	awaitCatchUp(t, pr)
	mu.Lock()
	armed, counts = true, 0
	mu.Unlock()
	pr.setCut(false)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no catch-up started")
	}
	pr.waitReplicated(t) // the master's position now includes the commits
	mu.Lock()
	defer mu.Unlock()
	if commits < 2 {
		t.Fatalf("%d commits as the catch-up started: want one during its count and one after its target is read", commits)
	}
	if counts != 1 {
		t.Fatalf("%d catch-ups: a commit made as the first started did not follow it in the queue", counts)
	}
	if got, want := contents(t, pr.rstore), contents(t, pr.mstore); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the replica holds %v, the master %v", got, want)
	}
}

// calledFrom reports whether a caller of its caller is the named
// function of this package (say "(*Shipper).catchUp").
func calledFrom(name string) bool {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "/replicate."+name) {
			return true
		}
		if !more {
			return false
		}
	}
}

package node

import (
	"testing"
	"time"
)

func TestDrainWaitsLogAKeptCopyOnceEveryPeriod(t *testing.T) {
	var w drainWaits
	start := time.Unix(1000, 0)
	step := func(at time.Duration, wantKept time.Duration, wantLog bool) {
		t.Helper()
		kept, log := w.kept(5, "node4", start.Add(at))
		if kept != wantKept || log != wantLog {
			t.Fatalf("at %v: kept %v, log %v; want %v, %v", at, kept, log, wantKept, wantLog)
		}
	}
	step(0, 0, false)
	step(drainWaitLogEvery-time.Second, drainWaitLogEvery-time.Second, false)
	step(drainWaitLogEvery, drainWaitLogEvery, true)
	step(drainWaitLogEvery+time.Second, drainWaitLogEvery+time.Second, false)
	step(2*drainWaitLogEvery, 2*drainWaitLogEvery, true)

	// A copy no longer kept is forgotten: kept again, it starts over.
	w.forgetAllBut(map[drainWait]bool{})
	step(3*drainWaitLogEvery, 0, false)
	w.forgetAllBut(map[drainWait]bool{{5, "node4"}: true})
	step(4*drainWaitLogEvery, drainWaitLogEvery, true)
}

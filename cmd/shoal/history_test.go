package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/client"
	"github.com/shoal-db/shoal/cluster"
	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/internal/torture"
)

// The history test: a few documents used as registers by several clients
// doing majority puts of unique values, compare-and-sets (If-Match on the
// version a read returned) and reads, through random nodes of a 3-node
// cluster of real `shoal serve` processes at REPLICATION_FACTOR 3, while
// the documents' master is killed (kill -9) and restarted on its data,
// paused (SIGSTOP) for longer than LEASE_TTL and resumed, and each time
// handed its partition back by an orderly handoff. Every document's
// history, with the linearizable reads, must be linearizable (porcupine);
// the same writes with the `local` reads taken in the same run are checked
// too, and porcupine's verdict on them is only logged: `local` may return
// a write that is later rolled back, or a copy that is behind.
//
// SHOAL_HISTORY_LONG=1 runs six rounds of faults instead of two;
// SHOAL_HISTORY_DIR=dir keeps the porcupine visualizations there.
func TestHistoryUnderMasterFaults(t *testing.T) {
	rounds := 2
	if os.Getenv("SHOAL_HISTORY_LONG") == "1" {
		rounds = 6
	}
	began := time.Now()
	nodes, peersFile := startProcClusterWith(t, 3, []string{"REPLICATION_FACTOR=3", "PARTITION_COUNT=8", "STORE_SYNC=normal"})
	token, err := api.MintToken([]byte(procAuthSecret), api.TokenSpec{Admin: true, Audience: config.Defaults().TokenAudience, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		waitStates(t, nodes, token, n.id, cluster.Up, 60*time.Second)
	}
	const user = "registers"
	// Every node names the preferred master as the partition's master,
	// with all three copies: the faults below take its mastership away
	// and the handoff gives it back.
	var victim *procNode
	var pl api.PlacementView
	testnode.Eventually(t, 60*time.Second, "the preferred master masters the partition on every node, with 3 copies", func() (bool, string) {
		p, why := agreedPlacement(nodes, token, user)
		if why != "" {
			return false, why
		}
		if p.Master != p.PreferredMaster || len(p.Responsible) != 3 {
			return false, fmt.Sprintf("master %s, preferred %s, responsible %v", p.Master, p.PreferredMaster, p.Responsible)
		}
		pl = p
		return true, ""
	})
	for _, n := range nodes {
		if n.id == pl.Master {
			victim = n
		}
	}
	others := slices.DeleteFunc(slices.Clone(nodes), func(n *procNode) bool { return n == victim })
	t.Logf("cluster ready after %s: partition %d of %s mastered by %s at epoch %d", time.Since(began).Round(time.Millisecond), pl.Partition, user, victim.id, pl.Epoch)

	var targets []torture.Target
	for _, n := range nodes {
		targets = append(targets, torture.Target{ID: n.id, URL: n.url()})
	}
	w := torture.NewWorkload(targets, torture.WorkloadOptions{Token: token, RegisterUser: user, RegisterClients: 10, Seed: uint64(time.Now().UnixNano())})
	w.Start(context.Background())
	stopped := false
	stopWorkload := func() {
		if !stopped {
			stopped = true
			w.Stop()
		}
	}
	t.Cleanup(stopWorkload) // before the processes are killed (cleanups run last first)
	progress := func(what string, more int) {
		t.Helper()
		from := w.Definite()
		testnode.Eventually(t, 30*time.Second, what, func() (bool, string) {
			n := w.Definite()
			return n >= from+more, fmt.Sprintf("%d of %d more definite operations", n-from, more)
		})
	}
	progress("the workload running", 200)
	epoch := pl.Epoch
	for round := 1; round <= rounds; round++ {
		if round > 1 {
			w.Round(round)
			w.Mark(fmt.Sprintf("round %d: documents %s", round, strings.Join(w.Docs(), ", ")))
			progress("the workload on the new documents", 200)
		}
		// kill -9 the master; another node takes over; restarted on its
		// data, the preferred master is handed its partition back.
		handed := handoffsTo(others, victim.id, pl.Partition)
		w.Mark(fmt.Sprintf("kill -9 %s", victim.id))
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		victim.cmd.Wait()
		epoch = waitTakeover(t, w, others, token, user, victim.id, epoch)
		progress("writes flowing to the stand-in", 30)
		w.Mark("restart " + victim.id)
		victim.start(t, peersFile)
		waitStates(t, nodes, token, victim.id, cluster.Up, 60*time.Second)
		epoch = waitHandback(t, w, nodes, token, user, victim.id, epoch)
		testnode.Eventually(t, 10*time.Second, "an orderly handoff to "+victim.id+" logged", func() (bool, string) {
			return handoffsTo(others, victim.id, pl.Partition) > handed, "no node logged handing partition " + strconv.Itoa(pl.Partition) + " over"
		})
		progress("the workload after the handoff", 100)

		// SIGSTOP the master past LEASE_TTL: another node takes over;
		// resumed, it finds its lease lapsed and gets the partition back
		// by a handoff.
		handed = handoffsTo(others, victim.id, pl.Partition)
		w.Mark("SIGSTOP " + victim.id)
		if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		epoch = waitTakeover(t, w, others, token, user, victim.id, epoch)
		progress("writes flowing to the stand-in while the master is paused", 30)
		w.Mark("SIGCONT " + victim.id)
		if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		epoch = waitHandback(t, w, nodes, token, user, victim.id, epoch)
		testnode.Eventually(t, 10*time.Second, "an orderly handoff to "+victim.id+" logged", func() (bool, string) {
			return handoffsTo(others, victim.id, pl.Partition) > handed, "no node logged handing partition " + strconv.Itoa(pl.Partition) + " over"
		})
		progress("the workload after the handoff", 100)
	}
	stopWorkload()
	ran := w.Since()
	h := w.History()
	t.Logf("workload: %s, %d operations (%s); %d orderly handoffs back to %s", ran.Round(time.Millisecond), h.Len(), h.Counts(), handoffsTo(others, victim.id, pl.Partition), victim.id)
	if h.DefiniteReads[torture.ReadLinearizable] == 0 || h.DefiniteWrites == 0 {
		t.Fatalf("the history has %d definite writes and %d definite linearizable reads: nothing to check", h.DefiniteWrites, h.DefiniteReads[torture.ReadLinearizable])
	}

	v := checkHistory(t, h, torture.ReadLinearizable)
	switch v.Result {
	case porcupine.Illegal:
		t.Errorf("the history with X-Read-Concern: linearizable is not linearizable (visualization: %s):\n%s", v.Path, v.Why)
	case porcupine.Unknown:
		t.Logf("porcupine did not decide within its timeout: no verdict (visualization: %s)", v.Path)
	}
	v = checkHistory(t, h, torture.ReadLocal)
	t.Logf("with local reads (allowed to fail): porcupine says %s (visualization: %s)", v.Result, v.Path)
	if v.Result == porcupine.Illegal {
		t.Logf("why the local reads are not linearizable:\n%s", v.Why)
	}
	t.Logf("whole test: %s", time.Since(began).Round(time.Millisecond))
}

func histPlacementOf(n *procNode, token, user string) (api.PlacementView, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := client.New(n.url(), token).Placement(ctx, user)
	return v, err == nil
}

// agreedPlacement is the placement every one of nodes names, or why there
// is none.
func agreedPlacement(nodes []*procNode, token, user string) (api.PlacementView, string) {
	var first api.PlacementView
	for i, n := range nodes {
		p, ok := histPlacementOf(n, token, user)
		if !ok {
			return api.PlacementView{}, n.id + " did not answer"
		}
		if i == 0 {
			first = p
		} else if p.Master != first.Master || p.Epoch != first.Epoch {
			return api.PlacementView{}, fmt.Sprintf("%s names %s at %d, %s names %s at %d", nodes[0].id, first.Master, first.Epoch, n.id, p.Master, p.Epoch)
		}
	}
	return first, ""
}

// waitTakeover waits until every one of observers names a master other
// than victim at an epoch above epoch, and returns that epoch.
func waitTakeover(t *testing.T, w *torture.Workload, observers []*procNode, token, user, victim string, epoch uint64) uint64 {
	t.Helper()
	var p api.PlacementView
	took := testnode.Eventually(t, procLeaseTTL+20*time.Second, "another master takes over from "+victim, func() (bool, string) {
		var why string
		p, why = agreedPlacement(observers, token, user)
		if why != "" {
			return false, why
		}
		return p.Master != victim && p.Epoch > epoch, fmt.Sprintf("master %s at %d", p.Master, p.Epoch)
	})
	w.Mark(fmt.Sprintf("%s took over from %s at epoch %d, %s after the fault", p.Master, victim, p.Epoch, took.Round(time.Millisecond)))
	return p.Epoch
}

// waitHandback waits until every node names victim the master again, at
// an epoch above epoch, and returns that epoch.
func waitHandback(t *testing.T, w *torture.Workload, nodes []*procNode, token, user, victim string, epoch uint64) uint64 {
	t.Helper()
	var p api.PlacementView
	took := testnode.Eventually(t, 60*time.Second, victim+" handed its partition back", func() (bool, string) {
		var why string
		p, why = agreedPlacement(nodes, token, user)
		if why != "" {
			return false, why
		}
		return p.Master == victim && p.Epoch > epoch, fmt.Sprintf("master %s at %d", p.Master, p.Epoch)
	})
	w.Mark(fmt.Sprintf("%s master again at epoch %d, after %s", victim, p.Epoch, took.Round(time.Millisecond)))
	return p.Epoch
}

// handoffsTo counts the orderly handoffs of partition to victim that the
// other nodes logged.
func handoffsTo(others []*procNode, victim string, partition int) int {
	n := 0
	for _, o := range others {
		n += strings.Count(o.logs.String(), fmt.Sprintf(`msg="handed partition over" node=%s partition=%d to=%s `, o.id, partition, victim))
	}
	return n
}

// checkHistory runs porcupine on the writes and the reads of concern and
// writes the visualization to SHOAL_HISTORY_DIR, or to a directory that
// outlives the test when the linearizable reads' history is not
// linearizable, or else to the test's temporary directory.
func checkHistory(t *testing.T, h *torture.History, concern torture.ReadConcern) torture.RegisterVerdict {
	t.Helper()
	timeout := 60 * time.Second
	if concern != torture.ReadLinearizable {
		timeout = 20 * time.Second // informational only
	}
	dir := os.Getenv("SHOAL_HISTORY_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	v, err := h.CheckRegisters(concern, timeout, dir)
	if err != nil {
		t.Error(err)
	}
	if v.Result == porcupine.Illegal && concern == torture.ReadLinearizable && os.Getenv("SHOAL_HISTORY_DIR") == "" {
		// A failure's evidence outlives the test.
		keep, err := os.MkdirTemp("", "shoal-history-")
		if err != nil {
			t.Fatal(err)
		}
		if v, err = h.CheckRegisters(concern, timeout, keep); err != nil {
			t.Error(err)
		}
	}
	t.Logf("with %s reads: porcupine says %s in %s on %d operations; %d writes of unknown outcome left out as no linearization needs them",
		concern, v.Result, v.Took.Round(time.Millisecond), v.Checked, v.Dropped)
	return v
}

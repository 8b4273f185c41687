package pebbleengine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/store/engine"
)

// crashChild is set in the child process the crash test starts: it
// writes until it is killed.
const crashChild = "SHOAL_PEBBLE_CRASH_CHILD"

const (
	crashPartitions = 4
	crashBatch      = 16
)

// A process killed (SIGKILL) while it commits loses no commit that
// returned, and leaves each partition's history a prefix: positions 1..n
// with no gap, whatever was in flight. The child commits batches to four
// partitions side by side and prints each one that returned; the test
// kills it mid-stream, opens the directory again and checks.
func TestACrashMidCommitLosesNoAcknowledgedWrite(t *testing.T) {
	if dir := os.Getenv(crashChild); dir != "" {
		writeUntilKilled(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestACrashMidCommitLosesNoAcknowledgedWrite$")
	cmd.Env = append(os.Environ(), crashChild+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[int]uint64{} // partition -> the highest seq acknowledged
	lines := bufio.NewScanner(out)
	total := 0
	for total < 400 && lines.Scan() {
		var p int
		var seq uint64
		if _, err := fmt.Sscanf(lines.Text(), "%d %d", &p, &seq); err != nil {
			t.Fatalf("child printed %q", lines.Text())
		}
		acked[p] = max(acked[p], seq)
		total++
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// What it printed before it died was acknowledged too.
	for lines.Scan() {
		var p int
		var seq uint64
		if _, err := fmt.Sscanf(lines.Text(), "%d %d", &p, &seq); err == nil {
			acked[p] = max(acked[p], seq)
		}
	}
	_ = cmd.Wait()
	if total < 400 {
		t.Fatalf("the child acknowledged only %d commits before its output ended", total)
	}

	e, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	// The records open after the crash (seed 15040: FerretDB, killed
	// while the applied log was being recreated, refused every later
	// record write), each at least what was acknowledged of its partition.
	recs, err := e.LoadRecords(ctx)
	if err != nil {
		t.Fatalf("the records after the crash: %v", err)
	}
	for p := range crashPartitions {
		if recs[p].Seq < acked[p] {
			t.Fatalf("partition %d's record is at %d after the crash; %d was acknowledged", p, recs[p].Seq, acked[p])
		}
		if err := e.SaveRecords(ctx, []engine.PartitionRecord{{Partition: p, Epoch: 1, Seq: recs[p].Seq + 1}}, nil); err != nil {
			t.Fatalf("a record written after the crash: %v", err)
		}
	}
	for p := range crashPartitions {
		docs, err := e.ScanAfter(ctx, p, record.Position{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			if d.Pos != (record.Position{Epoch: 1, Seq: uint64(i + 1)}) {
				t.Fatalf("partition %d: the history's state %d is at %s: not a prefix", p, i+1, d.Pos)
			}
		}
		if uint64(len(docs)) < acked[p] {
			t.Fatalf("partition %d holds %d states after the crash; %d were acknowledged", p, len(docs), acked[p])
		}
		if n, err := e.CountAfter(ctx, p, record.Position{}); err != nil || n != int64(len(docs)) {
			t.Fatalf("partition %d: count %d (%v), scan %d", p, n, err, len(docs))
		}
		if counts, err := e.Collections(ctx, p, "u"); err != nil || len(docs) > 0 && (len(counts) != 1 || counts[0].Count != int64(len(docs))) {
			t.Fatalf("partition %d: collection counts %v (%v) after the crash, %d documents", p, counts, err, len(docs))
		}
	}
	t.Logf("acknowledged before the kill: %v", acked)
}

// writeUntilKilled commits batches of new documents to every partition at
// once, printing "partition seq" for the last of each batch that returned.
func writeUntilKilled(dir string) {
	e, err := Open(Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var mu, recMu sync.Mutex // recMu: SaveRecords's callers serialise it
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for p := range crashPartitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); ; {
				writes := make([]engine.Write, crashBatch)
				for i := range writes {
					id := strconv.FormatUint(seq, 10)
					writes[i] = engine.Write{Doc: &record.Doc{Key: record.DocKey("u", "c", id), User: "u", Coll: "c", ID: id, Version: 1,
						Pos: record.Position{Epoch: 1, Seq: seq}, Updated: time.Now(), Body: map[string]any{"seq": int64(seq)}}, Insert: true}
					seq++
				}
				if err := e.Commit(context.Background(), p, writes); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				// The partition's record too (a replica's applied
				// position), as SyncApplied writes it after a batch.
				recMu.Lock()
				err := e.SaveRecords(context.Background(), []engine.PartitionRecord{{Partition: p, Epoch: 1, Seq: seq - 1}}, nil)
				recMu.Unlock()
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintf(w, "%d %d\n", p, seq-1)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

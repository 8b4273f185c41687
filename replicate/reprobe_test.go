package replicate

import (
	"context"
	"fmt"
	"testing"

	"github.com/shoal-db/shoal/store"
)

// A replica that holds more of the history than its master last saw it
// acknowledge (it was the partition's master in between: the master had
// copied the partition to it, handed it over, and took it back) is asked
// where it is when the master's new tenure first reaches it, before
// anything is copied to it. Before, the catch-up started from the old
// acknowledgement and sent it every document of the tenure in between
// again, each a lookup on the replica, in chunks that under load timed
// out again and again: the fault suite's seeds 9724 and 9814, where the
// draining former master, never answering a batch of the new tenure, was
// kept in the partition's list for minutes.
func TestANewTenureAsksAReplicaWhereItIsBeforeCopyingToIt(t *testing.T) {
	ctx := context.Background()
	tr := newTrio(t, []string{"a"}, 500)
	k1 := tr.write(t, "k1")
	tr.acked(t, "a", k1)

	// The rest of the history reaches a by another road, as when a
	// mastered the partition: the shipper still knows it at k1.
	tr.replicas["a"].setCut(true)
	var docs []*store.Doc
	var last store.Position
	for i := 2; i <= 40; i++ {
		last = tr.write(t, fmt.Sprintf("k%d", i))
		d, err := tr.master.Get(ctx, 0, store.DocKey("u", "c", fmt.Sprintf("k%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	b := store.Batch{Partition: 0, Epoch: 1, From: k1, UpTo: last, Docs: docs}
	if r := Apply(ctx, tr.replicas["a"].writer, Request{Batches: []WireBatch{ToWire(b)}}); r.Results[0].Code != CodeOK {
		t.Fatalf("a did not take the history directly: %+v", r.Results[0])
	}
	if got, _ := tr.shipper.Acked("a", 0); got != k1 {
		t.Fatalf("the shipper knows a at %s, want k1 %s", got, k1)
	}

	// The master's next tenure.
	tr.start.Store(&last)
	tr.epoch.Store(2)
	tr.mu.Lock()
	before := len(tr.sent["a"])
	tr.mu.Unlock()
	tr.replicas["a"].setCut(false)
	tr.shipper.Ensure(1)
	await(t, func() string { return "a answers a batch of epoch 2" }, func() bool { return tr.shipper.Heard("a", 0, 2) })
	tr.acked(t, "a", last)

	tr.mu.Lock()
	defer tr.mu.Unlock()
	// Batches of the new tenure only: a catch-up of epoch 1 may have been
	// on its way when the tenure changed.
	copied := 0
	for _, b := range tr.sent["a"][before:] {
		if b.Epoch == 2 {
			copied += len(b.Docs)
		}
	}
	if copied > 0 {
		t.Fatalf("%d documents copied again to a replica that held them all (at %s, known at %s)", copied, last, k1)
	}
}

// A catch-up whose chunk the replica did not take in time (a loaded
// replica: the embedded store looks each document it already holds up
// with a scan) starts over with chunks of at most half as many documents,
// and they do not grow past that until a catch-up completes. Before, the
// chunk size kept doubling after each chunk taken, so a catch-up that
// restarted from the replica's position met the same too-large chunk
// every time, and never ended.
func TestACatchUpShrinksChunksTheReplicaCannotTakeInTime(t *testing.T) {
	tr := newTrio(t, []string{"a"}, 500)
	k1 := tr.write(t, "k1")
	tr.acked(t, "a", k1)
	tr.replicas["a"].setCut(true)
	var last store.Position
	for i := 2; i <= 200; i++ {
		last = tr.write(t, fmt.Sprintf("k%d", i))
	}
	tr.slowOver.Store(20)
	tr.replicas["a"].setCut(false)
	tr.shipper.Ensure(1)
	tr.acked(t, "a", last)
}

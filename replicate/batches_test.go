package replicate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/storetest"
	"github.com/shoal-db/shoal/store"
)

const kib = 1 << 10

// filler is a body of about n bytes of pad.
func filler(id, pad string, n int) map[string]any {
	return map[string]any{"id": id, "pad": strings.Repeat(pad, n/len(pad))}
}

// checkSent fails the test if a request was refused for its size, or
// carried more than one document and more than bound bytes.
func (pr *pair) checkSent(t *testing.T, bound int) {
	t.Helper()
	pr.mu.Lock()
	defer pr.mu.Unlock()
	several := 0
	for i, s := range pr.sent {
		if s.docs > 1 {
			several++
		}
		if s.refused {
			t.Errorf("request %d (%d documents, %d bytes) was over the replica's body cap", i, s.docs, s.bytes)
		} else if s.docs > 1 && s.bytes > bound {
			t.Errorf("request %d carried %d documents in %d bytes, over the bound of %d", i, s.docs, s.bytes, bound)
		}
	}
	if several == 0 {
		t.Errorf("no request of the %d carried more than one document: the bound was not put to the test", len(pr.sent))
	}
}

// Live runs, catch-up chunks and full-copy chunks are bounded by bytes as
// well as by count: documents of 2 KiB (and of 640 bytes that JSON
// escapes to 3.75 KiB) reach a replica whose body cap a count-bounded
// request of them exceeds; a document larger than the bound goes alone. Before, the
// replica refused the request, the partition went to catch-up, and the
// catch-up chunk was refused for ever.
func TestRequestsAreBoundedByBytes(t *testing.T) {
	const bound = 8 * kib
	pr := newPairWith(t, pairOptions{maxBatchDocs: 500, maxBatchBytes: bound, bodyCap: 3 * bound})
	ctx := context.Background()
	body := func(id string, i int) map[string]any {
		if i%2 == 1 {
			return filler(id, "<", 640) // BSON 640 bytes, JSON 3.75 KiB: its stored size understates it
		}
		return filler(id, "x", 2*kib)
	}

	// Live: one commit of 12 documents (a run four times the bound), then
	// one document larger than the bound.
	var ops []store.Op
	for i := range 12 {
		id := fmt.Sprintf("a%02d", i)
		ops = append(ops, store.Op{Partition: 0, User: "u", Coll: "c", ID: id,
			Mutate: func(*store.Doc) (store.Next, error) { return store.Next{Body: body(id, i), Size: 16}, nil }})
	}
	for _, r := range pr.master.DoAll(ctx, ops) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := pr.put(0, "huge", filler("huge", "x", 2*bound), false); r.Err != nil {
		t.Fatal(r.Err)
	}
	pr.waitPartition(t, 0, 30*time.Second)

	// Catch-up: 20 more arrive while the link is cut.
	pr.setCut(true)
	for i := range 20 {
		id := fmt.Sprintf("c%02d", i)
		if r := pr.put(0, id, body(id, i), false); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	pr.setCut(false)
	pr.waitPartition(t, 0, 30*time.Second)

	// Full copy: deletes whose tombstones are purged while cut.
	pr.setCut(true)
	for i := range 5 {
		if r := pr.put(0, fmt.Sprintf("c%02d", i), nil, true); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if n, err := pr.master.PurgeTombstones(ctx, time.Now().Add(time.Hour)); err != nil || n != 5 {
		t.Fatalf("purged %d %v, want 5", n, err)
	}
	pr.setCut(false)
	pr.waitPartition(t, 0, 30*time.Second)

	if m, r := contents(t, pr.mstore), contents(t, pr.rstore); !slices.Equal(m, r) {
		t.Fatalf("the replica holds\n%v\nthe master\n%v", r, m)
	}
	pr.mu.Lock()
	copies := pr.fullCopies
	pr.mu.Unlock()
	if copies == 0 {
		t.Fatal("no full copy was sent")
	}
	pr.checkSent(t, bound)
}

// A partition that cannot be shipped (here a document over the replica's
// body cap) must not keep the replica's other partitions from being
// caught up. Before, catch-up always took the lowest-numbered partition
// that needed it, so partition 0 failing for ever stalled partition 1.
func TestAPartitionThatCannotBeShippedDoesNotStallTheOthers(t *testing.T) {
	const bound = 64 * kib
	pr := newPairWith(t, pairOptions{partitions: 2, maxBatchDocs: 500, maxBatchBytes: bound, bodyCap: 2 * bound})
	pr.setCut(true)
	if r := pr.put(0, "too-big", filler("too-big", "x", 3*bound), false); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := range 10 {
		id := fmt.Sprintf("d%d", i)
		if r := pr.put(1, id, filler(id, "x", kib), false); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	pr.setCut(false)
	pr.waitPartition(t, 1, 30*time.Second)
	if m, r := partitionContents(t, pr.mstore, 1), partitionContents(t, pr.rstore, 1); !slices.Equal(m, r) {
		t.Fatalf("partition 1: the replica holds\n%v\nthe master\n%v", r, m)
	}
	if acked, _ := pr.shipper.Acked("r", 0); acked == pr.master.Position(0) {
		t.Fatal("partition 0 was shipped despite a document over the body cap: the test proves nothing")
	}
}

// A change stored while the lease ran out during its commit is not
// acknowledged, but it is in the master's history: with no further
// commit, the replica must still be brought up to the master's position
// (before, the shipper compared the replica with the last position handed
// to it, saw nothing missing, and the replica lacked the document until
// the next commit; a handoff waiting for the receiver to hold the
// master's position timed out).
func TestAChangeStoredAsTheLeaseRanOutReachesTheReplica(t *testing.T) {
	var checks atomic.Int64
	// The writer asks the lease before and after each commit: the check
	// after the second commit finds it gone (and later ones find it back).
	lease := func(int) (uint64, bool) { return 1, checks.Add(1) != 4 }
	pr := newPairWith(t, pairOptions{lease: lease})
	pr.write(t, "a", false)
	pr.waitReplicated(t)
	if r := pr.put(0, "b", map[string]any{"id": "b"}, false); !errors.Is(r.Err, store.ErrLeaseLost) {
		t.Fatalf("the commit whose lease ran out answered %v, want ErrLeaseLost", r.Err)
	}
	pr.waitPartition(t, 0, 10*time.Second)
	m, r := contents(t, pr.mstore), contents(t, pr.rstore)
	if !slices.Equal(m, r) || len(r) != 2 {
		t.Fatalf("the replica holds\n%v\nthe master\n%v", r, m)
	}
}

// A commit that failed may have stored part of its changes, and its
// positions are never handed out again: with no further commit, the
// replica must still reach the master's position, holding what the
// master's store holds.
func TestAFailedCommitStillMovesTheReplica(t *testing.T) {
	mongo := storetest.Start(t)
	pr := newPairWith(t, pairOptions{storeURI: mongo.URI})
	pr.write(t, "a", false)
	pr.waitReplicated(t)
	unlock := mongo.LockWrites(t, "shoal")
	r := pr.put(0, "b", map[string]any{"id": "b"}, false)
	unlock()
	if !errors.Is(r.Err, store.ErrOutcomeUnknown) {
		t.Fatalf("the commit into a locked store answered %v, want ErrOutcomeUnknown", r.Err)
	}
	pr.waitPartition(t, 0, 10*time.Second)
	if m, r := contents(t, pr.mstore), contents(t, pr.rstore); !slices.Equal(m, r) {
		t.Fatalf("the replica holds\n%v\nthe master\n%v", r, m)
	}
}

package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

func TestFullCopyChunks(t *testing.T) {
	docs := func(ids ...string) []*store.Doc {
		var out []*store.Doc
		for _, id := range ids {
			out = append(out, &store.Doc{Key: id})
		}
		return out
	}
	acked, target, horizon := store.Position{Epoch: 1, Seq: 2}, store.Position{Epoch: 1, Seq: 9}, store.Position{Epoch: 1, Seq: 5}
	b, last := fullCopyChunk(7, 1, "", docs("a", "b"), true, acked, target, horizon)
	if last || !b.Full || b.KeyFrom != "" || b.KeyTo != "b" || b.UpTo != acked || b.From != (store.Position{}) || b.Horizon != horizon {
		t.Fatalf("a full chunk: %+v last=%v", b, last)
	}
	b, last = fullCopyChunk(7, 1, "b", docs("c"), false, acked, target, horizon)
	if !last || b.KeyFrom != "b" || b.KeyTo != "" || b.UpTo != target {
		t.Fatalf("the final chunk: %+v last=%v", b, last)
	}
	b, last = fullCopyChunk(7, 1, "c", nil, false, acked, target, horizon)
	if !last || b.KeyTo != "" || b.UpTo != target || len(b.Docs) != 0 {
		t.Fatalf("an empty final chunk: %+v last=%v", b, last)
	}
}

// pair is a master and a replica, each with a real store, linked by a
// shipper whose link can be cut, whose full-copy chunks can be made to
// fail, and which refuses requests larger than a body cap, as the
// replica's HTTP handler does.
type pair struct {
	master, replica *store.Writer
	mstore, rstore  *store.Store
	shipper         *Shipper
	opts            pairOptions
	mu              sync.Mutex
	cut             bool
	failFullChunk   int // fail the n-th full-copy chunk sent (1-based), once
	fullChunks      int
	fullCopies      int
	sent            []sentRequest // every request that reached the wire
	restores        []WireBatch   // every restore batch sent
}

// pairOptions shape a pair; the zero value is one partition, chunks of 3
// documents, no byte bound of the test's own and no body cap.
type pairOptions struct {
	partitions    int
	maxBatchDocs  int
	maxBatchBytes int
	// bodyCap: the replica refuses a request whose JSON is larger (0: none).
	bodyCap int
	// lease is the master writer's lease (nil: always held at epoch 1).
	lease func(partition int) (uint64, bool)
	// storeURI: the master's store is this MongoDB (""; an embedded one).
	storeURI string
	// tenures: the shipper takes the master's epoch from lease, and its
	// epoch start and chain from the master writer (default: epoch 1
	// from the zero position, no chain).
	tenures bool
	// tamper, if set, changes the replica's answer before the shipper
	// reads it (a replica that answers wrongly).
	tamper func(*Response)
	// applied, if set, sees every request the replica applied, after it
	// applied it.
	applied func(Request)
	// beforeScan, if set, runs before every scan of a catch-up.
	beforeScan func()
	// beforeCount, if set, runs before every count of what a catch-up or
	// full copy has to send; afterLast after every read of the master's
	// last position, once it is read.
	beforeCount func()
	afterLast   func()
	// chaseChunks is the shipper's ChaseChunks (0: its default).
	chaseChunks int
}

// sentRequest is what one request carried on the wire.
type sentRequest struct {
	bytes, docs int
	refused     bool // over the body cap
}

func newPair(t *testing.T) *pair { return newPairWith(t, pairOptions{}) }

func newPairWith(t *testing.T, o pairOptions) *pair {
	t.Helper()
	if o.partitions == 0 {
		o.partitions = 1
	}
	if o.maxBatchDocs == 0 {
		o.maxBatchDocs = 3
	}
	ctx := context.Background()
	open := func(uri string) *store.Store {
		s, err := store.Open(ctx, store.Options{URI: uri, Database: "shoal", DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(ctx) })
		return s
	}
	pr := &pair{mstore: open(o.storeURI), rstore: open(""), opts: o}
	pr.replica = store.NewWriter(pr.rstore, o.partitions, store.WriterOptions{CacheBytes: 1 << 20})
	epoch := func(int) (uint64, bool) { return 1, true }
	epochStart := func(int, uint64) store.Position { return store.Position{} }
	var epochs func(int, uint64) []store.EpochStart
	if o.tenures {
		epoch = o.lease
		epochStart = func(p int, e uint64) store.Position { return pr.master.EpochStart(p, e) }
		epochs = func(p int, e uint64) []store.EpochStart { return pr.master.Epochs(p, e) }
	}
	pr.shipper = New((&wiring{
		replicas:   func(int) []string { return []string{"r"} },
		epoch:      epoch,
		epochStart: epochStart,
		epochs:     epochs,
		last: func(p int) store.Position {
			pos := pr.master.Position(p)
			if o.afterLast != nil {
				o.afterLast()
			}
			return pos
		},
		horizon: func(p int) store.Position { return pr.master.Horizon(p) },
		scan: func(ctx context.Context, p int, after store.Position, limit int) ([]*store.Doc, error) {
			if o.beforeScan != nil {
				o.beforeScan()
			}
			return pr.mstore.ScanAfter(ctx, p, after, limit)
		},
		scanKeys: pr.mstore.ScanKeys,
		count: func(ctx context.Context, p int, after store.Position) (int64, error) {
			if o.beforeCount != nil {
				o.beforeCount()
			}
			return pr.mstore.CountAfter(ctx, p, after)
		},
		get:             func(ctx context.Context, p int, k string) (*store.Doc, error) { return pr.master.Get(ctx, p, k) },
		fullCopyStarted: func(int) { pr.mu.Lock(); pr.fullCopies++; pr.mu.Unlock() },
		send:            pr.send,
	}).config(Config{MaxBatchDocs: o.maxBatchDocs, MaxBatchBytes: o.maxBatchBytes, ChaseChunks: o.chaseChunks}))
	pr.master = store.NewWriter(pr.mstore, o.partitions, store.WriterOptions{CacheBytes: 1 << 20, OnCommitted: pr.shipper.Committed,
		Lease: o.lease})
	t.Cleanup(func() {
		pr.shipper.Close()
		pr.master.Close(ctx)
		pr.replica.Close(ctx)
	})
	return pr
}

// send crosses the wire as JSON, as between nodes.
func (pr *pair) send(ctx context.Context, _ string, req Request) (Response, error) {
	pr.mu.Lock()
	if pr.cut {
		pr.mu.Unlock()
		return Response{}, errors.New("link cut")
	}
	for _, b := range req.Batches {
		if b.Restore {
			pr.restores = append(pr.restores, b)
		}
		if b.Full {
			pr.fullChunks++
			if pr.fullChunks == pr.failFullChunk {
				pr.mu.Unlock()
				return Response{}, errors.New("connection reset in the middle of a full copy")
			}
		}
	}
	pr.mu.Unlock()
	data, err := json.Marshal(req)
	if err != nil {
		return Response{}, err
	}
	sent := sentRequest{bytes: len(data), refused: pr.opts.bodyCap > 0 && len(data) > pr.opts.bodyCap}
	for _, b := range req.Batches {
		sent.docs += len(b.Docs)
	}
	pr.mu.Lock()
	pr.sent = append(pr.sent, sent)
	pr.mu.Unlock()
	if sent.refused {
		return Response{}, fmt.Errorf("400 Bad Request: the request body (%d bytes) is over the cap", len(data))
	}
	decoded, err := DecodeRequest(bytes.NewReader(data))
	if err != nil {
		return Response{}, err
	}
	resp := Apply(ctx, pr.replica, decoded)
	if pr.opts.applied != nil {
		pr.opts.applied(decoded)
	}
	if pr.opts.tamper != nil {
		pr.opts.tamper(&resp)
	}
	return resp, nil
}

func (pr *pair) setCut(cut bool) {
	pr.mu.Lock()
	pr.cut = cut
	pr.mu.Unlock()
}

func (pr *pair) write(t *testing.T, id string, del bool) {
	t.Helper()
	if res := pr.put(0, id, map[string]any{"id": id}, del); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// put writes (or deletes) one document of partition p.
func (pr *pair) put(p int, id string, body map[string]any, del bool) store.Result {
	return pr.master.Do(context.Background(), store.Op{Partition: p, User: "u", Coll: "c", ID: id,
		Mutate: func(*store.Doc) (store.Next, error) {
			return store.Next{Body: body, Delete: del, Size: 16}, nil
		}})
}

// waitReplicated waits until the replica has acknowledged the master's
// last position of partition 0.
func (pr *pair) waitReplicated(t *testing.T) {
	t.Helper()
	pr.waitPartition(t, 0, 30*time.Second)
}

// waitPartition waits until the replica has acknowledged the master's
// last position of partition p.
func (pr *pair) waitPartition(t *testing.T, p int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pr.shipper.Ensure(pr.opts.partitions)
	want := pr.master.Position(p)
	if _, err := pr.shipper.WaitReplicated(ctx, p, want, func() []string { return []string{"r"} }, 1); err != nil {
		got, _ := pr.shipper.Acked("r", p)
		t.Fatalf("the replica did not reach %v of partition %d (at %v): %v", want, p, got, err)
	}
}

func contents(t *testing.T, s *store.Store) []string {
	t.Helper()
	return partitionContents(t, s, 0)
}

func partitionContents(t *testing.T, s *store.Store, p int) []string {
	t.Helper()
	docs, err := s.ScanKeys(context.Background(), p, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, fmt.Sprintf("%s v%d @%s deleted=%v", d.ID, d.Version, d.Pos, d.Deleted))
	}
	return out
}

// A replica cut off while the master deletes documents and purges their
// tombstones cannot be caught up in position order: it gets a full copy,
// in chunks; one that fails midway starts over; the replica ends holding
// exactly what the master holds, at the master's position and horizon.
func TestAReplicaBehindTheHorizonGetsAFullCopy(t *testing.T) {
	pr := newPair(t)
	for i := range 10 {
		pr.write(t, fmt.Sprintf("k%d", i), false)
	}
	pr.waitReplicated(t)

	pr.setCut(true)
	for i := range 5 {
		pr.write(t, fmt.Sprintf("k%d", i), true)
	}
	pr.write(t, "k5", false)
	for i := range 4 {
		pr.write(t, fmt.Sprintf("n%d", i), false)
	}
	pr.write(t, "k9", true)
	if n, err := pr.master.PurgeTombstones(context.Background(), time.Now().Add(time.Hour)); err != nil || n != 6 {
		t.Fatalf("purged %d %v, want 6", n, err)
	}
	acked, _ := pr.shipper.Acked("r", 0)
	if h := pr.master.Horizon(0); !behindHorizon(acked, h) {
		t.Fatalf("the replica at %v is not behind the horizon %v", acked, h)
	}
	pr.mu.Lock()
	pr.failFullChunk = 2
	pr.mu.Unlock()
	pr.setCut(false)
	pr.waitReplicated(t)

	if m, r := contents(t, pr.mstore), contents(t, pr.rstore); !slices.Equal(m, r) {
		t.Fatalf("the replica holds\n%v\nthe master\n%v", r, m)
	}
	if got := len(contents(t, pr.rstore)); got != 8 {
		t.Fatalf("the replica holds %d documents, want 8 (k5-k8, n0-n3)", got)
	}
	if pr.replica.Applied(0) != pr.master.Position(0) || pr.replica.Horizon(0) != pr.master.Horizon(0) {
		t.Fatalf("replica applied %v horizon %v; master at %v horizon %v",
			pr.replica.Applied(0), pr.replica.Horizon(0), pr.master.Position(0), pr.master.Horizon(0))
	}
	pr.mu.Lock()
	copies, chunks := pr.fullCopies, pr.fullChunks
	pr.mu.Unlock()
	// 8 documents in chunks of 3: 3, 3, 2 (final); the second failed once.
	if copies != 2 || chunks != 2+3 {
		t.Fatalf("%d full copies in %d chunks, want 2 copies (one interrupted) in 5 chunks", copies, chunks)
	}
	// Live changes resume as usual after the copy.
	pr.write(t, "after", false)
	pr.waitReplicated(t)
	if m, r := contents(t, pr.mstore), contents(t, pr.rstore); !slices.Equal(m, r) {
		t.Fatalf("after a live change the replica holds\n%v\nthe master\n%v", r, m)
	}
}

// A replica's answer gives one result per batch, in order. A result that
// names another partition than its batch is no acknowledgement of either:
// taken as one, it would count the replica for writes of a partition it
// was never sent (a majority write acknowledged on a copy that lacks it).
func TestAResultForAnotherPartitionAcknowledgesNothing(t *testing.T) {
	claimed := store.Position{Epoch: 1, Seq: 999}
	pr := newPairWith(t, pairOptions{partitions: 2, tamper: func(resp *Response) {
		for i := range resp.Results {
			if resp.Results[i].Partition == 0 {
				resp.Results[i].Partition, resp.Results[i].Applied = 1, claimed
			}
		}
	}})
	pr.shipper.Ensure(2)
	if res := pr.put(1, "b", map[string]any{"id": "b"}, false); res.Err != nil {
		t.Fatal(res.Err)
	}
	pr.waitPartition(t, 1, 30*time.Second)
	if res := pr.put(0, "a", map[string]any{"id": "a"}, false); res.Err != nil {
		t.Fatal(res.Err)
	}
	// The shipper sends partition 0's change and reads the tampered answer
	// (or refuses it); either way partition 1 must not be acknowledged
	// beyond what its master wrote.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for pr.sentCount() < 2 && ctx.Err() == nil {
		try, stop := context.WithTimeout(ctx, 50*time.Millisecond)
		pr.shipper.WaitReplicated(try, 0, pr.master.Position(0), func() []string { return []string{"r"} }, 1)
		stop()
	}
	if ctx.Err() != nil {
		t.Fatal("partition 0's change was never sent")
	}
	if got, _ := pr.shipper.Acked("r", 1); got.Compare(pr.master.Position(1)) > 0 {
		t.Fatalf("partition 1 is acknowledged at %v, beyond its master's %v, from a result of partition 0's batch", got, pr.master.Position(1))
	}
}

func (pr *pair) sentCount() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return len(pr.sent)
}

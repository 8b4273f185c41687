package api_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// heldByAll is replication in which every replica it is asked about
// holds every write at once; it records whom it was asked about.
type heldByAll struct {
	mu    sync.Mutex
	asked [][]string
}

func (r *heldByAll) WaitReplicated(ctx context.Context, partition int, pos store.Position, replicas func() []string, need int) (int, error) {
	rs := replicas()
	r.mu.Lock()
	r.asked = append(r.asked, rs)
	r.mu.Unlock()
	if len(rs) >= need {
		return need, nil
	}
	return len(rs), context.DeadlineExceeded
}

func (r *heldByAll) WaitMajorityHeld(ctx context.Context, partition int, pos store.Position) (store.Position, error) {
	return pos, nil
}

func (*heldByAll) Lags() []replicate.Lag { return nil }

// A write concern counts only the replicas Config.Counted leaves in: a
// copy a swap is replacing (replicate.Mastership.Counted) is still a
// regular copy of the table, but a majority write it alone holds beside
// the master could be on no copy of the list a node taking over reads.
// Before, write concerns counted every regular copy of the table, whatever
// the shipper's count left out. RF 3, master a at epoch 4 with b and c.
func TestAWriteConcernCountsOnlyTheCopiesThatCount(t *testing.T) {
	logger := testnode.Logger(t)
	st := openStore(t, logger)
	leases := &leaseView{}
	leases.set(true, 4, "")
	w := store.NewWriter(st, 1, store.WriterOptions{Logger: logger, Lease: leases.Holds})
	t.Cleanup(func() { w.Close(context.Background()) })
	table := shard.NewTable(1)
	table.Merge(shard.Assignment{Partition: 0, Master: "a", Epoch: 4, Responsible: []string{"a", "b", "c"}})
	var mu sync.Mutex
	var out []string // the copies that do not count
	var epochs []uint64
	counted := func(p int, epoch uint64, replicas []string) []string {
		mu.Lock()
		defer mu.Unlock()
		epochs = append(epochs, epoch)
		return slices.DeleteFunc(slices.Clone(replicas), func(r string) bool { return slices.Contains(out, r) })
	}
	repl := &heldByAll{}
	srv := api.New(api.Config{NodeID: "a", PartitionCount: 1, MaxBodyBytes: 1 << 20, AuthSecret: []byte(testnode.Secret), Logger: logger,
		Leases: leases, Table: table, Copies: func() int { return 3 }, Counted: counted, Replication: repl}, st, w)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cl := testnode.NewClient(t, hs.URL, testnode.Token(t, "alice"))
	const doc = "/v1/users/alice/collections/c/documents/d"

	mu.Lock()
	out = []string{"b"}
	mu.Unlock()
	expectStatus(t, cl.Do("PUT", doc, `{"v":1}`, "X-Write-Concern", "majority"), 201, "majority with c counted")
	mu.Lock()
	out = []string{"b", "c"}
	mu.Unlock()
	expectProblem(t, cl.Do("PUT", doc, `{"v":2}`, "X-Write-Concern", "majority", "X-Write-Timeout", "100ms"), 504, api.TypeTimeout, "majority with neither counted")

	repl.mu.Lock()
	defer repl.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(repl.asked) != 2 || !slices.Equal(repl.asked[0], []string{"c"}) || len(repl.asked[1]) != 0 {
		t.Fatalf("the write concerns counted %v; want [c], then none", repl.asked)
	}
	for _, e := range epochs {
		if e != 4 {
			t.Fatalf("Counted was asked at epochs %v; want the lease's, 4", epochs)
		}
	}
}

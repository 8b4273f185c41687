package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/replicate"
	"github.com/shoal-db/shoal/shard"
	"github.com/shoal-db/shoal/store"
)

// acks records what the API acknowledged.
type acks struct {
	mu   sync.Mutex
	list []api.Acknowledgement
}

func (a *acks) Acknowledged(ack api.Acknowledgement) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.list = append(a.list, ack)
}

func (a *acks) all() []api.Acknowledgement {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]api.Acknowledgement(nil), a.list...)
}

// handedOver is a node's handoffs: it handed the partition over with
// its history up to upTo (zero: never).
type handedOver struct {
	mu   sync.Mutex
	upTo store.Position
}

func (h *handedOver) HandedOver(partition int, pos store.Position) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upTo != (store.Position{}) && pos.Compare(h.upTo) <= 0
}

func (h *handedOver) Wait(context.Context, int, time.Duration) {}

func (h *handedOver) TakeOver(context.Context, int, store.Position) (shard.Assignment, error) {
	return shard.Assignment{}, errors.New("no takeover here")
}

func (h *handedOver) Positions([]int) map[int]api.PositionAnswer { return nil }

// lapsingReplication confirms every write concern at once, after telling
// the master its write waited there.
type lapsingReplication struct{ m *lapsingMaster }

func (r lapsingReplication) WaitReplicated(ctx context.Context, partition int, pos store.Position, replicas func() []string, need int) (int, error) {
	r.m.reached(afterWait)
	return need, nil
}

func (r lapsingReplication) WaitMajorityHeld(ctx context.Context, partition int, pos store.Position) (store.Position, error) {
	return pos, nil
}

func (lapsingReplication) Lags() []replicate.Lag { return nil }

// When the lease runs out in a lapsingMaster's write.
const (
	never       = ""
	afterCommit = "after the writer's commit and its own check of the lease"
	afterWait   = "while the write waited for its copies"
)

// lapsingMaster is the API of one node over a real store and writer,
// master of its one partition at epoch 4 (three copies), whose lease runs
// out at the point of a write the test names: as if the process were
// stopped there past its lease while another node took the partition.
type lapsingMaster struct {
	leases  *leaseView
	acks    *acks
	handoff *handedOver
	client  *testnode.Client

	mu    sync.Mutex
	lapse string // never, afterCommit or afterWait
	then  uint64 // the epoch this node holds once it ran out (0: none)
}

// reached is called at each point of a write where the lease may run out.
func (m *lapsingMaster) reached(point string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if point != m.lapse {
		return
	}
	if m.then == 0 {
		m.leases.set(false, 0, "b")
	} else {
		m.leases.set(true, m.then, "")
	}
}

// arm makes the next write lose the lease at point, and this node hold
// epoch then afterwards; the lease is held at epoch 4 until then.
func (m *lapsingMaster) arm(point string, then uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lapse, m.then = point, then
	m.leases.set(true, 4, "")
}

// openStore opens an embedded store in the test's directory, closed when
// the test ends.
func openStore(t *testing.T, logger *slog.Logger) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{Database: "shoal", DataDir: filepath.Join(t.TempDir(), "store"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

func startLapsingMaster(t *testing.T) *lapsingMaster {
	t.Helper()
	logger := testnode.Logger(t)
	m := &lapsingMaster{leases: &leaseView{}, acks: &acks{}, handoff: &handedOver{}}
	m.leases.set(true, 4, "")
	st := openStore(t, logger)
	w := store.NewWriter(st, 1, store.WriterOptions{Logger: logger, Lease: m.leases.Holds,
		OnCommit: func(int, uint64, time.Time, time.Time) { m.reached(afterCommit) }})
	t.Cleanup(func() { w.Close(context.Background()) })
	srv := api.New(api.Config{NodeID: "a", PartitionCount: 1, MaxBodyBytes: 1 << 20, AuthSecret: []byte(testnode.Secret), Logger: logger,
		Leases: m.leases, Copies: func() int { return 3 }, Replication: lapsingReplication{m}, Acknowledgements: m.acks, Handoffs: m.handoff}, st, w)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	m.client = testnode.NewClient(t, hs.URL, testnode.Token(t, "alice"))
	return m
}

// A master acknowledges a write only while it holds the lease the write
// was committed under. A node stopped between its commit and its answer
// for longer than its lease (SIGSTOP, then SIGCONT once another node took
// the partition and acknowledged writes of its own) must not tell its
// client the write succeeded: it is not the master at that moment, and
// the next master may not have the write. It answers that the outcome is
// unknown, and records no acknowledgement.
func TestWriteIsNotAcknowledgedAfterTheLeaseRanOut(t *testing.T) {
	const docs = "/v1/users/alice/collections/c/documents"
	writes := []struct{ method, path, body string }{
		{"PUT", docs + "/d", `{"v":2}`},
		{"PATCH", docs + "/d", `{"w":3}`},
		{"POST", docs, `{"v":4}`},
		{"DELETE", docs + "/d", ``},
	}
	for _, c := range []struct {
		name    string
		concern string
		point   string
		then    uint64
	}{
		{"w=1, the lease lapsed between the commit and the answer", "1", afterCommit, 0},
		{"w=1, this node won the lease back at a later epoch before answering", "1", afterCommit, 6},
		{"majority, the lease lapsed while the write waited for its copies", "majority", afterWait, 0},
		{"majority, won back at a later epoch during the wait", "majority", afterWait, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := startLapsingMaster(t)
			expectStatus(t, m.client.Do("PUT", docs+"/d", `{"v":1}`, "X-Write-Concern", c.concern), 201, "PUT while master")
			for _, w := range writes {
				m.arm(c.point, c.then)
				expectProblem(t, m.client.Do(w.method, w.path, w.body, "X-Write-Concern", c.concern), 503, api.TypeTimeout, w.method+" "+c.point)
			}
			if got := m.acks.all(); len(got) != 1 {
				t.Fatalf("%d acknowledgements recorded, want only the first write's: %+v", len(got), got)
			}
		})
	}
}

// Every write answered as a success is recorded once, with the epoch it
// was committed under, its positions, and a time between the request and
// the answer.
func TestAcknowledgedWritesAreRecorded(t *testing.T) {
	m := startLapsingMaster(t)
	const docs = "/v1/users/alice/collections/c/documents"
	before := time.Now()
	expectStatus(t, m.client.Do("PUT", docs+"/d", `{"v":1}`), 201, "PUT")
	expectStatus(t, m.client.Do("PATCH", docs+"/d", `{"w":2}`, "X-Write-Concern", "majority"), 200, "majority PATCH")
	expectStatus(t, m.client.Do("POST", docs, `{"v":3}`), 201, "POST")
	expectStatus(t, m.client.Do("DELETE", docs+"/d", nil), 204, "DELETE")
	expectStatus(t, m.client.Do("DELETE", "/v1/users/alice", nil), 200, "erase the user")
	after := time.Now()
	got := m.acks.all()
	if len(got) != 5 {
		t.Fatalf("%d acknowledgements, want 5: %+v", len(got), got)
	}
	for i, a := range got {
		if a.Partition != 0 || a.Epoch != 4 || a.First.Epoch != 4 || a.Last.Epoch != 4 || a.At.Before(before) || a.At.After(after) || a.HandedOver {
			t.Errorf("acknowledgement %d: %+v", i, a)
		}
		if i < 4 && (a.First != a.Last || a.Last.Seq != uint64(i+1)) {
			t.Errorf("acknowledgement %d of one change: positions %s..%s, want 4.%d", i, a.First, a.Last, i+1)
		}
	}
	// The erase deleted the one document left (the POST's).
	if e := got[4]; e.First != e.Last || e.Last.Seq != 5 {
		t.Errorf("erase acknowledged positions %s..%s, want 4.5", e.First, e.Last)
	}
}

// A write whose lease ended in an orderly handoff that carried it is
// acknowledged: the next master continues this history. The record says
// so (it is an answer after the lease, accepting nothing).
func TestWriteCarriedByAHandoffIsAcknowledged(t *testing.T) {
	const docs = "/v1/users/alice/collections/c/documents"
	for _, concern := range []string{"1", "majority"} {
		t.Run("w="+concern, func(t *testing.T) {
			m := startLapsingMaster(t)
			m.arm(afterCommit, 0)
			m.handoff.mu.Lock()
			m.handoff.upTo = store.Position{Epoch: 4, Seq: 1}
			m.handoff.mu.Unlock()
			expectStatus(t, m.client.Do("PUT", docs+"/d", `{"v":1}`, "X-Write-Concern", concern), 201, "PUT handed over before its answer")
			if got := m.acks.all(); len(got) != 1 || !got[0].HandedOver || got[0].Epoch != 4 {
				t.Fatalf("acknowledgements %+v, want one, handed over, at epoch 4", got)
			}
			// A write the handoff did not carry (past its position) is not.
			m.arm(afterCommit, 0)
			expectProblem(t, m.client.Do("PUT", docs+"/d", `{"v":2}`, "X-Write-Concern", concern), 503, api.TypeTimeout, "PUT the handoff did not carry")
		})
	}
}

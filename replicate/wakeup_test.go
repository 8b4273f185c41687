package replicate

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

// listFake is a master whose replica list a test changes; every replica
// answers every batch "ok" at position at.
type listFake struct {
	mu   sync.Mutex
	reps []string
	at   store.Position
}

func (f *listFake) Epoch(int) (uint64, bool) { return f.at.Epoch, true }
func (f *listFake) Replicas(int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reps)
}
func (f *listFake) setReplicas(reps ...string) {
	f.mu.Lock()
	f.reps = reps
	f.mu.Unlock()
}
func (f *listFake) Copies() int                                  { return 3 }
func (f *listFake) Counted(_ int, _ uint64, r []string) []string { return r }
func (f *listFake) Last(int) store.Position                      { return f.at }
func (f *listFake) EpochStart(int, uint64) store.Position        { return store.Position{} }
func (f *listFake) Epochs(int, uint64) []store.EpochStart        { return nil }
func (f *listFake) Horizon(int) store.Position                   { return store.Position{} }
func (f *listFake) Get(context.Context, int, string) (*store.Doc, error) {
	return nil, store.ErrNotFound
}
func (f *listFake) Scan(context.Context, int, store.Position, int) ([]*store.Doc, error) {
	return nil, nil
}
func (f *listFake) ScanKeys(context.Context, int, string, int) ([]*store.Doc, error) {
	return nil, nil
}
func (f *listFake) Count(context.Context, int, store.Position) (int64, error) { return 0, nil }
func (f *listFake) Send(_ context.Context, _ string, req Request) (Response, error) {
	var r Response
	for _, b := range req.Batches {
		r.Results = append(r.Results, Result{Partition: b.Partition, Applied: f.at, Code: CodeOK})
	}
	return r, nil
}

// A write waiting for its replicas counts the list it read; an
// acknowledgement taken in between that read and the count, from a
// replica the list gained meanwhile, must not be missed: it has already
// broadcast, so a waiter that then waits sleeps until the next answer or
// its deadline. Found by a review of 9750362 (which moved the read out
// of the shipper's lock); before the fix the wait below ended only at its
// deadline.
func TestAWaitForReplicasSeesAnAnswerTakenInWhileItReadTheList(t *testing.T) {
	pos := store.Position{Epoch: 1, Seq: 10}
	f := &listFake{reps: []string{"A", "B"}, at: pos}
	s := New(Config{Mastership: f, Source: f, Transport: f})
	defer s.Close()
	s.mu.Lock()
	for _, id := range []string{"A", "B", "C"} {
		// Their senders count as running: the test drives send itself.
		s.dests[id] = &dest{id: id, wake: make(chan struct{}, 1), parts: map[int]*progress{0: {}}, running: true}
	}
	s.dests["A"].parts[0].acked, s.dests["A"].parts[0].known = pos, true
	s.mu.Unlock()
	calls := 0
	replicas := func() []string {
		calls++
		if calls > 1 {
			return f.Replicas(0)
		}
		// The waiter's first read: the list changes from [A B] to [A C],
		// and C's answer is taken in, before the waiter counts.
		listed := f.Replicas(0)
		f.setReplicas("A", "C")
		if err := s.send(s.dests["C"], Request{Batches: []WireBatch{{Partition: 0, Epoch: 1, From: pos, UpTo: pos}}}); err != nil {
			t.Fatal(err)
		}
		return listed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	have, err := s.WaitReplicated(ctx, 0, pos, replicas, 2)
	if err != nil || have < 2 {
		t.Fatalf("have %d, err %v: A and C (the list now) hold %s", have, err, pos)
	}
	if ctx.Err() != nil {
		t.Fatalf("the wait ended only at its deadline (have %d): the answer taken in while it read the list did not wake it", have)
	}
}

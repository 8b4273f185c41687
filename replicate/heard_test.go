package replicate

import "testing"

// A replica that holds all of a master's history from an earlier tenure is
// still sent a batch of the master's new tenure, with no write to carry:
// its answer (after the check that keeps what a former master wrote and
// this tenure never had, in the rollback collection) is what Heard
// reports, and what a master waits for before it drops a draining replica
// (the fault suite's seed 6009). Before, nothing went out until the next
// write, and Heard did not exist.
func TestAReplicaHearsOfANewTenureWithoutAWrite(t *testing.T) {
	tr := newTrio(t, []string{"a"}, 500)
	k1 := tr.write(t, "k1")
	tr.acked(t, "a", k1)
	if !tr.shipper.Heard("a", 0, 1) || tr.shipper.Heard("a", 0, 2) {
		t.Fatalf("after a batch of epoch 1: heard epoch 1 %v, epoch 2 %v", tr.shipper.Heard("a", 0, 1), tr.shipper.Heard("a", 0, 2))
	}
	if tr.shipper.Heard("b", 0, 1) {
		t.Fatal("a replica never sent to counts as heard")
	}
	tr.start.Store(&k1)
	tr.epoch.Store(2)
	tr.shipper.Ensure(1)
	await(t, func() string { return "a answers a batch of epoch 2" }, func() bool { return tr.shipper.Heard("a", 0, 2) })
	rw := tr.replicas["a"].writer
	if e, at := rw.NewestEpoch(0), rw.Applied(0); e != 2 || at != k1 {
		t.Fatalf("replica a: newest epoch %d, applied %s; want 2 and %s", e, at, k1)
	}
}

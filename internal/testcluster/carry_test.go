package testcluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/config"
	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/store"
)

// A new master carries the documents it holds beyond its tenure's start
// into its tenure as soon as the tenure takes writes, not at its first
// write. node1 masters a partition with node2 as replica; node2 stops,
// node1 acknowledges x and y (write concern 1) and stops too. node2's
// catch-up of x and y was cut short: it stored them, but its copy is
// complete only up to before them. node2 comes back, wins the partition by
// the promotion rule and takes no client write. Before, x and y stayed at
// node1's positions, in no history node2's tenure describes, and were
// never shipped as node2's until someone wrote to the partition; now node2
// rewrites them at positions of its epoch, its record says the carry is
// done, and its new replica (node3, once node1 is down past REPLICA_REPLACE_AFTER) holds
// them at those positions.
func TestANewMasterCarriesWithoutAWrite(t *testing.T) {
	t.Parallel() // a long test that checks what is kept, not how fast (see README, tests)
	// node2 stays down while node1 writes and stops: node1 must not
	// replace it meanwhile, nor node3 take the partition over as one whose
	// copies are all lost (2 s is too short for a starved machine).
	c := testcluster.Start(t, 3, testcluster.ReplicaReplaceAfter(10*time.Second))
	token := testnode.AdminToken(t)
	user, p := userPlacedOn(t, c, "node1", "node2")
	base := "/v1/users/" + user + "/collections/c/documents/"
	cl := c.Node("node1").Client(token)
	if r := cl.Do("PUT", base+"a", `{"n":0}`, "X-Write-Concern", "all"); r.Status != 201 {
		t.Fatalf("PUT a: %d %s", r.Status, r.Body)
	}
	c.Node("node2").Stop()
	for _, id := range []string{"x", "y"} {
		if r := cl.Do("PUT", base+id, `{"n":1}`); r.Status != 201 {
			t.Fatalf("PUT %s: %d %s", id, r.Status, r.Body)
		}
	}
	c.Node("node1").Stop()
	old := c.Node("node1").Placement(p)
	if !slices.Equal(old.Responsible, []string{"node1", "node2"}) {
		t.Fatalf("node1 chose other replicas (%v) before it stopped: the test ran too slowly to prove anything", old.Responsible)
	}

	// node2 stores x and y as a catch-up chunk would, without moving the
	// position its copy is complete up to.
	ctx := context.Background()
	from := openStopped(t, c.Node("node1").Config)
	to := openStopped(t, c.Node("node2").Config)
	held, _, err := to.Applied(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := from.ScanAfter(ctx, p, held, 0)
	from.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("node1 holds %d documents after node2's position %s, want x and y", len(docs), held)
	}
	w := store.NewWriter(to, testcluster.Partitions, store.WriterOptions{})
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	chunk := store.Batch{Partition: p, Epoch: old.Epoch, EpochStart: w.EpochStart(p, old.Epoch), Epochs: w.Epochs(p, old.Epoch),
		From: held, UpTo: held, Docs: docs}
	if r := w.Apply(ctx, chunk); r.Err != nil || r.Applied != held {
		t.Fatalf("storing the chunk: %+v", r)
	}
	w.Close(ctx)
	to.Close(ctx)

	node2 := c.Restart("node2")
	var epoch uint64
	testnode.Eventually(t, 30*time.Second, "node2 masters the partition", func() (bool, string) {
		e, ok := node2.Leases().Holds(p)
		epoch = e
		return ok, fmt.Sprint("master ", c.MasterOf(p))
	})
	if epoch <= old.Epoch {
		t.Fatalf("node2's tenure has epoch %d, node1's had %d", epoch, old.Epoch)
	}
	carried := func(n *testcluster.Node) (bool, string) {
		var at []string
		for _, id := range []string{"x", "y"} {
			d, err := n.Store().Get(ctx, p, store.DocKey(user, "c", id))
			if err != nil {
				return false, fmt.Sprintf("%s: %s: %v", n.ID, id, err)
			}
			if d.Pos.Epoch != epoch {
				return false, fmt.Sprintf("%s holds %s at %s, not at a position of epoch %d", n.ID, id, d.Pos, epoch)
			}
			at = append(at, d.Pos.String())
		}
		return true, fmt.Sprint(at)
	}
	testnode.Eventually(t, 20*time.Second, "node2 carries x and y into its tenure without a write", func() (bool, string) {
		return carried(node2)
	})
	_, onMaster := carried(node2)
	var replica string
	testnode.Eventually(t, 45*time.Second, "node2's replica holds x and y where node2 does", func() (bool, string) {
		pl := node2.Placement(p)
		if len(pl.Responsible) < 2 || pl.Responsible[1] == "node1" {
			return false, fmt.Sprint("responsible ", pl.Responsible)
		}
		replica = pl.Responsible[1]
		ok, at := carried(c.Node(replica))
		if !ok || at != onMaster {
			return false, fmt.Sprintf("%s (node2: %s)", at, onMaster)
		}
		if _, err := c.Node(replica).Store().Get(ctx, p, store.DocKey(user, "c", "a")); err != nil {
			return false, fmt.Sprintf("%s: a: %v", replica, err)
		}
		return true, ""
	})

	// The carry is done, durably: a next tenure starts after x and y.
	last := node2.Applied(p)
	node2.Stop()
	st := openStopped(t, node2.Config)
	defer st.Close(ctx)
	w = store.NewWriter(st, testcluster.Partitions, store.WriterOptions{})
	defer w.Close(ctx)
	if err := w.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.EpochStart(p, epoch+1); got != last {
		t.Fatalf("a tenure after node2's would start at %s, want %s: the record still says the carry is not done", got, last)
	}
	t.Logf("node2 took partition %d at epoch %d and carried x and y to %s; %s holds them there", p, epoch, onMaster, replica)
}

// openStopped opens the store of a stopped node.
func openStopped(t *testing.T, cfg config.Config) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Options{DataDir: cfg.DataDir, Database: cfg.MongoDB, Logger: testnode.Logger(t)})
	if err != nil {
		t.Fatalf("opening %s's store: %v", cfg.NodeID, err)
	}
	return st
}

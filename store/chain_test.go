package store

import (
	"context"
	"slices"
	"testing"
)

func at(epoch, seq uint64) Position { return Position{Epoch: epoch, Seq: seq} }

func chainOf(entries ...any) []EpochStart {
	var c []EpochStart
	for i := 0; i < len(entries); i += 2 {
		c = append(c, EpochStart{Epoch: uint64(entries[i].(int)), Start: entries[i+1].(Position)})
	}
	return c
}

func TestDivergenceRule(t *testing.T) {
	cases := []struct {
		name     string
		chain    []EpochStart
		pos      Position
		diverged bool
		boundary Position
	}{
		// With the master's current tenure only: today's rule.
		{"one tenure: older epoch after its start", chainOf(3, at(2, 2)), at(2, 3), true, at(2, 2)},
		{"one tenure: at its start", chainOf(3, at(2, 2)), at(2, 2), false, at(2, 2)},
		{"one tenure: before its start", chainOf(3, at(2, 2)), at(1, 9), false, at(2, 2)},
		{"one tenure: of the tenure itself", chainOf(3, at(2, 2)), at(3, 7), false, Position{}},
		// Two master changes: the second started in the first's epoch.
		{"abandoned epoch, older than the newest start", chainOf(3, at(2, 1), 4, at(3, 4)), at(2, 5), true, at(2, 1)},
		{"kept part of the abandoned epoch", chainOf(3, at(2, 1), 4, at(3, 4)), at(2, 1), false, at(2, 1)},
		{"the middle tenure, in the history", chainOf(3, at(2, 1), 4, at(3, 4)), at(3, 2), false, at(3, 4)},
		{"the middle tenure, at its end", chainOf(3, at(2, 1), 4, at(3, 4)), at(3, 4), false, at(3, 4)},
		{"the middle tenure, past its end", chainOf(3, at(2, 1), 4, at(3, 4)), at(3, 5), true, at(3, 4)},
		{"the current tenure", chainOf(3, at(2, 1), 4, at(3, 4)), at(4, 6), false, Position{}},
		// An epoch no entry names (a tenure the history skipped).
		{"a skipped epoch", chainOf(3, at(2, 1), 5, at(3, 4)), at(4, 1), true, at(3, 4)},
		// Truncated: older than every entry, the oldest applies.
		{"truncated: older, before the oldest start", chainOf(7, at(5, 3), 8, at(7, 2)), at(2, 9), false, at(5, 3)},
		{"truncated: older, after the oldest start", chainOf(7, at(5, 3), 8, at(7, 2)), at(5, 4), true, at(5, 3)},
		{"truncated: an epoch between", chainOf(7, at(5, 3), 8, at(7, 2)), at(6, 1), true, at(5, 3)},
		{"no chain", nil, at(2, 5), false, Position{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			boundary, ok := diverged(c.chain, c.pos)
			if ok != c.diverged || boundary != c.boundary {
				t.Fatalf("diverged(%v, %s) = %s, %v; want %s, %v", c.chain, c.pos, boundary, ok, c.boundary, c.diverged)
			}
		})
	}
}

func TestAgreement(t *testing.T) {
	cases := []struct {
		name   string
		local  []EpochStart
		held   Position
		master []EpochStart
		want   Position
	}{
		{"a replica behind, its master handed over", chainOf(2, at(1, 4)), at(2, 7), chainOf(2, at(1, 4), 3, at(2, 9)), at(2, 7)},
		{"the old master, all of it replicated", chainOf(2, at(1, 4)), at(2, 9), chainOf(2, at(1, 4), 3, at(2, 9)), at(2, 9)},
		{"the old master, cut off", chainOf(2, at(1, 4)), at(2, 12), chainOf(2, at(1, 4), 3, at(2, 9)), at(2, 9)},
		{"cut off through two master changes", chainOf(2, at(1, 4)), at(2, 5),
			chainOf(2, at(1, 4), 3, at(2, 1), 4, at(3, 4)), at(2, 1)},
		{"a tenure the master's history skipped", chainOf(2, at(1, 4), 3, at(2, 6)), at(3, 9),
			chainOf(2, at(1, 4), 4, at(2, 8)), at(2, 6)},
		{"already following the master", chainOf(2, at(1, 4), 3, at(2, 9)), at(3, 2), chainOf(2, at(1, 4), 3, at(2, 9)), at(3, 2)},
		{"the chain adopted, the copy not caught up", chainOf(4, at(3, 2), 5, at(4, 7)), at(4, 3),
			chainOf(4, at(3, 2), 5, at(4, 7), 6, at(5, 2)), at(4, 3)},
		{"no chain here", nil, at(2, 5), chainOf(3, at(2, 1), 4, at(3, 4)), at(2, 1)},
		{"no chain here, behind", nil, at(1, 7), chainOf(3, at(2, 1), 4, at(3, 4)), at(1, 7)},
		{"older entries only here", chainOf(2, at(0, 0)), at(2, 5), chainOf(3, at(2, 1), 4, at(3, 4)), at(2, 1)},
		{"no common epoch, a tenure of its own", chainOf(3, at(2, 1), 5, at(3, 2)), at(5, 4),
			chainOf(4, at(3, 6), 6, at(4, 9)), at(3, 2)},
		{"no chain from the master", chainOf(2, at(1, 4)), at(2, 5), nil, at(2, 5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := agreement(c.local, c.held, c.master); got != c.want {
				t.Fatalf("agreement(%v, %s, %v) = %s, want %s", c.local, c.held, c.master, got, c.want)
			}
		})
	}
}

func TestWithTenureKeepsTheNewestEntries(t *testing.T) {
	var c []EpochStart
	for e := uint64(1); e <= 12; e++ {
		c = withTenure(c, EpochStart{Epoch: e, Start: at(e-1, e)})
	}
	if len(c) != chainLength || c[0].Epoch != 12-chainLength+1 || c[len(c)-1].Epoch != 12 {
		t.Fatalf("chain %v, want the newest %d tenures", c, chainLength)
	}
	before := slices.Clone(c)
	// A tenure replaces entries not older than it (never in place).
	d := withTenure(c, EpochStart{Epoch: 11, Start: at(10, 99)})
	if !slices.Equal(c, before) || len(d) != chainLength-1 || d[len(d)-1] != (EpochStart{Epoch: 11, Start: at(10, 99)}) {
		t.Fatalf("chain %v (was %v), want the tenure at 11 to replace 11 and 12", d, c)
	}
	b := Batch{Epoch: 4, EpochStart: at(3, 4), Epochs: chainOf(4, at(3, 9), 5, at(4, 1), 3, at(2, 1), 3, at(2, 1))}
	if got := batchChain(&b); !slices.Equal(got, chainOf(3, at(2, 1), 4, at(3, 4))) {
		t.Fatalf("a batch's chain is taken as %v", got)
	}
}

// The epoch chain is part of the partition's record: a master appends its
// tenure before the tenure's first write is acknowledged, a replica adopts
// the chain of a batch it applies, and both survive a restart; a record
// from before chains names its own tenure.
func TestTheEpochChainIsRecordedAndAdopted(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t)
	holding := false
	w := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 5, holding }})
	chain4 := chainOf(3, at(0, 0), 4, at(3, 2))
	if r := w.Apply(ctx, Batch{Partition: 0, Epoch: 4, EpochStart: at(3, 2), Epochs: chain4, UpTo: at(4, 3),
		Docs: []*Doc{doc("a", 3, 1, 1, false), doc("b", 3, 2, 1, false), doc("c", 4, 3, 1, false)}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	chain := func(w *Writer) []EpochStart {
		p := w.parts[0]
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.chain
	}
	if got := chain(w); !slices.Equal(got, chain4) {
		t.Fatalf("the replica's chain %v, want the batch's %v", got, chain4)
	}
	// The master at epoch 5 ships its tenure, before and after its first write.
	holding = true
	want := chainOf(3, at(0, 0), 4, at(3, 2), 5, at(4, 3))
	if got := w.Epochs(0, 5); !slices.Equal(got, want) {
		t.Fatalf("epoch 5 ships %v before its first write, want %v", got, want)
	}
	if r := w.Do(ctx, Op{Partition: 0, User: "u", Coll: "c", ID: "d", Mutate: put(map[string]any{"n": int64(1)})}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := chain(w); !slices.Equal(got, want) {
		t.Fatalf("the master's chain %v, want %v", got, want)
	}
	w.Close(ctx)
	w2 := NewWriter(s, 1, WriterOptions{Lease: func(int) (uint64, bool) { return 0, false }})
	defer w2.Close(ctx)
	if err := w2.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := chain(w2); !slices.Equal(got, want) {
		t.Fatalf("after a restart the chain is %v, want %v", got, want)
	}
	// A record written before chains existed: its own tenure.
	s3 := openTestStore(t)
	w3 := NewWriter(s3, 1, WriterOptions{})
	w3.setRecord(appliedDoc{Partition: 0, Epoch: 2, Seq: 7, Seen: 2, TenureEpoch: 3, TenureFrom: 2, TenureSeq: 7})
	if err := w3.SyncApplied(ctx); err != nil {
		t.Fatal(err)
	}
	w3.Close(ctx)
	w4 := NewWriter(s3, 1, WriterOptions{})
	defer w4.Close(ctx)
	if err := w4.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := chain(w4); !slices.Equal(got, chainOf(3, at(2, 7))) {
		t.Fatalf("a record without a chain loads as %v, want its tenure 3 from 2.7", got)
	}
}

// A tenure whose start is past the new tenure's start is not in the
// history the new tenure continues, and leaves the chain: seed 7 of a
// netns fault run built [1@0.0, 2@1.115, 4@1.104] (node3 had taken epoch
// 2's entry from a batch while complete only up to 1.104), and by that
// chain the master's own documents of epoch 2 were both held and
// diverged: it restored them to a replica that rolled them back again,
// for ever.
func TestATenureDropsTenuresThatStartAfterIt(t *testing.T) {
	c := withTenure(chainOf(1, at(0, 0), 2, at(1, 115)), EpochStart{Epoch: 4, Start: at(1, 104)})
	if want := chainOf(1, at(0, 0), 4, at(1, 104)); !slices.Equal(c, want) {
		t.Fatalf("chain %v, want %v", c, want)
	}
	// A tenure that began where the new one begins took no change of this
	// history: it may stay (it judges nothing differently).
	c = withTenure(chainOf(1, at(0, 0), 2, at(1, 104)), EpochStart{Epoch: 4, Start: at(1, 104)})
	if want := chainOf(1, at(0, 0), 2, at(1, 104), 4, at(1, 104)); !slices.Equal(c, want) {
		t.Fatalf("chain %v, want %v", c, want)
	}
}

package applyrule

import (
	"slices"

	"github.com/shoal-db/shoal/record"
)

// A partition's epoch chain lists the starts of the recent tenures of its
// history, oldest first: every position after an entry's start, up to the
// next entry's start, was written at that entry's epoch. A master appends
// its tenure when the tenure begins (recorded before its first write is
// acknowledged); every batch carries its master's chain, and a replica
// that applies one adopts it, the chain of the history it now follows
// (Kafka keeps the same thing, its leader epoch cache).
//
// Why it is needed: a node cut off as master at epoch e holds writes at
// (e, y) that never left it. The next master's epoch e+1 started at
// (e, s) with s < y; if that master then starts a second tenure, e+2, at
// (e+1, x), the node's writes are older than the start of e+2 but still
// not in its history. Only the start of e+1, the tenure that followed e,
// tells them apart.

// ChainLength bounds a chain: the newest entries are kept. A held change
// older than every entry is judged by the oldest one (see Diverged), so a
// truncated chain still finds the changes after that entry's start.
const ChainLength = 8

// WithTenure returns a new chain: chain with the tenure t appended, any
// entry not older than t dropped, and any that starts after t does (its
// tenure is not in the history t continues: t's history never reached
// its start), at most ChainLength entries.
func WithTenure(chain []record.EpochStart, t record.EpochStart) []record.EpochStart {
	out := make([]record.EpochStart, 0, min(len(chain)+1, ChainLength))
	for _, e := range chain {
		if e.Epoch < t.Epoch && e.Start.Compare(t.Start) <= 0 {
			out = append(out, e)
		}
	}
	out = append(out, t)
	if n := len(out) - ChainLength; n > 0 {
		out = out[n:]
	}
	return slices.Clip(out)
}

// BatchChain is the chain a batch's master follows, as this node trusts
// it: sorted by epoch, nothing at or after the batch's epoch but the
// batch's own tenure, which starts at the batch's EpochStart. A batch without a chain
// (a master that sends none) is judged by its own tenure alone.
func BatchChain(b *record.Batch) []record.EpochStart {
	c := slices.Clone(b.Epochs)
	slices.SortStableFunc(c, func(x, y record.EpochStart) int {
		switch {
		case x.Epoch < y.Epoch:
			return -1
		case x.Epoch > y.Epoch:
			return 1
		}
		return 0
	})
	c = slices.CompactFunc(c, func(x, y record.EpochStart) bool { return x.Epoch == y.Epoch })
	return WithTenure(c, record.EpochStart{Epoch: b.Epoch, Start: b.EpochStart})
}

// Diverged is the divergence rule: a held change at pos is not in the
// history chain describes iff a tenure followed pos's epoch (the first
// entry with a newer epoch) and pos is after that tenure's start: the
// history left pos's epoch at that start, so nothing of that epoch after
// it belongs to it. boundary is that start: the history agrees with a
// holder of pos at most up to it.
//
// Safety: positions of one epoch were all assigned by one master, in
// order, so a history that holds a position of epoch e holds every
// position of e before it, and once a later tenure began (at its start)
// the history took no more of e. With only the master's current tenure
// (epoch E, start S) this is the rule "a change of an older epoch than E
// after S". A change older than every entry of a truncated chain is judged
// by the oldest entry: if it is after that start it cannot be in the
// history (everything after the start is of that epoch or newer).
func Diverged(chain []record.EpochStart, pos record.Position) (boundary record.Position, ok bool) {
	for _, e := range chain {
		if e.Epoch > pos.Epoch {
			return e.Start, pos.Compare(e.Start) > 0
		}
	}
	return record.Position{}, false
}

// Agreement is how far this node's history of a partition and its
// master's are sure to be the same: local is this node's chain and held
// the position its copy is complete up to, master the master's chain.
// Every held change up to it is in the master's history, so the search
// for divergent changes (by Diverged) starts there; it never passes held.
//
// The newest epoch both chains name is a tenure both histories took: they
// are the same up to its start and through its changes, up to where the
// first of them left it (the next entry's start, or held). When the
// chains name no common epoch (one is truncated, or was recorded before
// chains existed), the master's history is taken to be the same as this
// node's up to the start of the master's oldest entry, no further than
// the start of a tenure this node took that the master's history skipped.
func Agreement(local []record.EpochStart, held record.Position, master []record.EpochStart) record.Position {
	end := func(chain []record.EpochStart, i int) record.Position {
		if i+1 < len(chain) {
			return chain[i+1].Start
		}
		return held
	}
	for i := len(local) - 1; i >= 0; i-- {
		j := slices.IndexFunc(master, func(e record.EpochStart) bool { return e.Epoch == local[i].Epoch })
		if j < 0 {
			continue
		}
		at := MinPosition(held, end(local, i))
		if j+1 < len(master) {
			at = MinPosition(at, master[j+1].Start)
		}
		return at
	}
	if len(master) == 0 {
		return held
	}
	at := MinPosition(held, master[0].Start)
	for _, e := range local {
		if e.Epoch >= master[0].Epoch {
			at = MinPosition(at, e.Start)
			break
		}
	}
	return at
}

// MaxPosition is the later of a and b.
func MaxPosition(a, b record.Position) record.Position {
	if a.Compare(b) >= 0 {
		return a
	}
	return b
}

// MinPosition is the earlier of a and b.
func MinPosition(a, b record.Position) record.Position {
	if a.Compare(b) <= 0 {
		return a
	}
	return b
}

package store

import (
	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applyrule"
)

// A partition's epoch chain lists the starts of the recent tenures of its
// history, oldest first (see replicate/applyrule/chain.go, where the rules
// over chains live: a replica's apply decisions use them, and the writer
// appends its own tenures with them).

// EpochStart is one tenure in a partition's history (record.EpochStart).
type EpochStart = record.EpochStart

// chainLength bounds a chain (applyrule.ChainLength).
const chainLength = applyrule.ChainLength

func withTenure(chain []EpochStart, t EpochStart) []EpochStart { return applyrule.WithTenure(chain, t) }
func batchChain(b *Batch) []EpochStart                         { return applyrule.BatchChain(b) }
func diverged(chain []EpochStart, pos Position) (Position, bool) {
	return applyrule.Diverged(chain, pos)
}
func agreement(local []EpochStart, held Position, master []EpochStart) Position {
	return applyrule.Agreement(local, held, master)
}
func minPosition(a, b Position) Position { return applyrule.MinPosition(a, b) }

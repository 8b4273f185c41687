package node

import (
	"context"

	"github.com/shoal-db/shoal/placement"
)

// ReplaceUnderPause runs one paused swap of partition p to newcomers, as
// chooseReplicasLoop does, with wake standing for the loop's wake-up
// channel, and says whether the loop would wait swapBackoff before it
// tried the swap again.
func (n *Node) ReplaceUnderPause(ctx context.Context, p int, newcomers []string, wake <-chan struct{}) (backoff bool) {
	return n.replaceUnderPause(ctx, placement.PausedSwap{Partition: p, Newcomers: newcomers}, wake)
}

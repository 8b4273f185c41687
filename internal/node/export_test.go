package node

import (
	"context"

	"github.com/shoal-db/shoal/placement"
)

// ReplaceUnderPause runs one paused swap of partition p to newcomers, as
// chooseReplicasLoop does, with wake standing for the loop's wake-up
// channel, and says how it ended.
func (n *Node) ReplaceUnderPause(ctx context.Context, p int, newcomers []string, wake <-chan struct{}) string {
	return n.replaceUnderPause(ctx, placement.PausedSwap{Partition: p, Newcomers: newcomers}, wake).String()
}

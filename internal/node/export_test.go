package node

import (
	"context"
	"slices"

	"github.com/shoal-db/shoal/placement"
)

// ReplaceUnderPause runs one paused swap of partition p to newcomers, as
// chooseReplicasLoop does, with wake standing for the loop's wake-up
// channel, and says whether the loop would wait swapBackoff before it
// tried the swap again.
func (n *Node) ReplaceUnderPause(ctx context.Context, p int, newcomers []string, wake <-chan struct{}) (backoff bool) {
	return n.replaceUnderPause(ctx, placement.PausedSwap{Partition: p, Newcomers: newcomers}, wake)
}

// DecideSwap runs the master's decision on a swap of partition p's
// replaced copies for newcomers at epoch, as a round of replica choice
// does, and returns whether the swap is made and which of replaced count
// towards majority from then until the round ends.
func (n *Node) DecideSwap(p int, epoch uint64, newcomers, replaced []string) (made bool, counting []string) {
	made = n.replacement(p, epoch, newcomers, replaced) == placement.ReplaceNow
	var deciding []string
	if d, ok := n.deciding.Load(p); ok {
		deciding = d.([]string)
	}
	for _, r := range replaced {
		if !slices.Contains(deciding, r) {
			counting = append(counting, r)
		}
	}
	return made, counting
}

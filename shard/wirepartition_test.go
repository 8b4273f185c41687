package shard_test

import (
	"fmt"
	"testing"

	"github.com/shoal-db/shoal/api/wire"
	"github.com/shoal-db/shoal/shard"
)

// The client's rule for a user's partition (wire.PartitionOf) is the
// node's: a client that worked out another partition would keep a user's
// placement under the wrong one (it checks each answer, and falls back to
// keeping placements per user when one disagrees, but that costs a lookup
// per user).
func TestTheClientsPartitionOfAUserIsTheNodes(t *testing.T) {
	for _, count := range []int{1, 8, 16, shard.DefaultPartitionCount, 1024} {
		for i := range 20000 {
			user := fmt.Sprintf("user-%d", i)
			if got, want := wire.PartitionOf(user, count), shard.PartitionOf(user, count); got != want {
				t.Fatalf("%s of %d partitions: the client says %d, the node %d", user, count, got, want)
			}
		}
	}
	for _, user := range []string{"", "ü", "a/b", "registers"} {
		if got, want := wire.PartitionOf(user, 271), shard.PartitionOf(user, 271); got != want {
			t.Fatalf("%q: the client says %d, the node %d", user, got, want)
		}
	}
}

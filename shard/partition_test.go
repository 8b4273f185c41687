package shard

import (
	"fmt"
	"testing"
)

func TestPartitionOfIsStable(t *testing.T) {
	// These values are part of the on-disk format: if this test fails, every
	// existing cluster would find its users in the wrong partitions.
	cases := []struct {
		user string
		hash uint64
		want int
	}{
		{"alice", 0x508b2abb65a03907, 240},
		{"bob", 0x4d4419134a0a54, 38},
		{"user-1", 0xf84ba2aa754a4bd4, 211},
	}
	for _, c := range cases {
		if got := Hash([]byte(c.user)); got != c.hash {
			t.Errorf("Hash(%q) = %#x, want %#x", c.user, got, c.hash)
		}
		if got := PartitionOf(c.user, DefaultPartitionCount); got != c.want {
			t.Errorf("PartitionOf(%q) = %d, want %d", c.user, got, c.want)
		}
	}
}

func TestPartitionOfSpreadsUsers(t *testing.T) {
	const users = 27100
	counts := make([]int, DefaultPartitionCount)
	for i := 0; i < users; i++ {
		p := PartitionOf(fmt.Sprintf("user-%d", i), DefaultPartitionCount)
		if p < 0 || p >= DefaultPartitionCount {
			t.Fatalf("partition %d out of range", p)
		}
		counts[p]++
	}
	mean := users / DefaultPartitionCount
	for p, n := range counts {
		if n < mean/2 || n > mean*2 {
			t.Errorf("partition %d holds %d users, mean %d: the hash spreads badly", p, n, mean)
		}
	}
}

// Package shard is Shoal's placement logic: which partition a user belongs
// to and, as the cluster grows, which nodes are responsible for it. It does
// no I/O, so every decision can be tested deterministically.
package shard

import "hash/fnv"

// DefaultPartitionCount is the number of partitions a new cluster uses.
// A prime spreads users evenly whatever the hash's low bits do.
const DefaultPartitionCount = 271

// Hash is the 64-bit hash every node uses for placement (FNV-1a). It must
// never change for the life of a cluster: a different hash moves every user.
func Hash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	return h.Sum64()
}

// PartitionOf returns the partition (0..count-1) that holds user's documents.
func PartitionOf(user string, count int) int {
	if count <= 0 {
		panic("shard: partition count must be positive")
	}
	return int(Hash([]byte(user)) % uint64(count))
}

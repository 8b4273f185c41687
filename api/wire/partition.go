package wire

import "hash/fnv"

// PartitionOf is the partition (0..count-1) that holds user's documents in
// a cluster of count partitions (a placement answer's partition_count):
// the FNV-1a 64-bit hash of the user's name, modulo count. It is the
// node's own rule (shard.PartitionOf, which a test holds it to), given
// here so that a client can work out a user's partition without building
// the node's placement code. count must be positive.
func PartitionOf(user string, count int) int {
	h := fnv.New64a()
	h.Write([]byte(user))
	return int(h.Sum64() % uint64(count))
}

package wire

// PartitionOf is the partition (0..count-1) that holds user's documents in
// a cluster of count partitions (a placement answer's partition_count):
// the FNV-1a 64-bit hash of the user's name, modulo count. It is the
// node's own rule (shard.PartitionOf, which a test holds it to), given
// here so that a client can work out a user's partition without building
// the node's placement code; written out over the string, it costs the
// client no allocation on each call it routes. count must be positive.
func PartitionOf(user string, count int) int {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(user); i++ {
		h ^= uint64(user[i])
		h *= prime
	}
	return int(h % uint64(count))
}

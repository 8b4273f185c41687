// Package replicate copies each partition's history from its master to its
// replicas. The documents are the log: every stored document carries the
// position of its last change, so a replica that is behind (restarted,
// newly chosen, or whose queue overflowed) is caught up by streaming the
// partition's documents after the position it acknowledged, in position
// order. The in-memory queues of live changes are only a cache of that log.
// A replica behind the master's tombstone horizon (deletes it has not seen
// whose tombstones were purged) gets a full copy of the partition instead,
// in key order.
//
// The files, by concern:
//   - wire.go: what travels between master and replica (Request, WireBatch,
//     Response, Result) and its decoding from JSON (/internal/v1/replicate,
//     which nodes of older versions send and read).
//   - binwire.go: the same in the binary form nodes of this version send
//     (/internal/v3/replicate; older masters send version 2 on v2).
//   - apply.go: the replica's side, Apply, over the store's partition writer.
//   - shipper.go: the master's side as its callers see it (Config, Shipper):
//     committed runs in, acknowledgements and majority-held positions out.
//   - view.go: what the shipper reads through Config's interfaces, always
//     with its lock free, to decide from under the lock, and why that is
//     as safe as reading under it.
//   - progress.go: what the master knows of one replica's copy of one
//     partition: its stage (probe, stream, catch-up, copying) and every
//     transition between them, tested without I/O.
//   - sender.go: one sender goroutine per replica node, batching live runs
//     of every partition it replicates there.
//   - catchup.go: bringing a replica that is behind up to date from the
//     store, and restoring documents after a rollback.
//   - fullcopy.go: a full copy, in key order, for a replica behind the
//     tombstone horizon.
//   - budget.go: the size bounds of one request; validate.go: checks of a
//     batch a replica receives.
package replicate

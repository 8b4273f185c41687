package replicate

import (
	"slices"

	"github.com/shoal-db/shoal/record"
)

// The shipper calls Mastership, Source, Transport and Observer, and
// WaitReplicated's replicas, only with its lock free: they reach into
// the node (lease manager, partition table, partition writer), which
// takes its own locks, and a lock of the shipper's held around them
// would set an order between those locks and the shipper's that nothing
// else keeps. What a decision needs of them is read first, into a
// snapshot; the decision is then taken under the lock from the
// snapshot.
//
// A snapshot can be older than the lock by the time it is used. That is
// no loss: the node changes mastership, replicas and history without the
// shipper's lock, so a value read under the lock could change right
// after the call returned too, and a decision taken from it was already
// one taken from a value of a moment before. Two things were exact,
// though, and stay so:
//
//   - Every acknowledgement counted towards a majority or a wait came in
//     before the replicas were read, so a replica counted was listed
//     after its acknowledgement came in. The acknowledgements and the
//     positions kept are numbered (Shipper.seq), the snapshot notes the
//     number before it reads, and a count leaves out what came in after
//     it (fresh false: a waiter reads again rather than wait for what it
//     left out). An acknowledgement taken in after a replica was dropped
//     from the list can then never be counted for it from a list read
//     before the drop.
//   - The majority-committed position kept for a tenure never moves
//     back: a snapshot of an earlier tenure than a position kept since
//     it was read counts nothing and keeps nothing (see majorityLocked).

// view is what the shipper read of one partition through Mastership and
// Source.
type view struct {
	epoch  uint64
	master bool // epoch is this node's, and it may write
	// While master: the replicas (Mastership.Replicas), those of them
	// whose acknowledgements count (Mastership.Counted) and the newest
	// committed position (Source.Last).
	replicas []string
	counted  []string
	last     record.Position
}

// tenure is an epoch's start and chain on this node, as a batch of it
// carries them (Source.EpochStart and Epochs).
type tenure struct {
	start  record.Position
	epochs []record.EpochStart
}

// tenureOf names a partition's epoch.
type tenureOf struct {
	partition int
	epoch     uint64
}

// snapshot is what one decision read through Config's interfaces.
type snapshot struct {
	// seq is Shipper.seq before anything was read: what is numbered
	// after it came in after the reads began.
	seq     uint64
	parts   map[int]view
	tenures map[tenureOf]tenure
	// copies is Mastership.Copies, read (hasCopies) when asked for and
	// a partition read is mastered.
	copies    int
	hasCopies bool
}

// reads names what a decision needs read.
type reads struct {
	parts   []int
	tenures []tenureOf
	copies  bool // it counts a majority
}

func (r reads) empty() bool { return len(r.parts) == 0 && len(r.tenures) == 0 && !r.copies }

// read reads what r names; call it with s.mu free.
func (s *Shipper) read(r reads) *snapshot {
	snap := &snapshot{seq: s.seq.Load(), parts: map[int]view{}, tenures: map[tenureOf]tenure{}}
	s.readMore(snap, r)
	return snap
}

// readMore adds what r names to snap, where it lacks it; call it with
// s.mu free.
func (s *Shipper) readMore(snap *snapshot, r reads) {
	for _, p := range r.parts {
		if _, ok := snap.parts[p]; ok {
			continue
		}
		var v view
		v.epoch, v.master = s.cfg.Mastership.Epoch(p)
		if v.master {
			v.replicas = s.cfg.Mastership.Replicas(p)
			v.counted = s.cfg.Mastership.Counted(p, v.epoch, v.replicas)
			v.last = s.cfg.Source.Last(p)
		}
		snap.parts[p] = v
	}
	for _, k := range r.tenures {
		if _, ok := snap.tenures[k]; !ok {
			snap.tenures[k] = tenure{start: s.cfg.Source.EpochStart(k.partition, k.epoch), epochs: s.cfg.Source.Epochs(k.partition, k.epoch)}
		}
	}
	if r.copies && snap.lacksCopies() {
		snap.copies, snap.hasCopies = s.cfg.Mastership.Copies(), true
	}
}

// lacksCopies says whether a partition read is mastered (a count needs
// the copies) and the copies were not read.
func (snap *snapshot) lacksCopies() bool {
	if snap.hasCopies {
		return false
	}
	for _, v := range snap.parts {
		if v.master {
			return true
		}
	}
	return false
}

// replicates says whether replica is listed for a partition of parts
// this node masters, as snap read it.
func (snap *snapshot) replicates(replica string, parts []int) bool {
	for _, p := range parts {
		if v := snap.parts[p]; v.master && slices.Contains(v.replicas, replica) {
			return true
		}
	}
	return false
}

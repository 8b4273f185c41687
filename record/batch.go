package record

// Batch is a run of a partition's history shipped from its master: the
// latest state of every document changed in (From, UpTo], in position order.
type Batch struct {
	Partition int
	Epoch     uint64 // the master's epoch
	// EpochStart is the position the master's epoch started from: anything
	// a replica holds after it from an older epoch, the master never had.
	EpochStart Position
	// Epochs is the master's epoch chain (see store/chain.go), its own tenure
	// last: what a replica holds of an older epoch after the start of the
	// tenure that followed that epoch, the master never had either.
	Epochs []EpochStart
	From   Position
	UpTo   Position
	Docs   []*Doc
	// Restore replaces the replica's states of Docs and removes Absent
	// (keys the master has no record of), whatever their positions: the
	// repair after a rollback.
	Restore bool
	Absent  []string
	// Full makes the batch one chunk of a full copy, for a replica behind
	// the master's tombstone horizon: Docs are every document and tombstone
	// the master holds with a key in (KeyFrom, KeyTo] ("" = from the start,
	// to the end); the replica removes what it holds in that range and
	// Docs lack, and adopts Horizon, the master's horizon. From is zero,
	// and UpTo moves only with the final chunk.
	Full    bool
	KeyFrom string
	KeyTo   string
	Horizon Position
	// Committed is the master's majority-committed position of the
	// partition when it sent the batch: a majority of the partition's
	// copies held its history up to there (see store.Writer.Committed).
	Committed Position
}

// EpochStart is one tenure in a partition's history: its epoch, and the
// position the history was complete up to when it began.
type EpochStart struct {
	Epoch uint64   `bson:"e" json:"e"`
	Start Position `bson:"s" json:"s"`
}

package engine

import (
	"context"
	"time"

	"github.com/shoal-db/shoal/record"
)

// PartitionRecord is a node's durable record of a partition: how much of its
// history it holds as a replica, and its tombstone horizon. It is written
// whole, so every field is kept in the partition's in-memory state too.
type PartitionRecord struct {
	Partition int    `bson:"_id"`
	Epoch     uint64 `bson:"e"`
	Seq       uint64 `bson:"s"`
	// Seen is the newest epoch seen in a batch: older ones stay refused
	// after a restart.
	Seen uint64 `bson:"seen"`
	// The horizon: the highest position of any tombstone purged here.
	HorizonEpoch uint64 `bson:"he"`
	HorizonSeq   uint64 `bson:"hs"`
	// Recopy: this node's copy must be replaced by a full copy before it
	// counts as holding anything (see startRecopy).
	Recopy bool `bson:"rc,omitempty"`
	// Restoring: the epoch of a master this node answered "diverged": it
	// holds changes that master never had, kept in the rollback
	// collection, and until that master has restored every one of them
	// each of its batches is checked for them again (see rollBack). Also
	// set when the check of a master's first batch failed.
	Restoring uint64 `bson:"rs,omitempty"`
	// The tenure: the epoch this node last mastered the partition at, and
	// the position its history was complete up to when that tenure began.
	// It is recorded before the tenure's first write is acknowledged, so
	// that after a restart the node still counts its own writes as held
	// (see partition.held).
	TenureEpoch uint64 `bson:"te,omitempty"`
	TenureFrom  uint64 `bson:"tfe,omitempty"`
	TenureSeq   uint64 `bson:"tfs,omitempty"`
	// Chain: the epoch chain of the history this node's copy follows (see
	// chain.go): its own tenure, appended when the tenure began, or the
	// chain of the last batch it applied.
	Chain []record.EpochStart `bson:"ch,omitempty"`
	// Carrying: the tenure's carry (see Writer.carryOver) is not finished:
	// this node's copy is complete only up to the tenure's start.
	Carrying bool `bson:"ca,omitempty"`
}

// TenureList is the replica list this node last gave a partition it
// mastered (regular copies first) and the epoch of that tenure.
type TenureList struct {
	Epoch    uint64
	Replicas []string
	// Seq numbers the lists recorded for one tenure (from 1): the lease
	// voters keep the newest (record.CopyList).
	Seq uint64
	// Counted is record.CopyList.Counted (0: recorded before it was kept).
	Counted int
}

// RolledBack is a document state this node held that the partition's new
// master never had: a write acknowledged with write concern 1 by this node
// as master, not yet replicated when it lost the lease. It is kept and
// listed, never silently dropped.
type RolledBack struct {
	Partition  int             `bson:"p" json:"partition"`
	User       string          `bson:"u" json:"user"`
	Coll       string          `bson:"c" json:"collection"`
	ID         string          `bson:"d" json:"id"`
	Version    int64           `bson:"v" json:"version"`
	Position   record.Position `bson:"pos" json:"position"`
	Deleted    bool            `bson:"x" json:"deleted"`
	Body       map[string]any  `bson:"b,omitempty" json:"body,omitempty"`
	NewEpoch   uint64          `bson:"ne" json:"new_epoch"`
	EpochStart record.Position `bson:"es" json:"new_epoch_start"`
	At         time.Time       `bson:"at" json:"rolled_back_at"`
}

// Meta is what a store records at its first start: the partition count
// every document's place depends on, the node that created it, and when.
type Meta struct {
	PartitionCount int       `bson:"partition_count"`
	NodeID         string    `bson:"node_id"`
	Created        time.Time `bson:"created"`
}

// Records is the storage of what a node keeps beside the documents: each
// partition's record, its lease votes as a voter and the voter set it
// applies, the replica lists of its tenures, the store's meta, and the
// document states rolled back. Every save is durable before it returns.
type Records interface {
	// LoadRecords reads every partition's record.
	LoadRecords(ctx context.Context) (map[int]PartitionRecord, error)
	// SaveRecords records changed; all lists every record, for an engine
	// that rewrites them all now and then. The caller serialises calls.
	SaveRecords(ctx context.Context, changed []PartitionRecord, all func() []PartitionRecord) error
	// LeaseVotes reads every vote recorded; SaveLeaseVotes replaces them
	// (every partition's). The caller serialises saves.
	LeaseVotes(ctx context.Context) (map[int]record.LeaseVote, error)
	SaveLeaseVotes(ctx context.Context, votes map[int]record.LeaseVote) error
	// VoterSet reads the voter set recorded last (nil if none) and when
	// it changed; SaveVoterSet replaces it.
	VoterSet(ctx context.Context) ([]string, time.Time, error)
	SaveVoterSet(ctx context.Context, voters []string, changed time.Time) error
	// TenureLists reads the replica lists recorded; SaveTenureLists
	// replaces them (every partition's).
	TenureLists(ctx context.Context) (map[int]TenureList, error)
	SaveTenureLists(ctx context.Context, lists map[int]TenureList) error
	// Meta reads the meta (ok false: none recorded yet). CreateMeta
	// records m if no meta is recorded, and says whether it did.
	Meta(ctx context.Context) (m Meta, ok bool, err error)
	CreateMeta(ctx context.Context, m Meta) (created bool, err error)
	// SaveRollback keeps rolled back states; one kept already (the same
	// key and position) is kept once. Rollbacks lists them oldest first,
	// at most limit.
	SaveRollback(ctx context.Context, states []RolledBack) error
	Rollbacks(ctx context.Context, limit int) ([]RolledBack, error)
}

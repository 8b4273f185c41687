package store

import (
	"fmt"

	"github.com/shoal-db/shoal/record"
)

// Position is where a change sits in its partition's history. It lives in
// the leaf package record, so that decision code (lease) uses it without
// building the store; this alias keeps store.Position for every caller.
type Position = record.Position

// Doc is one stored document version, or the tombstone of a deleted one
// (record.Doc: the leaf package holds it, as it does Position).
type Doc = record.Doc

// The tenure marker and document keys are record's (record.TenureUser,
// record.DocKey); the store names them too.
const (
	TenureUser = record.TenureUser
	TenureColl = record.TenureColl
	TenureID   = record.TenureID
)

// IsTenureMarker reports whether user, coll and id name a tenure marker.
func IsTenureMarker(user, coll, id string) bool { return record.IsTenureMarker(user, coll, id) }

// DocKey builds the store _id of a document (record.DocKey).
func DocKey(user, coll, id string) string { return record.DocKey(user, coll, id) }

// CollectionName is the store collection holding one partition's documents.
func CollectionName(partition int) string { return fmt.Sprintf("p%04d", partition) }

// ErrNotFound means the store holds no record of the key (record.ErrNotFound).
var ErrNotFound = record.ErrNotFound

// ScanEach reads documents in batches of about scanBatchBytes, so that
// neither the store nor this side holds more than a few of them at once
// however large they are, and small documents still come many at a time.
// The first batch is of scanFirstBatch documents; the next ones are sized
// by the average document read so far.
const (
	scanBatchBytes = 4 << 20
	scanFirstBatch = 8
)

// batchFor is how many documents averaging avg bytes make a batch of about
// target bytes, from 4 to 1024.
func batchFor(avg, target int64) int32 {
	return int32(min(max(target/max(avg, 1), 4), 1024))
}

package record

import (
	"errors"
	"time"
)

// Doc is one stored document version, or the tombstone of a deleted one.
type Doc struct {
	Key     string // _id in the store: user/collection/id
	User    string
	Coll    string
	ID      string
	Version int64
	Pos     Position
	Deleted bool
	Updated time.Time
	Body    map[string]any // nil for tombstones; never mutated once stored
	Size    int            // approximate bytes, for the cache budget
	// New says the master that wrote this state held no state of the key
	// before it in its history (not even a tombstone): a replica whose
	// copy is a prefix of that history ending before Pos, and holds no
	// tombstone, has nothing of the key to replace (store.Writer.applyRun).
	// Set by the partition's writer for each write; a state read back
	// from a store has it false.
	New bool
}

// ErrNotFound means the store holds no record of the key.
var ErrNotFound = errors.New("not found")

// The tenure marker is the document a new master writes in a partition
// before a majority or linearizable read when it has written nothing in
// its tenure yet (see the api's markTenure): raft's no-op entry at the
// start of a term. Its user is one no client can name (user names start
// with a letter or digit), and every partition has one.
const (
	TenureUser = "_shoal"
	TenureColl = "tenure"
	TenureID   = "marker"
)

// IsTenureMarker reports whether user, coll and id name a tenure marker.
func IsTenureMarker(user, coll, id string) bool {
	return user == TenureUser && coll == TenureColl && id == TenureID
}

// DocKey builds the store _id of a document. The three parts cannot contain
// '/', so the key is unambiguous.
func DocKey(user, coll, id string) string { return user + "/" + coll + "/" + id }

package record

import "time"

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
}

package replicate

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/shoal-db/shoal/record"
)

// A request is bounded by bytes as well as by documents, so that it stays
// well under the replica's body cap (cluster.MaxInternalBody). The bytes
// are upper bounds of what encoding/json writes, not a document's Size: a
// stored document's Size is its BSON length and a live one's what the
// client sent, and JSON escapes "<", ">", "&" and control characters to
// six bytes each and writes a number in up to 26.

const (
	// DefaultMaxBatchBytes is the default byte bound of one request: an
	// eighth of the replica's body cap.
	DefaultMaxBatchBytes = 8 << 20
	// DefaultMaxBatchDocs is the default document bound of one request.
	DefaultMaxBatchDocs = 500
	// firstScan is how many documents the first scan of a catch-up or full
	// copy asks for, before the sizes of the partition's documents are
	// known; each scan after it asks for what the bytes of the previous
	// one say fits, at most twice as many.
	firstScan = 16
	// wireDocBase bounds a WireDoc's encoding besides its user,
	// collection, id and body: field names, version, position, deleted
	// flag, update time, and the comma before it.
	wireDocBase = 192
	// wireBatchBase bounds a WireBatch's encoding besides its documents,
	// key range and absent keys (and the request's envelope, counted in
	// every batch): 512 bytes with its committed position, and 788 for an
	// epoch chain of 8 entries.
	wireBatchBase = 1184
)

// docWireSize bounds the encoded size of a document as a WireDoc.
func docWireSize(d *record.Doc) int {
	n := wireDocBase + quotedSize(d.User) + quotedSize(d.Coll) + quotedSize(d.ID)
	if d.Body != nil {
		n += jsonSize(d.Body)
	}
	return n
}

// wireSizes bounds the encoded size of each document.
func wireSizes(docs []*record.Doc) []int {
	sizes := make([]int, len(docs))
	for i, d := range docs {
		sizes[i] = docWireSize(d)
	}
	return sizes
}

// jsonSize bounds the length of encoding/json's encoding of a document
// body's value.
func jsonSize(v any) int {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		return 5
	case string:
		return quotedSize(x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return 20 // -9223372036854775808, 18446744073709551615
	case float32, float64:
		return 26 // -0.0000012345678901234567, -1.2345678901234567e-308
	case json.Number:
		return len(x)
	case time.Time:
		return 37
	case map[string]any:
		n := 2
		for k, e := range x {
			n += quotedSize(k) + 1 + jsonSize(e) + 1
		}
		return n
	case []any:
		n := 2
		for _, e := range x {
			n += jsonSize(e) + 1
		}
		return n
	}
	// Bodies hold only the types above; anything else is measured.
	b, _ := json.Marshal(v)
	return len(b)
}

// quotedSize bounds the length of a string encoded as JSON: six bytes for
// anything encoding/json escapes (quotes, backslashes, control
// characters, "<", ">", "&", U+2028, U+2029, invalid UTF-8 as \ufffd).
func quotedSize(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				n += 6
			} else {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// room is what is left of one request's bounds. A request takes documents
// while they fit, and always at least one: a document larger than the
// byte bound goes alone rather than never.
type room struct {
	docs, bytes int
	empty       bool // nothing taken yet
}

func newRoom(docs, bytes int) room { return room{docs: docs, bytes: bytes, empty: true} }

// take says how many of the documents of the given encoded sizes, in
// order, fit after header bytes (a new batch's, or 0), and takes them.
func (r *room) take(header int, sizes []int) int {
	n, used := 0, header
	for n < len(sizes) && n < r.docs && used+sizes[n] <= r.bytes {
		used += sizes[n]
		n++
	}
	if n == 0 && r.empty && len(sizes) > 0 {
		n, used = 1, header+sizes[0]
	}
	if n > 0 {
		r.docs, r.bytes, r.empty = r.docs-n, r.bytes-used, false
	}
	return n
}

// takeHeader takes the bytes of a batch without documents (a notice of
// the committed position), if they fit; the first thing taken always
// fits.
func (r *room) takeHeader(header int) bool {
	if !r.empty && header > r.bytes {
		return false
	}
	r.bytes, r.empty = r.bytes-header, false
	return true
}

// full says whether no further document can be taken.
func (r *room) full() bool { return !r.empty && (r.docs <= 0 || r.bytes < wireBatchBase+wireDocBase) }

// nextScanLimit is how many documents the scan after one that asked for
// limit and read documents of the given sizes asks for: as many as their
// average size says fit in maxBytes, at most twice limit and maxDocs, at
// least one. A chunk is still cut to what fits; this keeps the store from
// reading (and the driver from refusing) far more than a chunk can carry.
func nextScanLimit(limit int, sizes []int, maxDocs, maxBytes int) int {
	if len(sizes) == 0 {
		return limit
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	avg := max(1, (total+len(sizes)-1)/len(sizes))
	return max(1, min(maxBytes/avg, 2*limit, maxDocs))
}

// scanSizes bounds what each scanned document costs the store's answer and
// the request: the larger of its stored size and its encoded size.
func scanSizes(docs []*record.Doc) []int {
	sizes := wireSizes(docs)
	for i, d := range docs {
		sizes[i] = max(sizes[i], d.Size)
	}
	return sizes
}

package query

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// A cursor is the base64url encoding (without padding) of
//
//	version (1 byte) | binding (16 bytes) | uvarint n | n values | MAC (16 bytes)
//
// where the values are the sort values of the last document of a page, one
// per key of the sort (the last being _id, unless _id was named earlier),
// binding is a hash of the sort and the filter text, and MAC is
// HMAC-SHA256 over a context string and everything before it, truncated to
// 16 bytes. Values use an exact binary encoding (see appendValue), so a
// decoded position compares exactly like the document it was taken from.
const (
	cursorVersion  = 1
	bindingSize    = 16
	macSize        = 16
	maxCursorDepth = 1 << 14 // nesting limit when decoding values
)

// Value tags of the cursor encoding.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt    // zig-zag varint
	tagFloat  // 8 bytes, IEEE 754 bits, big-endian
	tagString // uvarint length, bytes
	tagArray  // uvarint count, values
	tagObject // uvarint count, (string, value) pairs in ascending key order
	tagOther  // a value outside the value model
)

// Errors returned for unusable cursors.
var (
	errBadCursor     = &Error{Message: `invalid cursor: the "after" value is malformed or has been modified; use the "next" value of the previous page exactly as returned, or start again without "after"`}
	errForeignCursor = &Error{Message: `invalid cursor: the "after" value was issued for a different filter or sort; repeat the filter and sort of the request that returned it, or start again without "after"`}
	errOldCursor     = &Error{Message: `invalid cursor: the "after" value was issued by an incompatible server version; start again without "after"`}
	errCursorDepth   = errors.New("query: sort value nested too deeply to encode in a cursor")
)

// cursorBinding hashes the sort and the filter text a cursor is valid for.
func cursorBinding(s Sort, filterText string) [bindingSize]byte {
	spec := s.spec()
	h := sha256.New()
	io.WriteString(h, "shoal/query cursor binding v1\x00")
	h.Write(binary.AppendUvarint(nil, uint64(len(spec))))
	io.WriteString(h, spec)
	io.WriteString(h, filterText)
	var b [bindingSize]byte
	copy(b[:], h.Sum(nil))
	return b
}

// cursorMAC authenticates a cursor payload.
func cursorMAC(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, "shoal/query cursor v1\x00")
	m.Write(payload)
	return m.Sum(nil)[:macSize]
}

// encodeCursor returns the cursor for a position given by its sort values.
func encodeCursor(key []byte, binding [bindingSize]byte, vals []any) (string, error) {
	b := append([]byte{cursorVersion}, binding[:]...)
	b = binary.AppendUvarint(b, uint64(len(vals)))
	for _, v := range vals {
		var err error
		if b, err = appendValue(b, v, 0); err != nil {
			return "", err
		}
	}
	b = append(b, cursorMAC(key, b)...)
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeCursor checks a cursor and returns the sort values it holds, of
// which there must be n. Every error is an *Error.
func decodeCursor(s string, key []byte, binding [bindingSize]byte, n int) ([]any, error) {
	// Refuse anything but the base64url alphabet: the decoder would skip
	// newlines, so different strings could decode to the same bytes.
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, errBadCursor
		}
	}
	// Strict decoding refuses non-zero padding bits, so every change to a
	// character changes the decoded bytes.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(raw) < 1+bindingSize+1+macSize {
		return nil, errBadCursor
	}
	payload, mac := raw[:len(raw)-macSize], raw[len(raw)-macSize:]
	if !hmac.Equal(mac, cursorMAC(key, payload)) {
		return nil, errBadCursor
	}
	if payload[0] != cursorVersion {
		return nil, errOldCursor
	}
	if !bytes.Equal(payload[1:1+bindingSize], binding[:]) {
		return nil, errForeignCursor
	}
	vals, err := decodeValues(payload[1+bindingSize:])
	if err != nil {
		return nil, errBadCursor
	}
	if len(vals) != n {
		return nil, errForeignCursor
	}
	return vals, nil
}

// appendValue appends the encoding of v to b.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxCursorDepth {
		return nil, errCursorDepth
	}
	switch t := v.(type) {
	case nil:
		return append(b, tagNull), nil
	case bool:
		if t {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case string:
		return appendString(append(b, tagString), t), nil
	case []any:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(t)))
		for _, e := range t {
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case map[string]any:
		keys := sortedKeys(t)
		b = binary.AppendUvarint(append(b, tagObject), uint64(len(keys)))
		for _, k := range keys {
			b = appendString(b, k)
			var err error
			if b, err = appendValue(b, t[k], depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	i, f, isInt, ok := asNumber(v)
	switch {
	case !ok:
		return append(b, tagOther), nil
	case isInt:
		return binary.AppendVarint(append(b, tagInt), i), nil
	default:
		return binary.BigEndian.AppendUint64(append(b, tagFloat), math.Float64bits(f)), nil
	}
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// errMalformed is returned by the value decoder; callers turn it into
// errBadCursor.
var errMalformed = errors.New("malformed cursor value")

// decodeValues decodes a count followed by that many values, which must
// use up b.
func decodeValues(b []byte) ([]any, error) {
	r := valueReader{b: b}
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	vals := make([]any, n)
	for i := range vals {
		if vals[i], err = r.value(0); err != nil {
			return nil, err
		}
	}
	if len(r.b) != 0 {
		return nil, errMalformed
	}
	return vals, nil
}

// valueReader decodes values from the front of b.
type valueReader struct{ b []byte }

func (r *valueReader) uvarint() (uint64, error) {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		return 0, errMalformed
	}
	r.b = r.b[n:]
	return x, nil
}

// count reads an element count, which cannot exceed the bytes left since
// every element takes at least one byte.
func (r *valueReader) count() (int, error) {
	x, err := r.uvarint()
	if err != nil || x > uint64(len(r.b)) {
		return 0, errMalformed
	}
	return int(x), nil
}

func (r *valueReader) string() (string, error) {
	n, err := r.uvarint()
	if err != nil || n > uint64(len(r.b)) {
		return "", errMalformed
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s, nil
}

func (r *valueReader) value(depth int) (any, error) {
	if depth > maxCursorDepth || len(r.b) == 0 {
		return nil, errMalformed
	}
	tag := r.b[0]
	r.b = r.b[1:]
	switch tag {
	case tagNull:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagOther:
		return otherValue{}, nil
	case tagInt:
		x, n := binary.Varint(r.b)
		if n <= 0 {
			return nil, errMalformed
		}
		r.b = r.b[n:]
		return x, nil
	case tagFloat:
		if len(r.b) < 8 {
			return nil, errMalformed
		}
		f := math.Float64frombits(binary.BigEndian.Uint64(r.b))
		r.b = r.b[8:]
		return f, nil
	case tagString:
		return r.string()
	case tagArray:
		n, err := r.count()
		if err != nil {
			return nil, err
		}
		arr := make([]any, n)
		for i := range arr {
			if arr[i], err = r.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return arr, nil
	case tagObject:
		n, err := r.count()
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, n)
		prev := ""
		for i := range n {
			k, err := r.string()
			if err != nil || (i > 0 && k <= prev) { // keys strictly ascending
				return nil, errMalformed
			}
			prev = k
			if m[k], err = r.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	return nil, errMalformed
}

// Package bodycodec is the binary form of a document body, shared by the
// embedded engine's stored states (store/pebbleengine) and the replication
// wire (replicate): it keeps a body's value types exactly (api/doc: nil,
// bool, int64, float64, string, []any and map[string]any), where JSON
// would read every number back as a float64.
//
// Other Go integers (int, int32) and float32, which code of this module
// may hand in, are kept as int64 and float64, as the mongo engine reads
// them back. Each value is a tag byte and its payload; lengths and counts
// are uvarints, integers zig-zag varints, floats 8 bytes big-endian,
// object keys sorted so that equal bodies encode alike.
//
// The form is stored on disk: change it only with a new tag, never by
// changing what an existing tag means.
package bodycodec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The tags of the values.
const (
	TagNil byte = iota
	TagFalse
	TagTrue
	TagInt
	TagFloat
	TagString
	TagArray
	TagObject
)

// MaxDepth bounds the nesting the decoder follows (the API allows 32
// levels; a body deeper than this is corrupt).
const MaxDepth = 256

// preallocMax bounds the room a decoder makes for an array's or object's
// elements before it has read them: a count is only a claim (each level
// of nesting that claims more than the bytes that follow could hold
// multiplied what a few kilobytes made the decoder allocate).
const preallocMax = 16

// ErrCorrupt is the decoders' answer to bytes no body encodes to.
var ErrCorrupt = errors.New("a document body's binary form is corrupt")

// Append encodes body (nil: an empty object) after dst.
func Append(dst []byte, body map[string]any) ([]byte, error) {
	if body == nil {
		body = map[string]any{}
	}
	return appendValue(dst, body)
}

func appendValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, TagNil), nil
	case bool:
		if v {
			return append(dst, TagTrue), nil
		}
		return append(dst, TagFalse), nil
	case int64:
		return binary.AppendVarint(append(dst, TagInt), v), nil
	case int:
		return appendValue(dst, int64(v))
	case int32:
		return appendValue(dst, int64(v))
	case float32:
		return appendValue(dst, float64(v))
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, TagFloat), math.Float64bits(v)), nil
	case string:
		return AppendString(append(dst, TagString), v), nil
	case []any:
		dst = binary.AppendUvarint(append(dst, TagArray), uint64(len(v)))
		for _, e := range v {
			var err error
			if dst, err = appendValue(dst, e); err != nil {
				return nil, err
			}
		}
		return dst, nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = binary.AppendUvarint(append(dst, TagObject), uint64(len(v)))
		for _, k := range keys {
			dst = AppendString(dst, k)
			var err error
			if dst, err = appendValue(dst, v[k]); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	return nil, fmt.Errorf("a document value of type %T has no binary form (api/doc makes none)", v)
}

// AppendString appends s as a uvarint length and its bytes.
func AppendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// Decode reads a body encoded by Append, and nothing after it.
func Decode(b []byte) (map[string]any, error) {
	m, rest, err := DecodePrefix(b)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, ErrCorrupt
	}
	return m, nil
}

// DecodePrefix reads a body encoded by Append from the start of b and
// returns what follows it.
func DecodePrefix(b []byte) (map[string]any, []byte, error) {
	v, rest, err := decodeValue(b, 0)
	if err != nil {
		return nil, nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, ErrCorrupt
	}
	return m, rest, nil
}

func decodeValue(b []byte, depth int) (any, []byte, error) {
	if len(b) == 0 || depth > MaxDepth {
		return nil, nil, ErrCorrupt
	}
	tag, b := b[0], b[1:]
	switch tag {
	case TagNil:
		return nil, b, nil
	case TagFalse:
		return false, b, nil
	case TagTrue:
		return true, b, nil
	case TagInt:
		n, size := binary.Varint(b)
		if size <= 0 {
			return nil, nil, ErrCorrupt
		}
		return n, b[size:], nil
	case TagFloat:
		if len(b) < 8 {
			return nil, nil, ErrCorrupt
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:], nil
	case TagString:
		s, rest, err := DecodeString(b)
		return s, rest, err
	case TagArray:
		n, size := binary.Uvarint(b)
		if size <= 0 || n > uint64(len(b)) {
			return nil, nil, ErrCorrupt
		}
		b = b[size:]
		out := make([]any, 0, min(n, preallocMax))
		for range n {
			v, rest, err := decodeValue(b, depth+1)
			if err != nil {
				return nil, nil, err
			}
			out, b = append(out, v), rest
		}
		return out, b, nil
	case TagObject:
		n, size := binary.Uvarint(b)
		if size <= 0 || n > uint64(len(b)) {
			return nil, nil, ErrCorrupt
		}
		b = b[size:]
		out := make(map[string]any, min(n, preallocMax))
		for range n {
			k, rest, err := DecodeString(b)
			if err != nil {
				return nil, nil, err
			}
			var v any
			if v, b, err = decodeValue(rest, depth+1); err != nil {
				return nil, nil, err
			}
			out[k] = v
		}
		return out, b, nil
	}
	return nil, nil, ErrCorrupt
}

// DecodeString reads a string encoded by AppendString from the start of b
// and returns what follows it.
func DecodeString(b []byte) (string, []byte, error) {
	n, size := binary.Uvarint(b)
	if size <= 0 || n > uint64(len(b)-size) {
		return "", nil, ErrCorrupt
	}
	b = b[size:]
	return string(b[:n]), b[n:], nil
}

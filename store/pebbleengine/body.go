package pebbleengine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// A document body is stored in a small binary form that keeps its value
// types exactly (api/doc: nil, bool, int64, float64, string, []any and
// map[string]any), where JSON would read every number back as a float64.
// Other Go integers (int, int32) and float32, which code of this module
// may hand in, are kept as int64 and float64, as the mongo engine reads
// them back. Each value is a tag byte and its payload; lengths and counts are
// uvarints, integers zig-zag varints, floats 8 bytes big-endian, object
// keys sorted so that equal bodies encode alike.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagInt
	tagFloat
	tagString
	tagArray
	tagObject
)

// maxDepth bounds the nesting the decoder follows (the API allows 32
// levels; a stored body deeper than this is corrupt).
const maxDepth = 256

var errCorrupt = errors.New("pebble engine: a stored document body is corrupt")

// appendBody encodes body (nil: an empty object) after dst.
func appendBody(dst []byte, body map[string]any) ([]byte, error) {
	if body == nil {
		body = map[string]any{}
	}
	return appendValue(dst, body)
}

func appendValue(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, tagNil), nil
	case bool:
		if v {
			return append(dst, tagTrue), nil
		}
		return append(dst, tagFalse), nil
	case int64:
		return binary.AppendVarint(append(dst, tagInt), v), nil
	case int:
		return appendValue(dst, int64(v))
	case int32:
		return appendValue(dst, int64(v))
	case float32:
		return appendValue(dst, float64(v))
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(v)), nil
	case string:
		return appendString(append(dst, tagString), v), nil
	case []any:
		dst = binary.AppendUvarint(append(dst, tagArray), uint64(len(v)))
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
		dst = binary.AppendUvarint(append(dst, tagObject), uint64(len(v)))
		for _, k := range keys {
			dst = appendString(dst, k)
			var err error
			if dst, err = appendValue(dst, v[k]); err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	return nil, fmt.Errorf("pebble engine: a document value of type %T cannot be stored (api/doc makes none)", v)
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeBody reads a body encoded by appendBody.
func decodeBody(b []byte) (map[string]any, error) {
	v, rest, err := decodeValue(b, 0)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok || len(rest) != 0 {
		return nil, errCorrupt
	}
	return m, nil
}

func decodeValue(b []byte, depth int) (any, []byte, error) {
	if len(b) == 0 || depth > maxDepth {
		return nil, nil, errCorrupt
	}
	tag, b := b[0], b[1:]
	switch tag {
	case tagNil:
		return nil, b, nil
	case tagFalse:
		return false, b, nil
	case tagTrue:
		return true, b, nil
	case tagInt:
		n, size := binary.Varint(b)
		if size <= 0 {
			return nil, nil, errCorrupt
		}
		return n, b[size:], nil
	case tagFloat:
		if len(b) < 8 {
			return nil, nil, errCorrupt
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:], nil
	case tagString:
		return decodeString(b)
	case tagArray:
		n, size := binary.Uvarint(b)
		if size <= 0 || n > uint64(len(b)) {
			return nil, nil, errCorrupt
		}
		b = b[size:]
		out := make([]any, n)
		for i := range out {
			var err error
			if out[i], b, err = decodeValue(b, depth+1); err != nil {
				return nil, nil, err
			}
		}
		return out, b, nil
	case tagObject:
		n, size := binary.Uvarint(b)
		if size <= 0 || n > uint64(len(b)) {
			return nil, nil, errCorrupt
		}
		b = b[size:]
		out := make(map[string]any, n)
		for range n {
			k, rest, err := decodeString(b)
			if err != nil {
				return nil, nil, err
			}
			var v any
			if v, b, err = decodeValue(rest, depth+1); err != nil {
				return nil, nil, err
			}
			out[k.(string)] = v
		}
		return out, b, nil
	}
	return nil, nil, errCorrupt
}

func decodeString(b []byte) (any, []byte, error) {
	n, size := binary.Uvarint(b)
	if size <= 0 || n > uint64(len(b)-size) {
		return nil, nil, errCorrupt
	}
	b = b[size:]
	return string(b[:n]), b[n:], nil
}

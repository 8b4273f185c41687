package doc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Limits bound how big a document may be. A zero field is no bound.
type Limits struct {
	// MaxFields bounds the document's fields: the keys of its objects and
	// the elements of its arrays, at every depth. "_id" and "_version" are
	// not stored and do not count.
	MaxFields int
	// MaxBytes bounds the document's length as compact JSON (see [Size]).
	MaxBytes int
}

// Size is how big a document is.
type Size struct {
	// Fields counts the keys of its objects and the elements of its
	// arrays, at every depth: {"a":[1,{"b":2}]} has 4 (a, two elements, b).
	// What a stored document costs to decode, and so every scan of its
	// partition, grows with its fields.
	Fields int
	// Bytes is its length as compact JSON: what json.Encoder with
	// SetEscapeHTML(false) writes for it, less the newline.
	Bytes int
}

// LimitError says a document is over one of its [Limits].
type LimitError struct {
	Fields bool // over MaxFields; else over MaxBytes
	// Have is how many fields or bytes it has. A body refused before it is
	// decoded (see [ParseBody]) counts every field of its text, "_id",
	// "_version" and repeated keys included.
	Have, Max int
}

func (e *LimitError) Error() string {
	if e.Fields {
		return fmt.Sprintf("the document has %d fields (object keys and array elements, at every depth), more than the maximum of %d", e.Have, e.Max)
	}
	return fmt.Sprintf("the document is %d bytes as compact JSON, more than the maximum of %d", e.Have, e.Max)
}

// Check measures body and returns its size, with a *[LimitError] if it is
// over l.
func (l Limits) Check(body map[string]any) (Size, error) {
	size := Measure(body)
	switch {
	case l.MaxFields > 0 && size.Fields > l.MaxFields:
		return size, &LimitError{Fields: true, Have: size.Fields, Max: l.MaxFields}
	case l.MaxBytes > 0 && size.Bytes > l.MaxBytes:
		return size, &LimitError{Have: size.Bytes, Max: l.MaxBytes}
	}
	return size, nil
}

// refuseFieldsEarly returns a *LimitError when the JSON text data has more
// fields than l allows even if two of them are the "_id" and "_version"
// keys that are not stored, so that a hostile body is refused without
// being decoded.
//
// It never refuses a body whose document is within l unless the text has
// fields that the document does not: a key repeated (the last one wins) or
// fields inside the value of "_version" (which is ignored). "_id" must be
// a string, so it has none. Malformed JSON is left to the decoder to
// describe.
func (l Limits) refuseFieldsEarly(data []byte) error {
	if l.MaxFields <= 0 {
		return nil
	}
	if n := countFields(data); n > l.MaxFields+2 && json.Valid(data) {
		return &LimitError{Fields: true, Have: n, Max: l.MaxFields}
	}
	return nil
}

// countFields counts the fields of a JSON text without decoding it: each
// colon outside strings (in valid JSON one follows every key), each comma
// directly inside an array, and one more per non-empty array. For valid
// JSON nested at most [MaxDepth] deep that is exactly the keys and array
// elements of the text; deeper, commas whose container is not known are
// not counted, so the count stays a lower bound (and such a body is
// refused as too deep anyway). It allocates nothing.
func countFields(data []byte) int {
	var inArray [MaxDepth]bool // inArray[d]: the container open at depth d+1 is an array
	n, depth := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data); i++ { // skip the string
				j := bytes.IndexAny(data[i:], `"\`)
				if j < 0 {
					return n
				}
				i += j
				if data[i] == '"' {
					break
				}
				i++ // the escaped byte
			}
		case ':':
			n++
		case ',':
			if depth > 0 && depth <= len(inArray) && inArray[depth-1] {
				n++
			}
		case '{', '[':
			depth++
			isArray := data[i] == '['
			if depth <= len(inArray) {
				inArray[depth-1] = isArray
			}
			if isArray {
				if rest := skipSpace(data[i+1:]); len(rest) > 0 && rest[0] != ']' {
					n++ // the first element
				}
			}
		case '}', ']':
			depth = max(depth-1, 0)
		}
	}
	return n
}

// Measure returns the size of a document of the value model (see the
// package documentation). A value of another type is measured by encoding
// it.
func Measure(body map[string]any) Size {
	var s Size
	if body == nil {
		s.Bytes = len("null")
		return s
	}
	measure(body, &s)
	return s
}

func measure(v any, s *Size) {
	switch x := v.(type) {
	case nil:
		s.Bytes += len("null")
	case bool:
		if x {
			s.Bytes += len("true")
		} else {
			s.Bytes += len("false")
		}
	case int64:
		s.Bytes += intLen(x)
	case float64:
		s.Bytes += floatLen(x)
	case string:
		s.Bytes += stringLen(x)
	case []any:
		if x == nil {
			s.Bytes += len("null")
			return
		}
		s.Fields += len(x)
		s.Bytes += 2 + max(len(x)-1, 0) // [ ] and commas
		for _, e := range x {
			measure(e, s)
		}
	case map[string]any:
		if x == nil {
			s.Bytes += len("null")
			return
		}
		s.Fields += len(x)
		s.Bytes += 2 + max(len(x)-1, 0) + len(x) // { } commas and colons
		for k, e := range x {
			s.Bytes += stringLen(k)
			measure(e, s)
		}
	default:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			s.Bytes += b.Len() - 1
		}
	}
}

func intLen(i int64) int {
	var buf [20]byte
	return len(strconv.AppendInt(buf[:0], i, 10))
}

// floatLen is the length of f as encoding/json writes it: like %g, with
// its own exponent cut-offs and no padding of the exponent to two digits.
func floatLen(f float64) int {
	var buf [32]byte
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(buf[:0], f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		return n - 1 // e-07 is written e-7
	}
	return len(b)
}

// stringLen is the length of s quoted as encoding/json writes it without
// HTML escaping.
func stringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20:
				n += 6 // \u00XX
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6 // \ufffd, \u2028, \u2029
		default:
			n += size
		}
		i += size
	}
	return n
}

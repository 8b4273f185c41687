package doc

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeObject decodes data into what encoding/json, with UseNumber, makes
// of it in an any: a map[string]any of []any, string, json.Number, bool and
// nil. It takes only the common case, data that is one JSON object with
// nothing after it but whitespace, nested at most MaxDepth deep, whose \u
// escapes encode no UTF-16 surrogate; for anything else it reports false
// and the caller decodes with encoding/json, for its rules and its errors.
// data must be valid UTF-8 (the caller checks it first).
//
// It exists for speed: encoding/json scans a body twice, once to find its
// end and once to decode it, with a call per byte of each, and decoding
// every write's body that way was 3-4% of the nodes' CPU under `majority`
// writes (docs/benchmarks.md). TestTheFastDecoderAgreesWithEncodingJSON
// and FuzzTheFastDecoder hold it to encoding/json's answers.
func decodeObject(data []byte) (map[string]any, bool) {
	d := decoder{data: data}
	d.skipSpace()
	if !d.at('{') {
		return nil, false
	}
	obj, ok := d.object(1)
	if !ok {
		return nil, false
	}
	d.skipSpace()
	return obj, d.i == len(d.data)
}

// decoder reads data from i on.
type decoder struct {
	data []byte
	i    int
}

func (d *decoder) at(c byte) bool { return d.i < len(d.data) && d.data[d.i] == c }

func (d *decoder) skipSpace() { d.i = len(d.data) - len(skipSpace(d.data[d.i:])) }

// more reads what follows a member of a container: a ',' (more members
// follow) or the container's closing byte (it ends); ok is false for
// anything else.
func (d *decoder) more(closing byte) (more, ok bool) {
	d.skipSpace()
	switch {
	case d.at(','):
		d.i++
		return true, true
	case d.at(closing):
		d.i++
		return false, true
	}
	return false, false
}

// value reads the value at i, inside a container at depth.
func (d *decoder) value(depth int) (any, bool) {
	d.skipSpace()
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		if depth >= MaxDepth {
			return nil, false
		}
		obj, ok := d.object(depth + 1)
		return obj, ok
	case c == '[':
		if depth >= MaxDepth {
			return nil, false
		}
		return d.array(depth + 1)
	case c == '"':
		str, ok := d.str()
		return str, ok
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		return d.number()
	}
}

// object reads the object at i (its '{'), at depth.
func (d *decoder) object(depth int) (map[string]any, bool) {
	d.i++
	obj := map[string]any{}
	d.skipSpace()
	if d.at('}') {
		d.i++
		return obj, true
	}
	for {
		d.skipSpace()
		if !d.at('"') {
			return nil, false
		}
		key, ok := d.str()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if !d.at(':') {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		obj[key] = v // a key repeated: the last one wins, as in encoding/json
		more, ok := d.more('}')
		if !ok {
			return nil, false
		}
		if !more {
			return obj, true
		}
	}
}

// array reads the array at i (its '['), at depth.
func (d *decoder) array(depth int) (any, bool) {
	d.i++
	arr := []any{} // encoding/json makes an empty one, not nil
	d.skipSpace()
	if d.at(']') {
		d.i++
		return arr, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		arr = append(arr, v)
		more, ok := d.more(']')
		if !ok {
			return nil, false
		}
		if !more {
			return arr, true
		}
	}
}

// str reads the string at i (its '"').
func (d *decoder) str() (string, bool) {
	d.i++
	start := d.i
	for d.i < len(d.data) { // most strings have no escape: no copy but the string
		switch c := d.data[d.i]; {
		case c == '"':
			s := string(d.data[start:d.i])
			d.i++
			return s, true
		case c == '\\':
			return d.escaped(start)
		case c < 0x20:
			return "", false
		}
		d.i++
	}
	return "", false
}

// escaped reads the rest of a string that started at start and has an
// escape at i.
func (d *decoder) escaped(start int) (string, bool) {
	buf := append(make([]byte, 0, d.i-start+16), d.data[start:d.i]...)
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			d.i++
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.data) {
			return "", false
		}
		switch e := d.data[d.i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(d.data[d.i+2:])
			if !ok || utf16.IsSurrogate(r) {
				return "", false // pairs, and the unpaired ones ParseBody refuses, go the slow way
			}
			buf = utf8.AppendRune(buf, r)
			d.i += 6
			continue
		default:
			return "", false
		}
		d.i += 2
	}
	return "", false
}

// literal reads word (true, false or null) at i.
func (d *decoder) literal(word string) bool {
	if len(d.data)-d.i < len(word) || string(d.data[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

// number reads the number at i, as its text: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.at('-') {
		d.i++
	}
	switch {
	case d.at('0'):
		d.i++
	case d.i < len(d.data) && '1' <= d.data[d.i] && d.data[d.i] <= '9':
		d.digits()
	default:
		return nil, false
	}
	if d.at('.') {
		d.i++
		if !d.digits() {
			return nil, false
		}
	}
	if d.at('e') || d.at('E') {
		d.i++
		if d.at('+') || d.at('-') {
			d.i++
		}
		if !d.digits() {
			return nil, false
		}
	}
	return json.Number(d.data[start:d.i]), true
}

// digits reads one or more digits at i; false if there are none.
func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits on filters.
const (
	maxFilterBytes        = 64 << 10            // length of the filter text
	maxFilterDepth        = 32                  // nesting of JSON objects and arrays
	maxRegexBytes         = 1024                // length of a $regex pattern
	maxRegexProgram       = 5000                // estimated size of a compiled $regex (see progSize)
	maxFilterRegexProgram = 4 * maxRegexProgram // the same, of all a filter's $regex patterns together
	maxListItems          = 1000                // items in an $in, $nin, $all or $type array
)

// jobject is a JSON object decoded with its keys in document order. The
// filter parser works on jobject, []any and scalars (nil, bool, int64,
// float64, string) and converts literal values to the document value model.
type jobject struct {
	keys []string
	vals []any
}

// decodeFilterJSON decodes raw, which must hold exactly one JSON object.
func decodeFilterJSON(raw string) (*jobject, error) {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	v, err := readJSON(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, filterError("malformed JSON: unexpected data after the filter object (at byte %d); send a single JSON object", dec.InputOffset())
	}
	obj, ok := v.(*jobject)
	if !ok {
		return nil, filterError("a filter must be a JSON object such as {\"field\": value}, not %s", describe(v))
	}
	return obj, nil
}

// readJSON reads one JSON value from dec; depth is the number of objects and
// arrays it is nested in.
func readJSON(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err, dec)
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxFilterDepth {
			return nil, filterError("objects and arrays are nested more than %d levels deep", maxFilterDepth)
		}
		switch t {
		case '{':
			return readObject(dec, depth)
		case '[':
			return readArray(dec, depth)
		}
		return nil, filterError("malformed JSON: unexpected %q (at byte %d)", t, dec.InputOffset())
	case json.Number:
		return parseNumber(t)
	default: // string, bool, nil
		return t, nil
	}
}

func readObject(dec *json.Decoder, depth int) (*jobject, error) {
	obj := &jobject{}
	var seen map[string]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(err, dec)
		}
		key, ok := tok.(string)
		if !ok { // not reached: the decoder only returns string keys
			return nil, filterError("malformed JSON: object key is not a string (at byte %d)", dec.InputOffset())
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		if seen[key] {
			return nil, filterError("key %q appears twice in the same object; combine the conditions, e.g. with $and", truncate(key, 80))
		}
		seen[key] = true
		v, err := readJSON(dec, depth+1)
		if err != nil {
			return nil, err
		}
		obj.keys = append(obj.keys, key)
		obj.vals = append(obj.vals, v)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, jsonError(err, dec)
	}
	return obj, nil
}

func readArray(dec *json.Decoder, depth int) ([]any, error) {
	arr := []any{}
	for dec.More() {
		v, err := readJSON(dec, depth+1)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return nil, jsonError(err, dec)
	}
	return arr, nil
}

// jsonError turns a decoding error into an *Error.
func jsonError(err error, dec *json.Decoder) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return filterError("malformed JSON: the text ends in the middle of a value; check for missing brackets or quotes")
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return filterError("malformed JSON: %s (at byte %d)", syn.Error(), syn.Offset)
	}
	return filterError("malformed JSON: %s (at byte %d)", err.Error(), dec.InputOffset())
}

// parseNumber converts a JSON number the way stored documents are
// normalised: an integer-valued number in int64 range becomes an int64,
// any other number a float64.
func parseNumber(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
		return nil, filterError("number %s is out of range; numbers must be within ±%g", truncate(s, 40), math.MaxFloat64)
	}
	if f == math.Trunc(f) && f >= -two63 && f < two63 {
		return int64(f), nil
	}
	return f, nil
}

// describe names the kind of a decoded filter value for messages, quoting
// scalars.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("the boolean %t", t)
	case string:
		return fmt.Sprintf("the string %q", truncate(t, 40))
	case int64:
		return fmt.Sprintf("the number %d", t)
	case float64:
		return fmt.Sprintf("the number %g", t)
	case []any:
		return "an array"
	case *jobject:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

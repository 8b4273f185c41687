package doc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Top-level keys with a meaning to the server.
const (
	idKey      = "_id"
	versionKey = "_version"
)

// ParseBody decodes a request body that must be a single JSON object, with
// nothing after it but whitespace, normalises its numbers (see the package
// documentation) and validates it:
//
//   - keys may not start with '$', contain '.' or contain NUL;
//   - keys and strings must be valid UTF-8, and \u escapes may not encode
//     unpaired UTF-16 surrogates;
//   - top-level keys starting with '_' are reserved, except "_id" and
//     "_version";
//   - "_id", if present, must be a string that passes [ValidID];
//   - "_version", if present, is accepted and dropped, whatever its value:
//     the server owns versions, but a client may echo back a document it read;
//   - objects and arrays may nest at most [MaxDepth] deep, counting the
//     top-level object as depth 1;
//   - the document (without "_id" and "_version") is within lim: a body
//     with too many fields (keys and array elements) is refused from its
//     text, before it is decoded (see [Limits.MaxFields]).
//
// It returns the body without "_id" and "_version", and the id given ("" if
// none). As with encoding/json, when a key appears twice in one object the
// last value wins. Every error is an [*Error], except that a document over
// lim is a [*LimitError].
func ParseBody(data []byte, lim Limits) (body map[string]any, id string, err error) {
	return parse(data, "document", lim)
}

// ParsePatch decodes a JSON merge patch (RFC 7396) request body. It must be
// a JSON object and follows the same rules as [ParseBody]; null values are
// allowed at any level and mean "remove this field". "_id" may be present and
// is returned, but it is the caller's job to check that it equals the id of
// the document being patched (removing it with null is refused). "_version"
// is ignored. The returned patch contains neither key and is ready for
// [MergePatch]. Of lim, only MaxFields applies, to the patch's own fields (nulls
// included), as a [*LimitError]: the document a patch makes is checked with
// [Limits.Check] once it is merged. Every other error is an [*Error].
func ParsePatch(data []byte, lim Limits) (patch map[string]any, id string, err error) {
	return parse(data, "merge patch", Limits{MaxFields: lim.MaxFields})
}

// parse implements ParseBody and ParsePatch; what names the kind of body in
// error messages.
func parse(data []byte, what string, lim Limits) (map[string]any, string, error) {
	if err := lim.refuseFieldsEarly(data); err != nil {
		return nil, "", err
	}
	if !utf8.Valid(data) {
		off := invalidUTF8Offset(data)
		return nil, "", bodyError("request body is not valid UTF-8: byte 0x%02x at byte offset %d does not belong to a UTF-8 sequence; send UTF-8 encoded JSON", data[off], off)
	}

	obj, fast := decodeObject(data) // the common case, without encoding/json's cost
	if !fast {
		var err *Error
		if obj, err = decodeSlowly(data, what); err != nil {
			return nil, "", err
		}
	}

	id, perr := normalizeTop(obj, what)
	if perr != nil {
		return nil, "", perr.toError()
	}
	if lim != (Limits{}) {
		if _, err := lim.Check(obj); err != nil {
			return nil, "", err
		}
	}
	return obj, id, nil
}

// decodeSlowly decodes data with encoding/json, for what decodeObject does
// not take: anything that is not valid, or not a JSON object, is refused
// here with encoding/json's own description; so are unpaired UTF-16
// surrogate escapes, which encoding/json would silently replace.
func decodeSlowly(data []byte, what string) (map[string]any, *Error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, decodeError(err, what)
	}
	if off := int(dec.InputOffset()); off < len(data) {
		if rest := skipSpace(data[off:]); len(rest) > 0 {
			return nil, bodyError("request body must be a single JSON %s, but more data follows it at byte offset %d", what, len(data)-len(rest))
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, bodyError("request body must be a JSON object, not %s", describe(v))
	}
	if bytes.IndexByte(data, '\\') >= 0 {
		if off, ok := checkSurrogates(data); !ok {
			return nil, bodyError("request body contains an unpaired UTF-16 surrogate escape %s at byte offset %d; strings must be valid Unicode", data[off:min(off+6, len(data))], off)
		}
	}
	return obj, nil
}

// normalizeTop validates the top-level object obj in place (see normalize),
// handles the reserved keys and returns the "_id" given.
func normalizeTop(obj map[string]any, what string) (string, *pathError) {
	var id string
	for k, v := range obj {
		if strings.HasPrefix(k, "_") {
			switch k {
			case idKey:
				s, ok := v.(string)
				switch {
				case v == nil && what == "merge patch":
					return "", newPathError(k, "_id cannot be removed; leave it out of the patch")
				case !ok:
					return "", newPathError(k, fmt.Sprintf("_id must be a string, not %s", describe(v)))
				}
				if msg := checkID(s); msg != "" {
					return "", newPathError(k, "invalid _id: "+msg)
				}
				id = s
				delete(obj, k)
				continue
			case versionKey:
				delete(obj, k)
				continue
			default:
				return "", newPathError(k, fmt.Sprintf("top-level field names starting with '_' are reserved for the server; only %q and %q may be sent", idKey, versionKey))
			}
		}
		if err := normalizeEntry(obj, k, v, 1); err != nil {
			return "", err
		}
	}
	return id, nil
}

// normalize validates a value produced by a json.Decoder using UseNumber,
// replacing every json.Number in it by an int64 or float64. v is a container
// at depth depth, or a scalar.
func normalize(v any, depth int) *pathError {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxDepth {
			return depthError(depth)
		}
		for k, e := range x {
			if err := normalizeEntry(x, k, e, depth); err != nil {
				return err
			}
		}
	case []any:
		if depth > MaxDepth {
			return depthError(depth)
		}
		for i, e := range x {
			if n, ok := e.(json.Number); ok {
				c, msg := convertNumber(n)
				if msg != "" {
					return &pathError{rev: []string{indexSegment(i)}, msg: msg}
				}
				x[i] = c
				continue
			}
			if err := normalize(e, depth+1); err != nil {
				err.rev = append(err.rev, indexSegment(i))
				return err
			}
		}
	}
	return nil
}

// normalizeEntry validates key k of obj, an object at depth depth, and its
// value v.
func normalizeEntry(obj map[string]any, k string, v any, depth int) *pathError {
	if msg := checkKey(k); msg != "" {
		return newPathError(k, msg)
	}
	if n, ok := v.(json.Number); ok {
		c, msg := convertNumber(n)
		if msg != "" {
			return newPathError(k, msg)
		}
		obj[k] = c
		return nil
	}
	if err := normalize(v, depth+1); err != nil {
		err.rev = append(err.rev, keySegment(k))
		return err
	}
	return nil
}

// checkKey returns "" if k is an acceptable field name and otherwise says
// why it is not. (UTF-8 validity is checked on the whole body beforehand.)
func checkKey(k string) string {
	if strings.HasPrefix(k, "$") {
		return "field names may not start with '$'"
	}
	for i := 0; i < len(k); i++ {
		switch k[i] {
		case '.':
			return "field names may not contain '.'"
		case 0:
			return "field names may not contain the NUL character (\\u0000)"
		}
	}
	return ""
}

// convertNumber converts a JSON number literal as described in the package
// documentation. On failure it returns a non-empty message.
func convertNumber(n json.Number) (any, string) {
	s := string(n)
	if isIntLiteral(s) {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, ""
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Sprintf("number %s is too large; numbers must be within ±%g", truncate(s, 40), math.MaxFloat64)
	}
	if f == math.Trunc(f) && f >= -(1<<63) && f < 1<<63 {
		return int64(f), ""
	}
	return f, ""
}

// isIntLiteral reports whether s is an optional '-' followed only by digits.
func isIntLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// decodeError turns an error from json.Decoder.Decode into an *Error.
func decodeError(err error, what string) *Error {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return bodyError("request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bodyError("request body is not valid JSON: it ends before the %s is complete", what)
	case errors.As(err, &syn):
		if strings.HasSuffix(syn.Error(), "exceeded max depth") {
			return bodyError("request body nests objects and arrays more than %d deep", MaxDepth)
		}
		return bodyError("request body is not valid JSON: %s (at byte offset %d)", syn.Error(), syn.Offset)
	default:
		return bodyError("request body is not valid JSON: %v", err)
	}
}

// checkSurrogates scans the \u escapes of a syntactically valid JSON text and
// reports the offset of the first one that encodes an unpaired UTF-16
// surrogate, which encoding/json would silently replace with U+FFFD. Outside
// strings valid JSON has no backslashes, so every backslash starts an escape.
func checkSurrogates(data []byte) (int, bool) {
	for i := 0; ; {
		j := bytes.IndexByte(data[i:], '\\')
		if j < 0 {
			return 0, true
		}
		i += j
		if i+1 >= len(data) || data[i+1] != 'u' {
			i += 2 // \" \\ \/ \b \f \n \r \t
			continue
		}
		r, ok := hex4(data[i+2:])
		switch {
		case !ok:
			return i, false // cannot happen in valid JSON
		case r >= 0xD800 && r < 0xDC00: // high surrogate: a low one must follow
			if len(data) >= i+12 && data[i+6] == '\\' && data[i+7] == 'u' {
				if r2, ok := hex4(data[i+8:]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					i += 12
					continue
				}
			}
			return i, false
		case r >= 0xDC00 && r < 0xE000: // low surrogate on its own
			return i, false
		}
		i += 6
	}
}

// hex4 decodes four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// invalidUTF8Offset returns the offset of the first byte of data that is not
// part of a valid UTF-8 sequence; data must not be valid UTF-8.
func invalidUTF8Offset(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return 0
}

// skipSpace returns b without leading JSON whitespace.
func skipSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// describe names the JSON type of a decoded value, with an article.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, int64, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// bodyError returns an *Error about the body as a whole.
func bodyError(format string, args ...any) *Error {
	return &Error{Field: "body", Message: fmt.Sprintf(format, args...)}
}

// pathError is an error found while walking a body. The path to the field is
// built while unwinding the recursion, so it costs nothing when the body is
// valid.
type pathError struct {
	rev []string // path segments, innermost first
	msg string
}

func newPathError(key, msg string) *pathError {
	return &pathError{rev: []string{keySegment(key)}, msg: msg}
}

func depthError(depth int) *pathError {
	return &pathError{msg: fmt.Sprintf("objects and arrays are nested %d deep here, more than the maximum of %d (the top-level object counts as 1)", depth, MaxDepth)}
}

func (e *pathError) toError() *Error {
	var b strings.Builder
	b.WriteString("body")
	for i := len(e.rev) - 1; i >= 0; i-- {
		b.WriteString(e.rev[i])
	}
	return &Error{Field: b.String(), Message: e.msg}
}

// maxKeyInPath is how many bytes of a key an error's Field shows.
const maxKeyInPath = 64

// keySegment formats key as a path segment: ".key" when that is unambiguous
// and readable, otherwise `["quoted key"]`. Long keys are shortened.
func keySegment(key string) string {
	plain := key != ""
	for _, r := range key {
		if r == '.' || r == '[' || r == ']' || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			plain = false
			break
		}
	}
	key = truncate(key, maxKeyInPath)
	if plain {
		return "." + key
	}
	return "[" + strconv.Quote(key) + "]"
}

func indexSegment(i int) string {
	return "[" + strconv.Itoa(i) + "]"
}

// truncate shortens s to at most n bytes, on a rune boundary, marking the cut
// with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

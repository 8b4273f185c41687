// Package doc validates the names and request bodies that Shoal's REST API
// accepts, and implements JSON merge patch (RFC 7396) on Shoal documents.
//
// # Names
//
// [ValidUser], [ValidCollection] and [ValidID] check the path segments of the
// route /v1/users/{user}/collections/{coll}/documents/{id}.
//
// # Value model
//
// A document body is a map[string]any whose values are only nil, bool, int64,
// float64, string, []any and map[string]any (recursively). [ParseBody] and
// [ParsePatch] produce exactly these types.
//
// A JSON number becomes an int64 when its value is an integer that fits in an
// int64, whatever its spelling: 1, -0, 1.0, 2.5e1 and 1e3 all become int64.
// Plain integer literals are converted exactly. Any other literal is first
// rounded to the nearest float64; if that is an integer in int64 range it
// becomes an int64 (so 9007199254740993.0 becomes 9007199254740992, and 1e-400,
// which rounds to 0, becomes 0), and otherwise it stays a float64: 1.5, 1e19,
// and 9223372036854775808 (one more than the largest int64). A number too large
// in magnitude for a float64, such as 1e400, is rejected.
//
// So a float64 in a document is never an integer in int64 range, and a
// document survives encoding with encoding/json and parsing again unchanged
// (encoding/json writes the float64 1000 as 1000).
//
// # Errors
//
// Every invalid input is reported as an [*Error] naming the offending field
// and saying what the rule is, so the HTTP layer can return it as a 400.
package doc

// MaxDepth is the deepest nesting of objects and arrays a document may have.
// The top-level object is at depth 1, so a document may contain at most
// MaxDepth-1 levels of nested objects and arrays.
const MaxDepth = 32

// Error is returned for every invalid input. Field names where the problem is
// ("user", "collection", "id", "body", or a path into the body such as
// "body.a.b" or "body.items[2]"), and Message is a sentence a person can act on.
type Error struct {
	Field, Message string
}

// Error returns "Field: Message", or just Message when Field is empty.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

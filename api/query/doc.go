// Package query implements the filter, sort and keyset-paging semantics of
// Shoal's document listing endpoint:
//
//	GET .../documents?filter=<json>&sort=<fields>&limit=<n>&after=<cursor>
//
// The storage engine only narrows down candidate documents; this package
// decides which of them match ([ParseFilter], [Filter.Match]), orders them
// ([ParseSort], [Sort.Compare], [Compare]) and cuts them into pages with an
// opaque, tamper-proof cursor ([Page]). Paging through a collection that does
// not change returns every matching document exactly once.
//
// # Values
//
// Documents are map[string]any whose values are nil, bool, int64, float64,
// string, []any and map[string]any. (For the convenience of Go callers the
// other integer types up to 32 bits, int and float32 are treated as numbers
// too.) [Compare] orders all values in one total order, as MongoDB's BSON
// comparison does:
//
//	null (and missing) < numbers < strings < objects < arrays < booleans
//
// Numbers compare by their exact numeric value whether they are int64 or
// float64 (so 1 == 1.0, and 9007199254740993 > 9007199254740992.0); strings
// compare byte-wise; objects compare as the sequence of their (key, value)
// pairs in sorted key order, and then by length; arrays compare element by
// element and then by length; false < true.
//
// # Field paths
//
// Filters and sorts name fields with dot-separated paths such as "a.b.c".
// Components must be non-empty and may contain neither '$' nor NUL; a path
// has at most 32 components. A component that is a canonical non-negative
// decimal number ("0", "12", not "01") indexes into an array. Apart from
// "_id" and "_version", top-level fields whose names start with '_' are
// reserved for the server and cannot be named in a filter or sort.
//
// # Filters
//
// A filter is a JSON object in MongoDB query syntax. The allowed operators
// are $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $type, $and, $or,
// $nor, $not, $all, $size, $elemMatch, $regex and $options; anything else is
// rejected with an [*Error]. The semantics follow MongoDB's:
//
//   - {"f": v} means {"f": {"$eq": v}}. Equality is deep; objects are equal
//     when they have the same keys with equal values, in any order.
//     {"f": null} matches a null or missing field.
//   - When a path meets an array it matches if the array itself or any of
//     its elements matches ("implicit array traversal"), also through arrays
//     of objects: "items.sku" looks at the sku of every element of items.
//     Nested arrays are not traversed further. $size, $elemMatch and $all
//     look at the array itself.
//   - $gt, $gte, $lt and $lte only match values of the operand's type class
//     (numbers with numbers, strings with strings, ...). {"$gte": null} and
//     {"$lte": null} match null or missing; {"$gt": null} and {"$lt": null}
//     match nothing.
//   - $ne, $nin and $not are the negations of $eq, $in and of their operand,
//     so they match documents where the field is missing.
//   - $type takes one of "double", "string", "object", "array", "bool",
//     "null", "int", "long" or "number", or an array of them. Every integer
//     is a "long", and also an "int" when it fits in 32 bits.
//   - $regex takes a Go regular expression (RE2 syntax, see regexp/syntax),
//     and $options the flags i, m and s.
//   - $elemMatch takes either operators applied to each element
//     ({"$gt": 1, "$lt": 5}) or a query over elements that are objects
//     ({"sku": "a", "qty": {"$gt": 2}}).
//   - $all takes values (each of which must be matched, as with $eq) or
//     {"$elemMatch": ...} objects.
//
// Numbers in filters are normalised like numbers in stored documents: an
// integer-valued number within int64 range (1, 1.0, 1e3) is an int64, any
// other a float64.
//
// Limits: the filter text is at most 64 KiB of UTF-8, JSON nesting at most
// 32 levels, a regular expression at most 1024 bytes and at most about 5000
// instructions once compiled (matching time grows with both the text and
// the program), all of a filter's regular expressions together at most
// about 20,000 (each is compiled, which costs memory in proportion), and
// $in, $nin, $all and $type arrays at most 1000 items.
//
// # Work
//
// A query's work is counted in units as it is done and bounded by a
// [Budget]: past it, evaluation stops with [ErrTooExpensive]. The count is
// deterministic (it depends on the filter, the sort and the documents, not
// on the machine or its load); [Budget] says what each step costs.
//
// # Sorting
//
// A sort names up to three field paths, each optionally prefixed with '-'
// (descending) or '+' (ascending), separated by commas: "a,-b.c". Documents
// are ordered by those fields with [Compare], a missing field sorting as
// null, and then by _id ascending, unless _id was named explicitly.
//
// # Paging
//
// [Page] returns the first page of matching documents strictly after the
// position named by a cursor, in sort order; a [Pager] does the same for
// documents streamed to it one at a time, keeping only those that may be on
// the page, and lets its writer cut the page shorter (to a byte bound) and
// continue after any of its documents. The cursor holds the sort values
// and _id of the last document returned, never an offset, so a page is
// stable when documents before it are inserted or deleted. The cursor is
// bound to the sort and the filter text and authenticated with HMAC-SHA256,
// so it cannot be forged, altered or reused with another query. It is not
// encrypted: it shows the sort values of the last document of the page,
// which the client has just received anyway, and it is as long as they are.
// Sort values are encoded exactly (int64 and float64 bits, strings byte for
// byte), so the position compares exactly like the document it came from.
//
// # Differences from MongoDB
//
//   - Only the operators listed above exist; there is no JavaScript, no
//     $expr, no regex literals and no numeric $type codes. Operators may only
//     appear as the keys of the object directly under a field name (or under
//     $not and $elemMatch); a value such as {"a": {"b": {"$gt": 1}}} that
//     would be a literal sub-document in MongoDB is rejected, since stored
//     documents cannot have keys starting with '$' anyway.
//   - Duplicate keys in a filter object are rejected instead of the last one
//     silently winning.
//   - $exists accepts only true, false, 1 and 0, not any value by its
//     truthiness; $type accepts only the names listed above.
//   - Object equality ignores key order (documents are Go maps).
//   - Regular expressions are RE2, not PCRE: no backreferences or lookaround,
//     and matching always takes linear time.
//   - A numeric path component ("a.0") indexes into an array when the array
//     is long enough; only when it is not does it name the field "0" of the
//     array's object elements. MongoDB tries both.
//   - Sorting compares an array as a whole value (element by element), not
//     by its smallest or largest element. A sort path that passes through an
//     array of objects ("items.price") yields the array of the values found
//     in its elements ([p1, p2, ...]), missing if there are none.
//   - Comparison operators do not treat NaN specially (NaN is the smallest
//     number); NaN cannot occur in JSON documents.
package query

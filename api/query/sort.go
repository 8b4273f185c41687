package query

import "strings"

// maxSortFields is the largest number of fields a sort may name.
const maxSortFields = 3

// Sort is a parsed sort specification. It orders documents by up to three
// field paths, each ascending or descending, and then by _id ascending
// unless _id is itself one of the fields. The zero Sort orders by _id
// ascending.
type Sort struct {
	keys       []sortKey // the complete key list including _id; empty for the zero Sort
	implicitID bool      // the last key is the _id tie-break added by ParseSort
}

// sortKey is one field of a sort.
type sortKey struct {
	name string   // the path as written, without the direction
	path []string // name split into components
	desc bool
}

// idSortKey is the implicit final key.
var idSortKey = sortKey{name: "_id", path: []string{"_id"}}

// keyList returns the keys s compares by, in order.
func (s Sort) keyList() []sortKey {
	if len(s.keys) == 0 {
		return []sortKey{idSortKey}
	}
	return s.keys
}

// ParseSort parses a comma-separated list of at most three field paths, each
// optionally prefixed with "-" for descending or "+" for ascending, such as
// "a,-b.c,d". White space around a field and after its sign is ignored. A
// field may be named only once. "" sorts by _id ascending. Every error is an
// [*Error].
func ParseSort(raw string) (Sort, error) {
	if strings.TrimSpace(raw) == "" {
		return Sort{}, nil
	}
	if n := strings.Count(raw, ",") + 1; n > maxSortFields {
		return Sort{}, sortError("%d fields are given; at most %d may be named", n, maxSortFields)
	}
	var keys []sortKey
	hasID := false
	for _, item := range strings.Split(raw, ",") {
		item = strings.TrimSpace(item)
		k := sortKey{name: item}
		switch {
		case strings.HasPrefix(item, "-"):
			k.name, k.desc = strings.TrimSpace(item[1:]), true
		case strings.HasPrefix(item, "+"):
			k.name = strings.TrimSpace(item[1:])
		}
		if k.name == "" {
			return Sort{}, sortError("%q has an empty field; write fields separated by commas, such as \"a,-b.c\"", truncate(raw, 80))
		}
		path, msg := parsePath(k.name)
		if msg != "" {
			return Sort{}, sortError("%s", msg)
		}
		if reservedField(path[0]) {
			return Sort{}, sortError("field %q is reserved for the server: apart from _id and _version, top-level fields starting with '_' cannot be sorted on", truncate(path[0], 80))
		}
		for _, prev := range keys {
			if prev.name == k.name {
				return Sort{}, sortError("field %q is named more than once", truncate(k.name, 80))
			}
		}
		k.path = path
		hasID = hasID || k.name == "_id"
		keys = append(keys, k)
	}
	if !hasID {
		keys = append(keys, idSortKey)
	}
	return Sort{keys: keys, implicitID: !hasID}, nil
}

// String returns the canonical form of the fields named in s, such as
// "a,-b.c" ("" for the zero Sort). ParseSort(s.String()) is equivalent to s.
func (s Sort) String() string {
	keys := s.keys
	if s.implicitID {
		keys = keys[:len(keys)-1]
	}
	return joinKeys(keys)
}

// spec returns the canonical form of the complete key list, including the
// _id tie-break, such as "a,-b.c,_id". Equivalent sorts have the same spec.
func (s Sort) spec() string {
	return joinKeys(s.keyList())
}

func joinKeys(keys []sortKey) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		switch {
		case k.desc:
			b.WriteByte('-')
		case strings.HasPrefix(k.name, "-") || strings.HasPrefix(k.name, "+"):
			b.WriteByte('+') // so that the sign is not taken for a direction
		}
		b.WriteString(k.name)
	}
	return b.String()
}

// Compare compares two documents in sort order, returning -1, 0 or +1. Field
// values are compared with [Compare]; a missing field sorts as null.
func (s Sort) Compare(a, b map[string]any) int {
	for _, k := range s.keyList() {
		x, _ := resolve(a, k.path)
		y, _ := resolve(b, k.path)
		if c := k.compare(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// compare compares two values of this key in the key's direction.
func (k sortKey) compare(x, y any) int {
	c := Compare(x, y)
	if k.desc {
		return -c
	}
	return c
}

// sortValues sets vals[i] to the value of doc for keys[i] (nil when missing).
func sortValues(vals []any, doc map[string]any, keys []sortKey) {
	for i, k := range keys {
		vals[i], _ = resolve(doc, k.path)
	}
}

// compareValuesIn is compareValues charging its work to bud.
func compareValuesIn(keys []sortKey, a, b []any, bud *Budget) int {
	for i, k := range keys {
		c := compareIn(a[i], b[i], bud)
		if k.desc {
			c = -c
		}
		if c != 0 || bud.Exhausted() {
			return c
		}
	}
	return 0
}

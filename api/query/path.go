package query

import (
	"fmt"
	"strings"
)

// maxPathComponents is the largest number of components a field path may have.
const maxPathComponents = 32

// reservedField reports whether a top-level field name is reserved for the
// server: it starts with '_' and is neither "_id" nor "_version".
func reservedField(name string) bool {
	return strings.HasPrefix(name, "_") && name != "_id" && name != "_version"
}

// parsePath splits a dot-separated field path into its components and checks
// them. On failure it returns a message saying what is wrong with the path.
func parsePath(s string) ([]string, string) {
	if s == "" {
		return nil, "field path is empty"
	}
	if n := strings.Count(s, ".") + 1; n > maxPathComponents {
		return nil, fmt.Sprintf("field path %q has %d components; at most %d are allowed", truncate(s, 80), n, maxPathComponents)
	}
	comps := strings.Split(s, ".")
	for _, c := range comps {
		switch {
		case c == "":
			return nil, fmt.Sprintf("field path %q has an empty component; write paths like \"a.b.c\"", truncate(s, 80))
		case strings.Contains(c, "$"):
			return nil, fmt.Sprintf("field path %q contains '$'; positional and other '$' paths are not supported", truncate(s, 80))
		case strings.Contains(c, "\x00"):
			return nil, fmt.Sprintf("field path %q contains a NUL character", truncate(s, 80))
		}
	}
	return comps, ""
}

// truncate shortens s to at most n bytes for use in a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// arrayIndex reports whether the path component c is a canonical array index
// ("0", "17", but not "01" or "+1") and returns it.
func arrayIndex(c string) (int, bool) {
	if c == "" || len(c) > 9 || (c[0] == '0' && len(c) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(c); i++ {
		if c[i] < '0' || c[i] > '9' {
			return 0, false
		}
		n = n*10 + int(c[i]-'0')
	}
	return n, true
}

// leaf is one value a field path leads to in a document. present is false
// when the path does not exist along that branch (then v is nil).
type leaf struct {
	v       any
	present bool
}

// collect appends to out the values that path leads to from cur, following
// MongoDB's implicit array traversal: when a path component meets an array,
// a numeric component within the array's bounds selects that element;
// otherwise the rest of the path is followed into each element that is an
// object, and elements that are not objects are skipped. A missing leaf is
// appended for every object on which the path breaks off, and for an array
// that yields nothing, so that {"a.b": null} matches {"a": [{"c": 1}]} and
// {"a": []}. Each document node is visited at most once, so the result is
// no larger than the document.
func collect(cur any, path []string, out []leaf) []leaf {
	for len(path) > 0 {
		switch t := cur.(type) {
		case map[string]any:
			v, ok := t[path[0]]
			if !ok {
				return append(out, leaf{})
			}
			cur, path = v, path[1:]
		case []any:
			return collectArray(t, path, out)
		default:
			return append(out, leaf{})
		}
	}
	return append(out, leaf{v: cur, present: true})
}

// collectArray is collect for an array met in the middle of a path.
func collectArray(arr []any, path []string, out []leaf) []leaf {
	if i, ok := arrayIndex(path[0]); ok && i < len(arr) {
		return collect(arr[i], path[1:], out)
	}
	start := len(out)
	for _, e := range arr {
		if m, ok := e.(map[string]any); ok {
			out = collect(m, path, out)
		}
	}
	if len(out) == start {
		out = append(out, leaf{})
	}
	return out
}

// resolve returns the value a sort path leads to in v, and whether there is
// one. Objects are followed by key and arrays by index for a numeric
// component that is in range, as in collect. Otherwise the rest of the path
// is resolved in each object element of the array, and the value is the
// array of the values found (missing if none).
func resolve(v any, path []string) (any, bool) {
	for i, c := range path {
		switch t := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = t[c]; !ok {
				return nil, false
			}
		case []any:
			if j, ok := arrayIndex(c); ok && j < len(t) {
				v = t[j]
				continue
			}
			var found []any
			for _, e := range t {
				if m, ok := e.(map[string]any); ok {
					if x, ok := resolve(m, path[i:]); ok {
						found = append(found, x)
					}
				}
			}
			if found == nil {
				return nil, false
			}
			return found, true
		default:
			return nil, false
		}
	}
	return v, true
}

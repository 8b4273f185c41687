package query

import (
	"encoding/base64"
	"errors"
	"testing"
)

// fuzzDocs are the documents every filter that parses is matched against.
var fuzzDocs = []map[string]any{
	nil,
	{},
	{"_id": "x", "_version": int64(1), "a": int64(1), "b": "s", "c": nil, "d": true, "e": 2.5},
	{"a": []any{int64(1), "x", nil, []any{int64(2), []any{}}, map[string]any{"b": int64(1)}}},
	{"a": map[string]any{"b": []any{map[string]any{"c": []any{int64(1), int64(2)}}, map[string]any{"0": "z"}}}},
	{"items": []any{map[string]any{"sku": "a", "qty": int64(3), "tags": []any{"x"}}, map[string]any{"sku": "b"}}},
	{"a": map[string]any{"1": map[string]any{"0": []any{}}}, "0": []any{[]any{map[string]any{"a": nil}}}},
	{"a": struct{}{}, "b": 7, "c": float32(1)},
}

func FuzzParseFilter(f *testing.F) {
	for _, tt := range filterTests {
		f.Add(tt.filter)
	}
	for _, tt := range rejectTests {
		if len(tt.filter) < 512 {
			f.Add(tt.filter)
		}
	}
	f.Add(`{"a.0.b": {"$elemMatch": {"$not": {"$in": [1, {"x": [null]}]}}}}`)
	f.Add(`{"$nor": [{"a": {"$all": [{"$elemMatch": {"b.c": {"$type": ["int", "array"]}}}]}}]}`)
	f.Add(`{"$or": [{"b": {"$regex": "(?:a*){1000}b0"}}, {"b": {"$regex": "(?:a*){1000}b0"}}]}`)
	f.Add(`{"$and": [{}, {}, {"a": {"$in": [1, "x", null, [2, []], {"b": 1}]}}, {"a": {"$gte": {"b": 0}}}]}`)
	f.Add(`{"a": {"$not": {"$elemMatch": {"$eq": {"b": [{"c": [1, 2]}, {"0": "z"}]}}}}, "0": {"$size": 1}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		flt, err := ParseFilter(raw)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("ParseFilter(%q) returned %T, not *Error: %v", raw, err, err)
			}
			return
		}
		for _, d := range fuzzDocs {
			want := flt.Match(d)
			// The budget changes nothing but whether the work is done:
			// with the units a match needs the answer is the same, with
			// one less it is refused.
			b := NewBudget(1 << 40)
			if got, err := flt.MatchWithin(d, b); err != nil || got != want {
				t.Fatalf("filter %q on %v: MatchWithin = %v, %v; Match = %v", raw, d, got, err, want)
			}
			used := b.Used()
			if got, err := flt.MatchWithin(d, NewBudget(used)); err != nil || got != want {
				t.Fatalf("filter %q on %v with the %d units it needs: %v, %v", raw, d, used, got, err)
			}
			if used > 0 {
				if _, err := flt.MatchWithin(d, NewBudget(used-1)); !errors.Is(err, ErrTooExpensive) {
					t.Fatalf("filter %q on %v with %d units, one less than it needs: %v", raw, d, used-1, err)
				}
			}
		}
	})
}

func FuzzParseSort(f *testing.F) {
	for _, s := range []string{"", "a", "-a,+b.c", "a,,b", "_id", "_x", "a.$", "a,b,c,d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := ParseSort(raw)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("ParseSort(%q) returned %T, not *Error", raw, err)
			}
			return
		}
		again, err := ParseSort(s.String())
		if err != nil || again.spec() != s.spec() {
			t.Fatalf("ParseSort(%q).String() = %q does not round-trip: %v", raw, s.String(), err)
		}
		for _, a := range fuzzDocs {
			for _, b := range fuzzDocs {
				if s.Compare(a, b) != -s.Compare(b, a) {
					t.Fatalf("sort %q is not antisymmetric", raw)
				}
			}
		}
	})
}

// FuzzCursor checks that decoding arbitrary cursors never panics. Besides
// decoding the input as a cursor (which the MAC almost always refuses), it
// decodes the input as the value section of a correctly signed cursor, to
// reach the value decoder.
func FuzzCursor(f *testing.F) {
	s, _ := ParseSort("v,w")
	binding := cursorBinding(s, "")
	for _, vals := range [][]any{
		{nil, int64(1)},
		{"x", 2.5},
		{map[string]any{"a": []any{true, false, nil}}, otherValue{}},
		{[]any{[]any{}}, map[string]any{}},
	} {
		c, err := encodeCursor(testKey, binding, vals)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c)
		raw, _ := base64.RawURLEncoding.DecodeString(c)
		f.Add(string(raw[1+bindingSize : len(raw)-macSize]))
	}
	f.Add("")
	f.Add("!")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, in string) {
		if _, err := decodeCursor(in, testKey, binding, 3); err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("decodeCursor returned %T, not *Error", err)
			}
		}
		// The input as the values of a signed cursor.
		payload := append(append([]byte{cursorVersion}, binding[:]...), in...)
		c := base64.RawURLEncoding.EncodeToString(append(payload, cursorMAC(testKey, payload)...))
		vals, err := decodeCursor(c, testKey, binding, 3)
		if err != nil {
			var qe *Error
			if !errors.As(err, &qe) {
				t.Fatalf("decodeCursor returned %T, not *Error", err)
			}
			return
		}
		// Whatever decodes must encode and decode to an equal position.
		c2, err := encodeCursor(testKey, binding, vals)
		if err != nil {
			t.Fatal(err)
		}
		vals2, err := decodeCursor(c2, testKey, binding, 3)
		if err != nil {
			t.Fatalf("re-encoded cursor refused: %v", err)
		}
		for i := range vals {
			if Compare(vals[i], vals2[i]) != 0 {
				t.Fatalf("value %#v came back as %#v", vals[i], vals2[i])
			}
		}
		Page(fuzzDocs[1:], PageRequest{Sort: s, Limit: 2, After: c, Key: testKey})
	})
}

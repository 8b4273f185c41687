package query

import (
	"strings"
	"testing"
)

func TestParseSort(t *testing.T) {
	long := strings.Repeat("a.", maxPathComponents-1) + "a"
	tests := []struct{ in, str, spec string }{
		{"", "", "_id"},
		{"   ", "", "_id"},
		{"a", "a", "a,_id"},
		{"-a", "-a", "-a,_id"},
		{"+a", "a", "a,_id"},
		{" a , -b ", "a,-b", "a,-b,_id"},
		{"a,-b.c,d", "a,-b.c,d", "a,-b.c,d,_id"},
		{"_id", "_id", "_id"},
		{"+_id", "_id", "_id"},
		{"-_id", "-_id", "-_id"},
		{"-_id,a", "-_id,a", "-_id,a"},
		{"a,_id,b", "a,_id,b", "a,_id,b"},
		{"_version", "_version", "_version,_id"},
		{"a.0.b", "a.0.b", "a.0.b,_id"},
		{"_id.x", "_id.x", "_id.x,_id"},
		{long, long, long + ",_id"},
		{"- a,+ b", "-a,b", "-a,b,_id"},
		{"+ 0", "0", "0,_id"},
		{"--a,++b,+-c", "--a,++b,+-c", "--a,++b,+-c,_id"},
	}
	for _, tt := range tests {
		s, err := ParseSort(tt.in)
		if err != nil {
			t.Errorf("ParseSort(%q): %v", tt.in, err)
			continue
		}
		if got := s.String(); got != tt.str {
			t.Errorf("ParseSort(%q).String() = %q, want %q", tt.in, got, tt.str)
		}
		if got := s.spec(); got != tt.spec {
			t.Errorf("ParseSort(%q).spec() = %q, want %q", tt.in, got, tt.spec)
		}
		again, err := ParseSort(s.String())
		if err != nil || again.spec() != s.spec() {
			t.Errorf("ParseSort(%q) does not round-trip: %v, %v", s.String(), again, err)
		}
	}
	if got := (Sort{}).spec(); got != "_id" {
		t.Errorf("zero Sort has spec %q, want _id", got)
	}
}

func TestParseSortRejects(t *testing.T) {
	bad := []struct{ in, msg string }{
		{"a,,b", "empty field"},
		{",a", "empty field"},
		{"-", "empty field"},
		{"+", "empty field"},
		{"a,b,c,d", "at most 3"},
		{"a,b,c,_id", "at most 3"},
		{"a,a", "more than once"},
		{"a,-a", "more than once"},
		{"-_id,_id", "more than once"},
		{"$a", "contains '$'"},
		{"a.$", "contains '$'"},
		{"a..b", "empty component"},
		{"a.", "empty component"},
		{"a\x00", "NUL"},
		{"_secret", "reserved"},
		{"-_owner.x", "reserved"},
		{strings.Repeat("a.", maxPathComponents) + "a", "at most 32"},
	}
	for _, tt := range bad {
		_, err := ParseSort(tt.in)
		msg := wantQueryError(t, err, tt.in)
		if !strings.Contains(msg, tt.msg) || !strings.HasPrefix(msg, "invalid sort: ") {
			t.Errorf("ParseSort(%q): message %q does not contain %q", tt.in, msg, tt.msg)
		}
	}
}

func TestSortCompare(t *testing.T) {
	mustSort := func(s string) Sort {
		t.Helper()
		srt, err := ParseSort(s)
		if err != nil {
			t.Fatal(err)
		}
		return srt
	}
	tests := []struct {
		sort, a, b string
		want       int
	}{
		{"", `{"_id": "a"}`, `{"_id": "b"}`, -1},
		{"-_id", `{"_id": "a"}`, `{"_id": "b"}`, 1},
		{"x", `{"_id": "a", "x": 2}`, `{"_id": "b", "x": 1}`, 1},
		{"x", `{"_id": "a", "x": 1}`, `{"_id": "b", "x": 1.0}`, -1}, // tie broken by _id
		{"-x", `{"_id": "a", "x": 1}`, `{"_id": "b", "x": 1}`, -1},  // _id stays ascending
		{"x", `{"_id": "a"}`, `{"_id": "b", "x": null}`, -1},        // missing sorts as null
		{"x", `{"_id": "b"}`, `{"_id": "a", "x": null}`, 1},
		{"x", `{"_id": "a", "x": true}`, `{"_id": "b", "x": [1]}`, 1},
		{"x", `{"_id": "a", "x": [1, 5]}`, `{"_id": "b", "x": [2]}`, -1}, // whole arrays, not min/max
		{"x.y", `{"_id": "a", "x": {"y": "s"}}`, `{"_id": "b", "x": {"y": 10}}`, 1},
		{"x.y", `{"_id": "a", "x": [{"y": 1}, {"y": 3}]}`, `{"_id": "b", "x": [{"y": 2}]}`, -1}, // [1, 3] < [2]
		{"x.y", `{"_id": "a", "x": [{"z": 1}]}`, `{"_id": "b", "x": [{"y": null}]}`, -1},        // missing < [null]
		{"x.1", `{"_id": "a", "x": [9, 1]}`, `{"_id": "b", "x": [0, 2]}`, -1},
		{"x,-y", `{"_id": "a", "x": 1, "y": 1}`, `{"_id": "b", "x": 1, "y": 2}`, 1},
		{"_version", `{"_id": "b", "_version": 1}`, `{"_id": "a", "_version": 2}`, -1},
		{"x", `{"_id": "a", "x": 1}`, `{"_id": "a", "x": 1}`, 0},
	}
	for _, tt := range tests {
		s := mustSort(tt.sort)
		a, b := doc(t, tt.a), doc(t, tt.b)
		if got := s.Compare(a, b); got != tt.want {
			t.Errorf("sort %q: Compare(%s, %s) = %d, want %d", tt.sort, tt.a, tt.b, got, tt.want)
		}
		if got := s.Compare(b, a); got != -tt.want {
			t.Errorf("sort %q: Compare(%s, %s) = %d, want %d", tt.sort, tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestResolve(t *testing.T) {
	d := doc(t, `{"a": {"b": [{"c": 1}, {"d": 2}, {"c": [3]}, 4]}, "e": [[{"f": 1}]], "g": []}`)
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"a.b.c", []any{int64(1), []any{int64(3)}}, true},
		{"a.b.1.d", int64(2), true},
		{"a.b.3", int64(4), true},
		{"a.b.9", nil, false},
		{"a.b.x", nil, false},
		{"e.f", nil, false},
		{"e.0.f", []any{int64(1)}, true},
		{"g.x", nil, false},
		{"z", nil, false},
		{"a.b.c.0", []any{int64(3)}, true}, // "0" is looked up in each element
	}
	for _, tt := range tests {
		got, ok := resolve(d, strings.Split(tt.path, "."))
		if ok != tt.ok || Compare(got, tt.want) != 0 {
			t.Errorf("resolve(%q) = %#v, %v; want %#v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

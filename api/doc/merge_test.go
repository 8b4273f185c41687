package doc

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// mustParse parses a JSON object with ParsePatch, which accepts nulls and
// everything else a body may hold.
func mustParse(t testing.TB, s string) map[string]any {
	t.Helper()
	m, _, err := ParsePatch([]byte(s), Limits{})
	if err != nil {
		t.Fatalf("parsing %s: %v", s, err)
	}
	return m
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	default:
		return v
	}
}

// rfcExamples are the test cases of RFC 7396 Appendix A. Those whose original
// or patch is not an object are run wrapped in an object, as field "x".
var rfcExamples = []struct{ target, patch, want string }{
	{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
	{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
	{`{"a":"b"}`, `{"a":null}`, `{}`},
	{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
	{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
	{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
	{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
	{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
	{`{"x":["a","b"]}`, `{"x":["c","d"]}`, `{"x":["c","d"]}`},
	{`{"x":{"a":"b"}}`, `{"x":["c"]}`, `{"x":["c"]}`},
	{`{"x":{"a":"foo"}}`, `{"x":null}`, `{}`},
	{`{"x":{"a":"foo"}}`, `{"x":"bar"}`, `{"x":"bar"}`},
	{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
	{`{"x":[1,2]}`, `{"x":{"a":"b","c":null}}`, `{"x":{"a":"b"}}`},
	{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	// The example of RFC 7396 section 3.
	{
		`{"title":"Goodbye!","author":{"givenName":"John","familyName":"Doe"},"tags":["example","sample"],"content":"This will be unchanged"}`,
		`{"title":"Hello!","phoneNumber":"+01-123-456-7890","author":{"familyName":null},"tags":["example"]}`,
		`{"title":"Hello!","author":{"givenName":"John"},"tags":["example"],"content":"This will be unchanged","phoneNumber":"+01-123-456-7890"}`,
	},
}

func TestMergePatchRFC7396(t *testing.T) {
	for _, c := range rfcExamples {
		target, patch, want := mustParse(t, c.target), mustParse(t, c.patch), mustParse(t, c.want)
		targetCopy, patchCopy := deepCopy(target), deepCopy(patch)
		got, err := MergePatch(target, patch)
		if err != nil {
			t.Errorf("MergePatch(%s, %s): %v", c.target, c.patch, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("MergePatch(%s, %s) = %#v, want %#v", c.target, c.patch, got, want)
		}
		if !reflect.DeepEqual(target, targetCopy) {
			t.Errorf("MergePatch(%s, %s) modified target to %#v", c.target, c.patch, target)
		}
		if !reflect.DeepEqual(patch, patchCopy) {
			t.Errorf("MergePatch(%s, %s) modified patch to %#v", c.target, c.patch, patch)
		}
		// Merge patches are idempotent.
		again, err := MergePatch(got, patch)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("MergePatch(%s, %s) applied twice = %#v, %v; want %#v", c.target, c.patch, again, err, got)
		}
	}
}

func TestMergePatchDoesNotAliasChangedLevels(t *testing.T) {
	target := mustParse(t, `{"a":{"b":{"c":1},"keep":{"k":1}},"z":[1,2]}`)
	targetCopy := deepCopy(target)
	got, err := MergePatch(target, mustParse(t, `{"a":{"b":{"d":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := mustParse(t, `{"a":{"b":{"c":1,"d":2},"keep":{"k":1}},"z":[1,2]}`)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	// Every level the patch touched is a fresh map.
	got["new"] = true
	got["a"].(map[string]any)["new"] = true
	got["a"].(map[string]any)["b"].(map[string]any)["new"] = true
	delete(got["a"].(map[string]any)["b"].(map[string]any), "c")
	if !reflect.DeepEqual(target, targetCopy) {
		t.Errorf("changing the result changed target: %#v", target)
	}
}

func TestMergePatchNilAndEmpty(t *testing.T) {
	got, err := MergePatch(nil, mustParse(t, `{"a":1,"b":null}`))
	if err != nil || !reflect.DeepEqual(got, map[string]any{"a": int64(1)}) {
		t.Errorf("nil target: got %#v, %v", got, err)
	}
	target := mustParse(t, `{"a":1}`)
	got, err = MergePatch(target, nil)
	if err != nil || !reflect.DeepEqual(got, target) {
		t.Errorf("nil patch: got %#v, %v", got, err)
	}
	got["b"] = 2
	if len(target) != 1 {
		t.Errorf("result of an empty patch aliases target")
	}
	got, err = MergePatch(nil, nil)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("nil, nil: got %#v, %v", got, err)
	}
}

// deepMap returns an object nested depth deep (counting itself), with key k
// at every level.
func deepMap(depth int) map[string]any {
	m := map[string]any{"k": int64(1)}
	for d := 2; d <= depth; d++ {
		m = map[string]any{"k": m}
	}
	return m
}

func deepArray(depth int) []any {
	a := []any{int64(1)}
	for d := 2; d <= depth; d++ {
		a = []any{a}
	}
	return a
}

func TestMergePatchDepth(t *testing.T) {
	// At the limit: fine.
	if _, err := MergePatch(map[string]any{"t": deepMap(MaxDepth - 1)}, map[string]any{"p": deepArray(MaxDepth - 1)}); err != nil {
		t.Errorf("depth %d: %v", MaxDepth, err)
	}
	if _, err := MergePatch(deepMap(MaxDepth), deepMap(MaxDepth)); err != nil {
		t.Errorf("depth %d merged: %v", MaxDepth, err)
	}
	for name, c := range map[string]struct {
		target, patch map[string]any
		field         string
	}{
		"patch object":   {nil, deepMap(MaxDepth + 1), "body" + strings.Repeat(".k", MaxDepth)},
		"patch array":    {map[string]any{"a": 1}, map[string]any{"p": deepArray(MaxDepth)}, "body.p" + strings.Repeat("[0]", MaxDepth-1)},
		"merged":         {deepMap(MaxDepth), deepMap(MaxDepth + 1), "body" + strings.Repeat(".k", MaxDepth)},
		"kept in target": {map[string]any{"t": deepMap(MaxDepth)}, map[string]any{"p": 1}, "body.t" + strings.Repeat(".k", MaxDepth-1)},
	} {
		got, err := MergePatch(c.target, c.patch)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, %v; want *Error", name, got, err)
			continue
		}
		if got != nil || e.Field != c.field || !strings.Contains(e.Message, "33 deep") {
			t.Errorf("%s: got %v, %+v; want Field %q", name, got, e, c.field)
		}
	}
}

func BenchmarkMergePatch(b *testing.B) {
	target := mustParse(b, `{"name":"Widget","price":12.5,"qty":3,"tags":["a","b","c"],"dims":{"w":10,"h":20,"d":0.5},"active":true}`)
	patch := mustParse(b, `{"price":13,"dims":{"d":null},"tags":["x"]}`)
	for b.Loop() {
		if _, err := MergePatch(target, patch); err != nil {
			b.Fatal(err)
		}
	}
}

package doc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{}`,
	`{"a":1}`,
	`{"_id":"x1","_version":3,"a":{"b":[1,2.5,"s",null,true,{"c":-0}]}}`,
	`{"a":{"b":null},"c":null}`,
	`{"n":[1e3,1.0,9223372036854775808,-9223372036854775809,1e308,1e-400,5e-324]}`,
	`{"s":"\ud83d\ude00\u00e9\\\"\/\b\f\n\r\t\u0000<>&\u2028"}`,
	`{"$a":1}`,
	`{"a.b":1}`,
	`{"_x":1}`,
	`{"a":"\ud800"}`,
	"{\"a\":\"\xff\"}",
	`{"a":1e400}`,
	`{} {}`,
	`[1]`,
	`{"a":1,"b":{"c":2,"d":[{"e":3}]}}`,
	`{"a":1,"a":2,"a":3,"a":4,"a":5,"a":6}`,
	`{"_id":"x","_version":1,"a":1,"b":2,"c":3}`,
	`{"s":"0123456789012345678901234567890123456789"}`,
	`{"a":[1,2,3],"b":[]}`,
	`{ "a" : [ [ ] , [ 1 , [ 2 , { "c" : [ ] } ] ] ] , "d" : "[,]:" }`,
	`{"_version":[1,2,3,4],"a":1}`,
	`{"a":[1],"a":[1,2,3,4,5]}`,
	`{"\u005fid":"x","_version":1,"a":[1,2]}`,
	nested(MaxDepth, "", true),
	nested(MaxDepth+1, "[", false),
}

func FuzzParseBody(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, id, err := ParseBody(data, Limits{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Message == "" || e.Field == "" {
				t.Fatalf("error %#v is not a complete *Error", err)
			}
			if body != nil || id != "" {
				t.Fatalf("returned %v, %q with error %v", body, id, err)
			}
			return
		}
		if body == nil {
			t.Fatal("accepted with a nil body")
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if id != "" && ValidID(id) != nil {
			t.Fatalf("accepted invalid id %q", id)
		}
		for _, k := range []string{"_id", "_version"} {
			if _, ok := body[k]; ok {
				t.Fatalf("body still has %s", k)
			}
		}
		checkRoundTrip(t, data)
		checkLimits(t, data, body)

		// The same text is a valid patch.
		patch, pid, err := ParsePatch(data, Limits{})
		if err != nil || pid != id || !reflect.DeepEqual(patch, body) {
			t.Fatalf("ParsePatch disagrees with ParseBody: %#v, %q, %v", patch, pid, err)
		}
	})
}

// checkLimits checks, for a body that parses without limits, what parsing
// it with small ones does: refused exactly when it is over them (or, for
// fields, when its text alone has more than the limit and the two reserved
// keys), else the same document; that Measure counts its compact JSON and
// its fields exactly; and that the count of fields off the text is exact.
func checkLimits(t *testing.T, data []byte, body map[string]any) {
	t.Helper()
	size := Measure(body)
	enc := compactJSON(t, body)
	if size.Bytes != len(enc) {
		t.Fatalf("Measure says %d bytes, the compact JSON %s is %d", size.Bytes, enc, len(enc))
	}
	if want := tokenFields(t, enc); size.Fields != want {
		t.Fatalf("Measure says %d fields, the compact JSON %s has %d", size.Fields, enc, want)
	}
	text := tokenFields(t, data)
	if got := countFields(data); got != text {
		t.Fatalf("countFields says %d fields, the text %q has %d", got, data, text)
	}
	for _, lim := range []Limits{{MaxFields: 3, MaxBytes: 40}, {MaxFields: max(size.Fields, 1)}} {
		limited, _, err := ParseBody(data, lim)
		var le *LimitError
		switch {
		case err == nil:
			if size.Fields > lim.MaxFields || lim.MaxBytes > 0 && size.Bytes > lim.MaxBytes || !reflect.DeepEqual(limited, body) {
				t.Fatalf("accepted %+v with limits %+v", size, lim)
			}
		case !errors.As(err, &le):
			t.Fatalf("with limits %+v: %v, without: accepted", lim, err)
		case le.Fields && size.Fields <= lim.MaxFields && text <= lim.MaxFields+2,
			!le.Fields && size.Bytes <= lim.MaxBytes:
			// The text's fields are the document's, the reserved keys
			// and what is not stored (repeated keys, _version's value):
			// only the last may take it past the limit and the margin.
			t.Fatalf("refused %+v (%v) with limits %+v; the text has %d fields", size, err, lim, text)
		}
	}
}

// tokenFields counts the object keys and array elements of the JSON text
// data, repeated keys included, from encoding/json's tokens.
func tokenFields(t *testing.T, data []byte) int {
	t.Helper()
	type frame struct{ array, wantKey bool }
	var stack []frame
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("tokens of %q: %v", data, err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && !stack[len(stack)-1].array {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			switch {
			case top.array:
				n++ // an element
			case top.wantKey:
				n++ // a key
				top.wantKey = false
				continue
			default:
				// A value; a key may follow it (a container's value
				// ends when it closes, and its parent is not consulted
				// before).
				top.wantKey = true
			}
		}
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, frame{array: d == '[', wantKey: d == '{'})
		}
	}
}

func FuzzMergePatch(f *testing.F) {
	for _, c := range rfcExamples {
		f.Add([]byte(c.target), []byte(c.patch))
	}
	f.Add([]byte(`{"a":{"b":{"c":[1]}},"d":null}`), []byte(`{"a":{"b":{"c":null,"e":{"f":null}}},"d":{"g":1}}`))
	f.Add([]byte(nested(MaxDepth, "{", false)), []byte(nested(MaxDepth, "", true)))
	f.Fuzz(func(t *testing.T, targetJSON, patchJSON []byte) {
		target, _, err := ParseBody(targetJSON, Limits{})
		if err != nil {
			return
		}
		patch, _, err := ParsePatch(patchJSON, Limits{})
		if err != nil {
			return
		}
		targetCopy, patchCopy := deepCopy(target), deepCopy(patch)

		got, err := MergePatch(target, patch)
		if err != nil {
			// Paths are preserved, so valid inputs cannot merge too deep.
			t.Fatalf("MergePatch: %v", err)
		}
		if !reflect.DeepEqual(target, targetCopy) {
			t.Fatal("MergePatch modified target")
		}
		if !reflect.DeepEqual(patch, patchCopy) {
			t.Fatal("MergePatch modified patch")
		}
		checkMerged(t, target, patch, got)
		if size, enc := Measure(got), compactJSON(t, got); size.Bytes != len(enc) {
			t.Fatalf("Measure of the merged document says %d bytes, its compact JSON %s is %d", size.Bytes, enc, len(enc))
		}

		again, err := MergePatch(got, patch)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("MergePatch is not idempotent: %#v then %#v (%v)", got, again, err)
		}

		// The result is again a valid document.
		enc, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		reparsed, _, err := ParseBody(enc, Limits{})
		if err != nil || !reflect.DeepEqual(reparsed, got) {
			t.Fatalf("merged document %s does not parse back: %v", enc, err)
		}
	})
}

// checkMerged checks got against the definition of RFC 7396.
func checkMerged(t *testing.T, target, patch, got map[string]any) {
	t.Helper()
	for k, tv := range target {
		if _, ok := patch[k]; ok {
			continue
		}
		if gv, ok := got[k]; !ok || !reflect.DeepEqual(gv, tv) {
			t.Fatalf("field %q not in patch changed from %#v to %#v", k, tv, gv)
		}
	}
	for k, pv := range patch {
		gv, ok := got[k]
		switch pv := pv.(type) {
		case nil:
			if ok {
				t.Fatalf("field %q patched with null is still present", k)
			}
		case map[string]any:
			gm, isMap := gv.(map[string]any)
			if !isMap {
				t.Fatalf("field %q patched with an object is %#v", k, gv)
			}
			tm, _ := target[k].(map[string]any)
			checkMerged(t, tm, pv, gm)
		default:
			if !ok || !reflect.DeepEqual(gv, pv) {
				t.Fatalf("field %q is %#v, want %#v", k, gv, pv)
			}
		}
	}
	for k := range got {
		_, inT := target[k]
		_, inP := patch[k]
		if !inT && !inP {
			t.Fatalf("field %q came from nowhere", k)
		}
	}
}

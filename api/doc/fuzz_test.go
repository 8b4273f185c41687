package doc

import (
	"encoding/json"
	"errors"
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
	nested(MaxDepth, "", true),
	nested(MaxDepth+1, "[", false),
}

func FuzzParseBody(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, id, err := ParseBody(data)
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

		// The same text is a valid patch.
		patch, pid, err := ParsePatch(data)
		if err != nil || pid != id || !reflect.DeepEqual(patch, body) {
			t.Fatalf("ParsePatch disagrees with ParseBody: %#v, %q, %v", patch, pid, err)
		}
	})
}

func FuzzMergePatch(f *testing.F) {
	for _, c := range rfcExamples {
		f.Add([]byte(c.target), []byte(c.patch))
	}
	f.Add([]byte(`{"a":{"b":{"c":[1]}},"d":null}`), []byte(`{"a":{"b":{"c":null,"e":{"f":null}}},"d":{"g":1}}`))
	f.Add([]byte(nested(MaxDepth, "{", false)), []byte(nested(MaxDepth, "", true)))
	f.Fuzz(func(t *testing.T, targetJSON, patchJSON []byte) {
		target, _, err := ParseBody(targetJSON)
		if err != nil {
			return
		}
		patch, _, err := ParsePatch(patchJSON)
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

		again, err := MergePatch(got, patch)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("MergePatch is not idempotent: %#v then %#v (%v)", got, again, err)
		}

		// The result is again a valid document.
		enc, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		reparsed, _, err := ParseBody(enc)
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

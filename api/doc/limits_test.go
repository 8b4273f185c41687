package doc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// compactJSON is a document as Measure counts it: compact JSON as
// json.Encoder writes it without HTML escaping, less the newline.
func compactJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func TestMeasureCountsFieldsAndCompactJSON(t *testing.T) {
	cases := []struct {
		in     string
		fields int
	}{
		{`{}`, 0},
		{`{"a":1}`, 1},
		{`{"a":[]}`, 1},
		{`{"a":[7]}`, 2},
		// keys a b c d e f g, elements {"e":1} {"f":..} {"g":null}
		{`{"a":{"b":{"c":{}}},"d":[{"e":1},{"f":[{"g":null}]}]}`, 10},
		// a, its 9 elements, the [] inside [[]]
		{`{"a":[[],{},[[]],"",0,-1,true,false,null]}`, 11},
		{`{"s":"\"\\\/\b\f\n\r\t\u0000\u001f\u007f<>&\u2028\u2029\ud83d\ude00é"}`, 1},
		{`{"k\n\u2028<":"v"}`, 1},
		{`{"f":[0.1,-2.5,1e21,1e20,1e-6,1e-7,1.5e-7,123456.789,1e300,5e-324,-1e-10,9223372036854775808]}`, 13},
		{`{"i":[0,-0,9223372036854775807,-9223372036854775808,1e3,10]}`, 7},
		{`{"m":[[1,2],[3,[4,5,[]]],{"x":[6]}]}`, 13},
	}
	for _, c := range cases {
		body, _, err := ParseBody([]byte(c.in), Limits{})
		if err != nil {
			t.Fatalf("ParseBody(%s): %v", c.in, err)
		}
		got := Measure(body)
		if want := len(compactJSON(t, body)); got.Bytes != want || got.Fields != c.fields {
			t.Errorf("Measure(%s) = %+v, want %d fields and %d bytes (%s)", c.in, got, c.fields, want, compactJSON(t, body))
		}
	}
	// Values from elsewhere than ParseBody (a store decodes into the same
	// model, but nil containers can occur) measure as encoding/json writes them.
	for _, v := range []map[string]any{nil, {"a": []any(nil), "b": map[string]any(nil)}, {"c": []string{"x"}, "d": 3}} {
		if got, want := Measure(v).Bytes, len(compactJSON(t, v)); got != want {
			t.Errorf("Measure(%#v).Bytes = %d, want %d", v, got, want)
		}
	}
}

// flatBody is a JSON object of n keys.
func flatBody(n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	b.WriteString("}")
	return []byte(b.String())
}

func TestParseBodyFieldLimit(t *testing.T) {
	lim := Limits{MaxFields: 4}
	for _, ok := range []string{
		`{"a":1,"b":{"c":[{}]}}`,
		`{"_id":"x","_version":7,"a":1,"b":2,"c":3,"d":4}`, // the reserved keys are not stored
		`{"a":"1:2:3:4:5:6","b":"\":\":\":"}`,              // colons in strings are no keys
	} {
		if _, _, err := ParseBody([]byte(ok), lim); err != nil {
			t.Errorf("ParseBody(%s) with %d fields allowed: %v", ok, lim.MaxFields, err)
		}
	}
	for _, c := range []struct {
		in   string
		have int
	}{
		{`{"a":1,"b":2,"c":3,"d":4,"e":5}`, 5},
		{`{"a":{"b":{"c":{"d":{"e":{}}}}}}`, 5},
		{`{"a":[{"b":1},{"c":1},{"d":1},{"e":1}]}`, 5},
		{`{"_id":"x","a":1,"b":2,"c":3,"d":4,"e":5}`, 5},
	} {
		_, _, err := ParseBody([]byte(c.in), lim)
		var le *LimitError
		if !errors.As(err, &le) || !le.Fields || le.Max != 4 || le.Have < c.have {
			t.Errorf("ParseBody(%s) with %d fields allowed: %v (%#v), want a field LimitError for at least %d fields", c.in, lim.MaxFields, err, le, c.have)
		}
	}
	// Array elements are fields as keys are, at every depth.
	for _, c := range []struct {
		in   string
		have int
	}{
		{`{"a":[1,2,3,4]}`, 5},
		{`{"a":[[],[],[],[]]}`, 5},
		{`{"a":[[[[1]]]]}`, 5},
		{`{"a":[{"b":1},{"c":2}]}`, 5},
		{`{"a":1,"b":2,"c":[3,4]}`, 5},
		{`{"_id":"x","_version":2,"a":[1,2,3,4]}`, 5},
	} {
		_, _, err := ParseBody([]byte(c.in), lim)
		var le *LimitError
		if !errors.As(err, &le) || !le.Fields || le.Max != 4 || le.Have < c.have {
			t.Errorf("ParseBody(%s) with %d fields allowed: %v (%#v), want a field LimitError for at least %d fields", c.in, lim.MaxFields, err, le, c.have)
		}
	}
	for _, ok := range []string{
		`{"a":[1,2,3]}`,
		`{"a":[[[]]]}`,
		`{"a":[{}],"b":[]}`,
		`{"_id":"x","_version":7,"a":[1,2],"b":[]}`, // the reserved keys are not stored
		`{"a":"[1,2,3,4,5]","b":[",,,,[,]"]}`,       // nor are commas or brackets in strings
		`{ "a" : [ 1 , 2 , [ ] ] }`,
	} {
		if _, _, err := ParseBody([]byte(ok), lim); err != nil {
			t.Errorf("ParseBody(%s) with %d fields allowed: %v", ok, lim.MaxFields, err)
		}
	}
	// A patch counts its fields the same way, nulls included.
	if _, _, err := ParsePatch([]byte(`{"a":null,"b":null,"c":{"d":null,"e":null}}`), lim); !errors.As(err, new(*LimitError)) {
		t.Errorf("ParsePatch of 5 fields with 4 allowed: %v", err)
	}
	// Malformed JSON is malformed, however many colons it has.
	if _, _, err := ParseBody([]byte(`{"a":1,`+strings.Repeat(`"b":`, 10)), lim); !errors.As(err, new(*Error)) {
		t.Errorf("malformed body with many colons: %v, want an *Error", err)
	}
}

// A hostile body is refused before it is built: the field count is read off
// the text, so refusing 100,000 fields allocates next to nothing.
func TestParseBodyRefusesTooManyFieldsWithoutBuildingThem(t *testing.T) {
	array := []byte(`{"a":[` + strings.Repeat(`1,`, 99_999) + `1]}`)
	for what, data := range map[string][]byte{"100,000 keys": flatBody(100_000), "an array of 100,000 numbers": array} {
		lim := Limits{MaxFields: 10_000}
		allocs := testing.AllocsPerRun(5, func() {
			if _, _, err := ParseBody(data, lim); !errors.As(err, new(*LimitError)) {
				t.Fatalf("%s with 10,000 fields allowed: %v", what, err)
			}
		})
		built := testing.AllocsPerRun(1, func() { ParseBody(data, Limits{}) })
		if allocs > 20 {
			t.Fatalf("refusing %s took %.0f allocations (building them takes %.0f): the body was decoded first", what, allocs, built)
		}
	}
}

func TestParseBodyByteLimit(t *testing.T) {
	lim := Limits{MaxBytes: 20}
	// The limit is on the document as compact JSON, not on the body's text.
	if _, _, err := ParseBody([]byte(`{ "s" :  "0123456789ab" ,"_id":"some-long-id"}`), lim); err != nil {
		t.Errorf("a 20-byte document in a longer body: %v", err)
	}
	_, _, err := ParseBody([]byte(`{"s":"0123456789abc"}`), lim)
	var le *LimitError
	if !errors.As(err, &le) || le.Fields || le.Have != 21 || le.Max != 20 {
		t.Errorf("a 21-byte document with 20 allowed: %v (%#v)", err, le)
	}
	// A patch's own size is not limited: the document it makes is
	// (Limits.Check after MergePatch).
	if _, _, err := ParsePatch([]byte(`{"s":"0123456789abcdefghijklmnopqrstuvwxyz"}`), lim); err != nil {
		t.Errorf("ParsePatch with a byte limit: %v", err)
	}
}

func TestLimitsCheck(t *testing.T) {
	body := map[string]any{"a": map[string]any{"b": int64(1)}, "c": "xyz"}
	size, err := Limits{MaxFields: 3, MaxBytes: 23}.Check(body)
	if err != nil || size != (Size{Fields: 3, Bytes: 23}) {
		t.Fatalf("Check at the limits: %+v, %v", size, err)
	}
	if _, err := (Limits{MaxFields: 2}).Check(body); !errors.As(err, new(*LimitError)) {
		t.Errorf("Check over MaxFields: %v", err)
	}
	if _, err := (Limits{MaxBytes: 22}).Check(body); !errors.As(err, new(*LimitError)) {
		t.Errorf("Check over MaxBytes: %v", err)
	}
}

package doc

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// nested returns a JSON object whose depth, counting the top-level object as
// 1, is depth; inner levels alternate between arrays and objects when mixed
// is set, and are otherwise all open (one of "[" or "{").
func nested(depth int, open string, mixed bool) string {
	var b, end strings.Builder
	b.WriteString(`{"x":`)
	closers := []string{"}"}
	for d := 2; d <= depth; d++ {
		o := open
		if mixed && d%2 == 0 {
			o = "["
		} else if mixed {
			o = "{"
		}
		if o == "[" {
			b.WriteString("[")
			closers = append(closers, "]")
		} else {
			b.WriteString(`{"x":`)
			closers = append(closers, "}")
		}
	}
	b.WriteString("1")
	for i := len(closers) - 1; i >= 0; i-- {
		end.WriteString(closers[i])
	}
	return b.String() + end.String()
}

func TestParseBodyAccepts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]any
		id   string
	}{
		{`{}`, map[string]any{}, ""},
		{" \t\r\n{}\n\t \r", map[string]any{}, ""},
		{`{"a":1}`, map[string]any{"a": int64(1)}, ""},
		{`{"s":"x","t":true,"f":false,"n":null,"arr":[1,"a",null,[],{}],"o":{"p":{"q":-2}}}`, map[string]any{
			"s": "x", "t": true, "f": false, "n": nil,
			"arr": []any{int64(1), "a", nil, []any{}, map[string]any{}},
			"o":   map[string]any{"p": map[string]any{"q": int64(-2)}},
		}, ""},
		{`{"_id":"abc","a":1}`, map[string]any{"a": int64(1)}, "abc"},
		{`{"_id":"a.b_c~d-e","_version":7}`, map[string]any{}, "a.b_c~d-e"},
		{`{"_version":{"$weird.key":[1]},"a":"b"}`, map[string]any{"a": "b"}, ""},
		{`{"a":{"_nested":1,"b$":2,"c\u00e9":3}}`, map[string]any{"a": map[string]any{"_nested": int64(1), "b$": int64(2), "cé": int64(3)}}, ""},
		{`{"":1}`, map[string]any{"": int64(1)}, ""},
		{`{"emoji":"😀 \ud83d\ude00","esc":"\"\\\/\b\f\n\r\t","nul":"a\u0000b"}`, map[string]any{
			"emoji": "😀 😀", "esc": "\"\\/\b\f\n\r\t", "nul": "a\x00b",
		}, ""},
		{`{"a":"\ufffd\uFFFD"}`, map[string]any{"a": "\ufffd\ufffd"}, ""},
		{`{"a":"\\ud800"}`, map[string]any{"a": `\ud800`}, ""},
		{`{"a":1,"a":2}`, map[string]any{"a": int64(2)}, ""},
		{nested(MaxDepth, "{", false), nil, ""},
		{nested(MaxDepth, "[", false), nil, ""},
		{nested(MaxDepth, "", true), nil, ""},
	} {
		body, id, err := ParseBody([]byte(c.in), Limits{})
		if err != nil {
			t.Errorf("ParseBody(%.60s, Limits{}): %v", c.in, err)
			continue
		}
		if id != c.id {
			t.Errorf("ParseBody(%.60s, Limits{}): id %q, want %q", c.in, id, c.id)
		}
		if c.want != nil && !reflect.DeepEqual(body, c.want) {
			t.Errorf("ParseBody(%.60s, Limits{}) = %#v, want %#v", c.in, body, c.want)
		}
	}
}

func TestParseBodyNumbers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
	}{
		{"0", int64(0)},
		{"-0", int64(0)},
		{"1", int64(1)},
		{"-1", int64(-1)},
		{"9223372036854775807", int64(math.MaxInt64)},
		{"-9223372036854775808", int64(math.MinInt64)},
		{"9223372036854775808", float64(9223372036854775808)},
		{"-9223372036854775809", int64(math.MinInt64)}, // rounds to the float64 -2^63, which is an int64
		{"18446744073709551616", float64(18446744073709551616)},
		{"1.5", 1.5},
		{"-0.25", -0.25},
		{"1e-7", 1e-7},
		{"1.7976931348623157e308", math.MaxFloat64},
		{"5e-324", 5e-324},
		// Integral values are int64 whatever the spelling.
		{"1e3", int64(1000)},
		{"1E+3", int64(1000)},
		{"1.0", int64(1)},
		{"-0.0", int64(0)},
		{"2.5e1", int64(25)},
		{"1e18", int64(1e18)},
		{"1e19", float64(1e19)},
		{"9007199254740993.0", int64(9007199254740992)}, // rounded to float64 first
		{"1e-400", int64(0)},                            // underflows to 0
	} {
		body, _, err := ParseBody([]byte(`{"n":`+c.in+`}`), Limits{})
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got := body["n"]; got != c.want {
			t.Errorf("%s: got %#v (%T), want %#v (%T)", c.in, got, got, c.want, c.want)
		}
	}
	// Numbers inside arrays are converted too.
	body, _, err := ParseBody([]byte(`{"a":[1,1.5,[2]]}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{int64(1), 1.5, []any{int64(2)}}; !reflect.DeepEqual(body["a"], want) {
		t.Errorf("got %#v, want %#v", body["a"], want)
	}
}

func TestParseBodyRejects(t *testing.T) {
	for _, c := range []struct {
		in, field, msg string
	}{
		// Not an object.
		{``, "body", "empty"},
		{"  \n", "body", "empty"},
		{`[]`, "body", "not an array"},
		{`[{"a":1}]`, "body", "not an array"},
		{`"s"`, "body", "not a string"},
		{`null`, "body", "not null"},
		{`1`, "body", "not a number"},
		{`-1.5e3`, "body", "not a number"},
		{`true`, "body", "not a boolean"},
		// Trailing data.
		{`{}{}`, "body", "more data follows it at byte offset 2"},
		{`{} {"a":1}`, "body", "more data follows"},
		{`{}x`, "body", "more data follows"},
		{`{} 1`, "body", "more data follows"},
		{"{}\x00", "body", "more data follows"},
		// Invalid JSON.
		{`{`, "body", "not valid JSON"},
		{`{"a":}`, "body", "not valid JSON"},
		{`{"a":1,}`, "body", "not valid JSON"},
		{`{'a':1}`, "body", "not valid JSON"},
		{`{a:1}`, "body", "not valid JSON"},
		{`{"a":01}`, "body", "not valid JSON"},
		{`{"a":NaN}`, "body", "not valid JSON"},
		{`{"a":"\x"}`, "body", "not valid JSON"},
		{"{\"a\":\"\x01\"}", "body", "not valid JSON"},
		{"\ufeff{}", "body", "not valid JSON"},
		{strings.Repeat("[", 20000), "body", "more than 32 deep"},
		// Keys.
		{`{"$set":1}`, "body.$set", "may not start with '$'"},
		{`{"a":{"$b":1}}`, "body.a.$b", "may not start with '$'"},
		{`{"a":[{"$b":1}]}`, "body.a[0].$b", "may not start with '$'"},
		{`{"a.b":1}`, `body["a.b"]`, "may not contain '.'"},
		{`{"x":{"a.":1}}`, `body.x["a."]`, "may not contain '.'"},
		{`{".":1}`, `body["."]`, "may not contain '.'"},
		{`{"a\u0000b":1}`, `body["a\x00b"]`, "NUL"},
		{`{"o":{"\u0000":1}}`, `body.o["\x00"]`, "NUL"},
		// Reserved top-level keys.
		{`{"_rev":1}`, "body._rev", "reserved"},
		{`{"_":1}`, "body._", "reserved"},
		{`{"_ID":"a"}`, "body._ID", "reserved"},
		{`{"_versions":1}`, "body._versions", "reserved"},
		// _id.
		{`{"_id":1}`, "body._id", "must be a string, not a number"},
		{`{"_id":null}`, "body._id", "must be a string, not null"},
		{`{"_id":["a"]}`, "body._id", "not an array"},
		{`{"_id":{"a":1}}`, "body._id", "not an object"},
		{`{"_id":true}`, "body._id", "not a boolean"},
		{`{"_id":""}`, "body._id", "document id is empty"},
		{`{"_id":"a/b"}`, "body._id", "may not contain '/'"},
		{`{"_id":".."}`, "body._id", `".."`},
		{`{"_id":"` + strings.Repeat("a", 129) + `"}`, "body._id", "maximum of 128"},
		// Depth.
		{nested(MaxDepth+1, "{", false), "body" + strings.Repeat(".x", MaxDepth), "33 deep"},
		{nested(MaxDepth+1, "[", false), "body.x" + strings.Repeat("[0]", MaxDepth-1), "33 deep"},
		{nested(MaxDepth+1, "", true), "", "33 deep"},
		{nested(100, "[", false), "", "33 deep"},
		// Invalid UTF-8 and unpaired surrogates.
		{"{\"a\":\"\xff\"}", "body", "byte 0xff at byte offset 6"},
		{"{\"\xc3\":1}", "body", "not valid UTF-8"},
		{"{\"a\":\"\xed\xa0\x80\"}", "body", "not valid UTF-8"}, // UTF-8-encoded surrogate
		{"{\"a\":\"\xc0\xaf\"}", "body", "not valid UTF-8"},     // overlong
		{`{"a":"\ud800"}`, "body", `\ud800 at byte offset 6`},
		{`{"a":"\uDBFFx"}`, "body", "unpaired"},
		{`{"a":"\udc00"}`, "body", "unpaired"},
		{`{"a":"\ud83d\u0041"}`, "body", "unpaired"},
		{`{"a":"\ud83d\ud83d"}`, "body", "unpaired"},
		{`{"a":"\ude00\ud83d"}`, "body", "unpaired"},
		{`{"\ud800":1}`, "body", "unpaired"},
		{`{"a":"\\\ud800"}`, "body", "unpaired"},
		// Numbers out of range.
		{`{"n":1e400}`, "body.n", "1e400 is too large"},
		{`{"n":-1e400}`, "body.n", "too large"},
		{`{"a":[0,{"n":[1e309]}]}`, "body.a[1].n[0]", "too large"},
		{`{"n":1` + strings.Repeat("0", 400) + `}`, "body.n", "..."},
	} {
		body, id, err := ParseBody([]byte(c.in), Limits{})
		if err == nil {
			t.Errorf("ParseBody(%.60q, Limits{}) = %v, %q; want error", c.in, body, id)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("ParseBody(%.60q, Limits{}): error %T is not *Error", c.in, err)
			continue
		}
		if body != nil || id != "" {
			t.Errorf("ParseBody(%.60q, Limits{}): returned %v, %q with an error", c.in, body, id)
		}
		if c.field != "" && e.Field != c.field {
			t.Errorf("ParseBody(%.60q, Limits{}): Field %q, want %q (message %q)", c.in, e.Field, c.field, e.Message)
		}
		if !strings.Contains(e.Message, c.msg) {
			t.Errorf("ParseBody(%.60q, Limits{}): Message %q does not contain %q", c.in, e.Message, c.msg)
		}
	}
}

func TestParseBodyLongKeyInField(t *testing.T) {
	long := strings.Repeat("k", 1000)
	_, _, err := ParseBody([]byte(`{"`+long+`":{"$x":1}}`), Limits{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v", err)
	}
	if want := "body." + strings.Repeat("k", maxKeyInPath) + "....$x"; e.Field != want {
		t.Errorf("Field %q, want %q", e.Field, want)
	}
}

func TestParsePatch(t *testing.T) {
	patch, id, err := ParsePatch([]byte(`{"a":null,"b":{"c":null,"d":1.0},"_id":"doc1","_version":3}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if id != "doc1" {
		t.Errorf("id %q, want doc1", id)
	}
	want := map[string]any{"a": nil, "b": map[string]any{"c": nil, "d": int64(1)}}
	if !reflect.DeepEqual(patch, want) {
		t.Errorf("got %#v, want %#v", patch, want)
	}

	for _, c := range []struct{ in, field, msg string }{
		{`[]`, "body", "not an array"},
		{`null`, "body", "not null"},
		{`{} []`, "body", "single JSON merge patch"},
		{`{"$unset":{"a":1}}`, "body.$unset", "'$'"},
		{`{"a":{"b.c":null}}`, `body.a["b.c"]`, "'.'"},
		{`{"_meta":null}`, "body._meta", "reserved"},
		{`{"_id":null}`, "body._id", "cannot be removed"},
		{`{"_id":5}`, "body._id", "must be a string"},
		{`{"_id":"a b"}`, "body._id", "may not contain"},
		{nested(MaxDepth+1, "{", false), "", "33 deep"},
	} {
		_, _, err := ParsePatch([]byte(c.in), Limits{})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("ParsePatch(%.60q, Limits{}): got %v, want *Error", c.in, err)
			continue
		}
		if c.field != "" && e.Field != c.field {
			t.Errorf("ParsePatch(%.60q, Limits{}): Field %q, want %q", c.in, e.Field, c.field)
		}
		if !strings.Contains(e.Message, c.msg) {
			t.Errorf("ParsePatch(%.60q, Limits{}): Message %q does not contain %q", c.in, e.Message, c.msg)
		}
	}
}

// TestParseBodyRoundTrip checks the property the number rule exists for.
func TestParseBodyRoundTrip(t *testing.T) {
	in := `{"a":[1,1.0,1e3,1.5,-0.0,1e19,9223372036854775808,1e300,1e-300,5e-324,1e21,1e20,123456789012345678901234567890],"s":"<&>\u2028"}`
	checkRoundTrip(t, []byte(in))
}

func checkRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	body, _, err := ParseBody(data, Limits{})
	if err != nil {
		return
	}
	checkValueModel(t, body)
	enc, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("json.Marshal of accepted body %q: %v", data, err)
	}
	again, id, err := ParseBody(enc, Limits{})
	if err != nil {
		t.Fatalf("re-parsing %q (from %q): %v", enc, data, err)
	}
	if id != "" {
		t.Fatalf("re-parsing %q gave id %q", enc, id)
	}
	if !reflect.DeepEqual(body, again) {
		t.Fatalf("round trip of %q changed the body:\n%#v\n%#v", data, body, again)
	}
}

// checkValueModel fails unless v is made only of the types of the value model,
// with no float64 that could have been an int64.
func checkValueModel(t *testing.T, v any) {
	t.Helper()
	switch x := v.(type) {
	case nil, bool, int64, string:
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			t.Fatalf("non-finite float %v", x)
		}
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			t.Fatalf("float64 %v should have been an int64", x)
		}
	case []any:
		for _, e := range x {
			checkValueModel(t, e)
		}
	case map[string]any:
		for _, e := range x {
			checkValueModel(t, e)
		}
	default:
		t.Fatalf("value %#v of type %T is outside the value model", v, v)
	}
}

func BenchmarkParseBody(b *testing.B) {
	data := []byte(`{"_id":"01HV6ZQ3K7XK4J3M2N1P0R9S8T","name":"Widget","price":12.5,"qty":3,` +
		`"tags":["a","b","c"],"dims":{"w":10,"h":20,"d":0.5},"active":true,"notes":null,` +
		`"history":[{"at":"2024-01-01T00:00:00Z","by":"alice","delta":-1},{"at":"2024-01-02T00:00:00Z","by":"bob","delta":2}]}`)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := ParseBody(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

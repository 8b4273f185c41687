package doc

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkAgrees fails when decodeObject takes data and makes of it anything
// other than encoding/json does.
func checkAgrees(t *testing.T, data []byte) (taken bool) {
	t.Helper()
	if !utf8.Valid(data) {
		return false // the caller checks it first
	}
	fast, ok := decodeObject(data)
	if !ok {
		return false
	}
	slow, err := decodeSlowly(data, "document")
	if err != nil {
		t.Fatalf("decodeObject took %q, which encoding/json refuses (%v), as %#v", data, err, fast)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("decodeObject made %#v of %q, encoding/json %#v", fast, data, slow)
	}
	return true
}

// decodeObject takes what it should, and makes of it exactly what
// encoding/json makes; what it leaves, ParseBody hands to encoding/json.
func TestTheFastDecoderAgreesWithEncodingJSON(t *testing.T) {
	taken := []string{
		`{}`,
		` { } `,
		`{"payload":"` + strings.Repeat("x", 1000) + `"}`,
		`{"a":1,"b":-0,"c":1.5e-3,"d":12345678901234567890,"e":-1E+2,"f":0.0}`,
		`{"a":true,"b":false,"c":null,"d":[],"e":{},"f":[1,"two",[3],{"four":4}]}`,
		`{"a":1,"a":2}`,
		`{"s":"tab\tescaped \" \\ \/ \b\f\n\r\t \u00e9 \u2028 \u0000"}`,
		"{\"\u00e9\":\"\u65e5\u672c\"}",
		"{\n\t\"a\" :\r\n [ 1 , 2 ]\n}\n",
		nested(MaxDepth, "", true),
	}
	for _, s := range taken {
		if !checkAgrees(t, []byte(s)) {
			t.Errorf("decodeObject left %.80q to encoding/json", s)
		}
	}
	left := []string{
		``, ` `, `[]`, `"s"`, `1`, `null`, `{} {}`, `{}x`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":truex}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":"unterminated}`, `{a:1}`, `{"a":[1 2]}`,
		`{"s":"\ud83d\ude00"}`, `{"s":"\ud800"}`, `{"s":"\udc00"}`,
		nested(MaxDepth+1, "[", false), nested(MaxDepth+1, "", true),
	}
	for _, s := range left {
		if _, ok := decodeObject([]byte(s)); ok {
			t.Errorf("decodeObject took %q", s)
		}
	}
	for _, s := range fuzzSeeds {
		checkAgrees(t, []byte(s))
	}
}

// Whatever decodeObject takes, it makes of it what encoding/json makes.
func FuzzTheFastDecoder(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgrees(t, data)
	})
}

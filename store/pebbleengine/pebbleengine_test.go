package pebbleengine

import (
	"math"
	"reflect"
	"testing"

	"github.com/shoal-db/shoal/store/engine/enginetest"
)

// The Pebble engine passes the engines' conformance suite.
func TestThePebbleEngineConforms(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) enginetest.Engine {
		e, err := Open(Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
		return e
	})
}

// A body reads back with its value types exactly: integers stay int64,
// floats float64, at their extremes too.
func TestABodyKeepsItsTypes(t *testing.T) {
	body := map[string]any{
		"min": int64(math.MinInt64), "max": int64(math.MaxInt64), "zero": int64(0), "neg": int64(-1),
		"tiny": math.SmallestNonzeroFloat64, "big": 1e300, "half": 0.5, "negzero": math.Copysign(0, -1),
		"s": "", "unicode": "ü\u0000x", "t": true, "f": false, "n": nil,
		"a": []any{}, "o": map[string]any{}, "deep": map[string]any{"l": []any{[]any{map[string]any{"k": int64(1)}}}},
	}
	enc, err := appendBody(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeBody(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, body) {
		t.Fatalf("read back\n %#v\nwant\n %#v", got, body)
	}
	if again, _ := appendBody(nil, got); string(again) != string(enc) {
		t.Fatal("the same body encoded twice differs")
	}
	for i := range enc {
		if _, err := decodeBody(enc[:i]); err == nil {
			t.Fatalf("a body cut to %d of %d bytes decoded", i, len(enc))
		}
	}
	if _, err := appendBody(nil, map[string]any{"x": int32(1)}); err == nil {
		t.Fatal("an int32, which api/doc never makes, was encoded")
	}
}

// FuzzDecodeBody: no input makes the decoder panic or loop.
func FuzzDecodeBody(f *testing.F) {
	enc, _ := appendBody(nil, map[string]any{"a": []any{int64(1), "x", 2.5, nil, true}})
	f.Add(enc)
	f.Add([]byte{tagObject, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if body, err := decodeBody(b); err == nil {
			if _, err := appendBody(nil, body); err != nil {
				t.Fatalf("a decoded body does not encode: %v", err)
			}
		}
	})
}

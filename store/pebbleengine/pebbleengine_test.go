package pebbleengine

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/shoal-db/shoal/store/engine"
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
	widened, err := appendBody(nil, map[string]any{"i": 7, "i32": int32(-3), "f32": float32(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeBody(widened); err != nil || !reflect.DeepEqual(got, map[string]any{"i": int64(7), "i32": int64(-3), "f32": 0.5}) {
		t.Fatalf("int, int32 and float32 read back as %#v (%v), want int64 and float64", got, err)
	}
	if _, err := appendBody(nil, map[string]any{"x": struct{}{}}); err == nil {
		t.Fatal("a value no document holds was encoded")
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

// A call after Close answers ErrUnavailable instead of meeting a closed
// database (Pebble panics on one): a node's loops may still be stopping.
func TestACallAfterCloseIsRefused(t *testing.T) {
	e, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := e.Get(ctx, 0, "u/c/a"); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := e.SaveTenureLists(ctx, map[int]engine.TenureList{1: {Epoch: 1}}); !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("a save after Close: %v", err)
	}
}

package bodycodec_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/shoal-db/shoal/record/bodycodec"
)

// A body reads back with its value types exactly: integers stay int64,
// floats float64, at their extremes too.
func TestABodyKeepsItsTypes(t *testing.T) {
	body := map[string]any{
		"min": int64(math.MinInt64), "max": int64(math.MaxInt64), "zero": int64(0), "neg": int64(-1),
		"tiny": math.SmallestNonzeroFloat64, "big": 1e300, "half": 0.5, "negzero": math.Copysign(0, -1),
		"s": "", "unicode": "ü\u0000x", "t": true, "f": false, "n": nil,
		"a": []any{}, "o": map[string]any{}, "deep": map[string]any{"l": []any{[]any{map[string]any{"k": int64(1)}}}},
	}
	enc, err := bodycodec.Append(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bodycodec.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, body) {
		t.Fatalf("read back\n %#v\nwant\n %#v", got, body)
	}
	if again, _ := bodycodec.Append(nil, got); string(again) != string(enc) {
		t.Fatal("the same body encoded twice differs")
	}
	for i := range enc {
		if _, err := bodycodec.Decode(enc[:i]); err == nil {
			t.Fatalf("a body cut to %d of %d bytes decoded", i, len(enc))
		}
	}
	widened, err := bodycodec.Append(nil, map[string]any{"i": 7, "i32": int32(-3), "f32": float32(0.5)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bodycodec.Decode(widened); err != nil || !reflect.DeepEqual(got, map[string]any{"i": int64(7), "i32": int64(-3), "f32": 0.5}) {
		t.Fatalf("int, int32 and float32 read back as %#v (%v), want int64 and float64", got, err)
	}
	if _, err := bodycodec.Append(nil, map[string]any{"x": struct{}{}}); err == nil {
		t.Fatal("a value no document holds was encoded")
	}
}

// FuzzDecodeBody: no input makes the decoder panic or loop.
func FuzzDecodeBody(f *testing.F) {
	enc, _ := bodycodec.Append(nil, map[string]any{"a": []any{int64(1), "x", 2.5, nil, true}})
	f.Add(enc)
	f.Add([]byte{bodycodec.TagObject, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if body, err := bodycodec.Decode(b); err == nil {
			if _, err := bodycodec.Append(nil, body); err != nil {
				t.Fatalf("a decoded body does not encode: %v", err)
			}
		}
	})
}

// DecodePrefix reads one body and hands back the bytes after it; Decode
// refuses them.
func TestDecodePrefixLeavesWhatFollows(t *testing.T) {
	enc, err := bodycodec.Append(nil, map[string]any{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	enc = bodycodec.AppendString(enc, "after")
	body, rest, err := bodycodec.DecodePrefix(enc)
	if err != nil || !reflect.DeepEqual(body, map[string]any{"k": "v"}) {
		t.Fatalf("read %#v (%v)", body, err)
	}
	if s, rest, err := bodycodec.DecodeString(rest); err != nil || s != "after" || len(rest) != 0 {
		t.Fatalf("after the body: %q, %d bytes left (%v)", s, len(rest), err)
	}
	if _, err := bodycodec.Decode(enc); err == nil {
		t.Fatal("Decode took a body followed by more bytes")
	}
	if _, _, err := bodycodec.DecodePrefix([]byte{bodycodec.TagString, 1, 'x'}); err == nil {
		t.Fatal("a string decoded as a body")
	}
}

// A body's counts are bounded by the bytes that follow them, not by what
// the decoder allocates for them: nested containers that each claim 64 Ki
// elements made some 66 KB of input allocate 1.25 GB before failing (a
// signed replication request could stop a replica; found by a review).
// What decoding allocates stays in proportion to its input.
func TestDecodingAllocatesInProportionToTheInput(t *testing.T) {
	for _, tag := range []byte{bodycodec.TagObject, bodycodec.TagArray} {
		var b []byte
		for range 250 {
			b = append(b, tag)
			b = binary.AppendUvarint(b, 1<<16)
			if tag == bodycodec.TagObject {
				b = bodycodec.AppendString(b, "k")
			}
		}
		b = append(b, bytes.Repeat([]byte{0xff}, 1<<16+1024)...) // enough bytes after every count, and no value
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := bodycodec.Decode(b)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Fatal("a body of nothing but claimed elements decoded")
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 32*uint64(len(b)) {
			t.Errorf("tag %d: decoding %d bytes allocated %d", tag, len(b), got)
		}
	}
}

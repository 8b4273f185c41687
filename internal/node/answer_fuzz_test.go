package node

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/lease"
	"github.com/shoal-db/shoal/replicate"
)

// A peer's answer is one JSON value of bounded size: an endless answer is
// cut, and data after the value is refused.
func TestDecodeAnswerIsBounded(t *testing.T) {
	var ds []lease.Decision
	endless := io.MultiReader(strings.NewReader(`[{"granted":true,"record":{"holder":"`), neverEnding('x'))
	if err := decodeAnswer(endless, &ds); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("endless answer: %v", err)
	}
	if err := decodeAnswer(strings.NewReader(`[] [{"granted":true}]`), &ds); err == nil {
		t.Fatal("took an answer with a second value")
	}
	if err := decodeAnswer(strings.NewReader(` [{"granted":true}] `+"\n"), &ds); err != nil || len(ds) != 1 || !ds[0].Granted {
		t.Fatalf("a valid answer: %v %v", ds, err)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// FuzzDecodeAnswer: a peer's answer never panics; what is accepted is one
// JSON value, which re-encodes to an answer accepted as the same.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{`[{"granted":true,"record":{"partition":1,"holder":"a","epoch":2,"until":"2030-01-01T00:00:00Z"}}]`,
		`{"results":[{"p":1,"applied":{"epoch":1,"seq":2},"epoch":1,"code":"ok"}]}`, `[]`, `null`, `[] []`, `{`, ``, `[{"granted":"yes"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds []lease.Decision
		if decodeAnswer(bytes.NewReader(data), &ds) == nil {
			b, _ := json.Marshal(ds)
			var again []lease.Decision
			if err := decodeAnswer(bytes.NewReader(b), &again); err != nil || len(again) != len(ds) {
				t.Fatalf("decisions %s re-read as %v: %v", b, again, err)
			}
		}
		var resp replicate.Response
		if decodeAnswer(bytes.NewReader(data), &resp) == nil {
			b, _ := json.Marshal(resp)
			var again replicate.Response
			if err := decodeAnswer(bytes.NewReader(b), &again); err != nil || len(again.Results) != len(resp.Results) {
				t.Fatalf("response %s re-read as %v: %v", b, again, err)
			}
		}
	})
}

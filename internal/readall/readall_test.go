package readall

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// A body of the declared length is read whole in one allocation of that
// size; one longer or shorter than declared, or of no declared length,
// is read whole too, and a reader's error is returned.
func TestSizedReadsTheWholeBody(t *testing.T) {
	body := strings.Repeat("x", 20000)
	for _, declared := range []int64{20000, -1, 100, 30000, 0} {
		got, err := Sized(iotest.HalfReader(strings.NewReader(body)), declared)
		if err != nil || string(got) != body {
			t.Errorf("declared %d: read %d bytes, %v", declared, len(got), err)
		}
	}
	if allocs := testing.AllocsPerRun(20, func() {
		if _, err := Sized(bytes.NewReader([]byte(body)), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}); allocs > 3 {
		t.Errorf("a body of its declared length took %v allocations", allocs)
	}
	boom := iotest.ErrReader(io.ErrUnexpectedEOF)
	if _, err := Sized(boom, 10); err != io.ErrUnexpectedEOF {
		t.Errorf("a failing reader: %v", err)
	}
}

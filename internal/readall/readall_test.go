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

// A declared length is believed only as far as the body has come: a
// sender that declares a gigabyte and sends ten bytes makes no buffer
// of a gigabyte (one header made a node allocate whatever MAX_BODY_BYTES
// allowed; past its memory, the node died). A body that does come as
// long as declared is read whole, into room made for the rest at once.
func TestADeclaredLengthIsNotAllocatedBeforeTheBodyComes(t *testing.T) {
	got, err := Sized(strings.NewReader("0123456789"), 1<<30)
	if err != nil || string(got) != "0123456789" {
		t.Fatalf("read %q, %v", got, err)
	}
	if cap(got) > 2*Believed {
		t.Fatalf("10 bytes declared as 1 GiB were read into a buffer of %d bytes; want at most %d", cap(got), 2*Believed)
	}
	body := strings.Repeat("y", 3*Believed+7)
	got, err = Sized(iotest.HalfReader(strings.NewReader(body)), int64(len(body)))
	if err != nil || string(got) != body {
		t.Fatalf("a body of %d bytes: read %d bytes, %v", len(body), len(got), err)
	}
	// The rest comes into room made for it at once, not by doubling
	// (io.ReadAll's way, which this package replaces).
	if cap(got) > len(body)+Believed {
		t.Errorf("a body of %d bytes, as declared, was read into a buffer of %d", len(body), cap(got))
	}
}

package devcluster

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestPrefixWriterKeepsLinesWhole(t *testing.T) {
	var buf bytes.Buffer
	out := &lineOut{w: &buf}
	tail := &tailLines{}
	a := &prefixWriter{out: out, prefix: "node1 | ", tail: tail}
	b := &prefixWriter{out: out, prefix: "node22 | ", tail: &tailLines{}}
	var wg sync.WaitGroup
	for _, w := range []*prefixWriter{a, b} {
		wg.Go(func() {
			for i := range 200 {
				line := fmt.Sprintf("line %d of %s ends here\n", i, w.prefix[:5])
				for len(line) > 0 { // the child's writes arrive in arbitrary pieces
					n := min(len(line), 1+i%7)
					w.Write([]byte(line[:n]))
					line = line[n:]
				}
			}
		})
	}
	wg.Wait()
	a.Write([]byte("no newline at the end"))
	a.flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 401 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines[:400] {
		if !(strings.HasPrefix(l, "node1 | line ") && strings.HasSuffix(l, "of node1 ends here")) &&
			!(strings.HasPrefix(l, "node22 | line ") && strings.HasSuffix(l, "of node2 ends here")) {
			t.Fatalf("interleaved or partial line %q", l)
		}
	}
	if lines[400] != "node1 | no newline at the end" {
		t.Fatalf("last line %q", lines[400])
	}
	if got := tail.get(); len(got) != tailLineCount || got[len(got)-1] != "no newline at the end" {
		t.Fatalf("tail %q", got)
	}
}

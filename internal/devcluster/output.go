package devcluster

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"sync"
)

const (
	tailLineCount = 20       // lines of a node's output kept to show when it fails
	maxLineBytes  = 64 << 10 // a longer line without end is shown in pieces
)

// lineOut serialises whole lines onto one writer, so lines of different
// nodes never interleave.
type lineOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *lineOut) write(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	io.WriteString(o.w, text)
}

// tailLines keeps the last lines a node printed, to show when it fails.
type tailLines struct {
	mu    sync.Mutex
	lines []string
}

func (t *tailLines) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLineCount {
		t.lines = slices.Delete(t.lines, 0, len(t.lines)-tailLineCount)
	}
}

func (t *tailLines) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// prefixWriter is a child's stdout or stderr: it cuts what the child writes
// into lines and writes each whole line with the node's prefix.
type prefixWriter struct {
	mu     sync.Mutex
	out    *lineOut
	prefix string
	tail   *tailLines
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) >= maxLineBytes { // a line without end: show it rather than grow
		w.emit(w.buf)
		w.buf = nil
	}
	if len(w.buf) == 0 {
		w.buf = nil
	}
	return len(p), nil
}

// flush writes a last line the child did not end.
func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *prefixWriter) emit(line []byte) {
	s := strings.TrimSuffix(string(line), "\r")
	w.tail.add(s)
	w.out.write(w.prefix + s + "\n")
}

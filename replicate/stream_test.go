package replicate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

// Request frames read back as written, in order, and every change a third
// party could make to a stream is refused: a flipped byte, a frame
// replayed or left out, a frame sealed under another stream's key, a
// frame longer than the reader allows, a stream cut inside a frame.
func TestStreamFramesAreSealedInOrder(t *testing.T) {
	key, other := []byte("the stream's key"), []byte("another stream's key")
	frames := func(key []byte, requests ...string) [][]byte {
		s := NewStreamSealer(key)
		var out [][]byte
		for _, r := range requests {
			out = append(out, s.AppendFrame(nil, []byte(r)))
		}
		return out
	}
	read := func(max int, frames ...[]byte) ([]string, error) {
		o := NewStreamOpener(key, max)
		r := bufio.NewReader(bytes.NewReader(bytes.Join(frames, nil)))
		var got []string
		for {
			req, err := o.ReadFrame(r)
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			got = append(got, string(req))
		}
	}
	fs := frames(key, "first", "", "third")
	got, err := read(100, fs...)
	if err != nil || len(got) != 3 || got[0] != "first" || got[1] != "" || got[2] != "third" {
		t.Fatalf("read back %q, %v; want first, an empty request, third", got, err)
	}
	flipped := bytes.Clone(fs[0])
	flipped[6] ^= 1
	cut := bytes.Clone(fs[2])
	for name, stream := range map[string][][]byte{
		"a flipped byte":          {flipped},
		"a frame replayed":        {fs[0], fs[0]},
		"a frame left out":        {fs[0], fs[2]},
		"another stream's frame":  frames(other, "first"),
		"a frame cut short":       {fs[0], cut[:len(cut)-1]},
		"a frame longer than max": frames(key, string(make([]byte, 101))),
		"a length cut short":      {fs[0], fs[1][:2]},
	} {
		if _, err := read(100, stream...); !errors.Is(err, ErrStreamFrame) {
			t.Errorf("%s: %v, want ErrStreamFrame", name, err)
		}
	}
}

// Answer frames carry their kind and payload; a kind no replica writes,
// or a frame without one, is refused.
func TestAnswerFramesCarryTheirKind(t *testing.T) {
	stream := AppendAnswerFrame(nil, StreamAnswer, []byte("answer"))
	stream = AppendAnswerFrame(stream, StreamRefusal, []byte("why"))
	r := bufio.NewReader(bytes.NewReader(stream))
	for _, want := range []struct {
		kind    byte
		payload string
	}{{StreamAnswer, "answer"}, {StreamRefusal, "why"}} {
		kind, payload, err := ReadAnswerFrame(r)
		if err != nil || kind != want.kind || string(payload) != want.payload {
			t.Fatalf("read %d %q, %v; want %d %q", kind, payload, err, want.kind, want.payload)
		}
	}
	if _, _, err := ReadAnswerFrame(r); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	for name, frame := range map[string][]byte{
		"kind 7":      AppendAnswerFrame(nil, 7, []byte("x")),
		"no kind":     {0, 0, 0, 0},
		"cut short":   AppendAnswerFrame(nil, StreamAnswer, []byte("answer"))[:8],
		"over 32 MiB": {0x02, 0, 0, 2, 0},
	} {
		if _, _, err := ReadAnswerFrame(bufio.NewReader(bytes.NewReader(frame))); !errors.Is(err, ErrStreamFrame) {
			t.Errorf("%s: %v, want ErrStreamFrame", name, err)
		}
	}
}

// Answer frames on StreamProtocolSealed carry a MAC of their number, kind
// and answer under the stream's answer key: read in order under the same
// key they check; one altered, read out of order, checked under another
// key, or a request frame sent back as an answer does not.
func TestSealedAnswerFrames(t *testing.T) {
	key := []byte("the stream's key")
	s := NewAnswerSealer(key)
	first := s.AppendFrame(nil, StreamAnswer, []byte("first"))
	second := s.AppendFrame(nil, StreamRefusal, []byte("why"))

	o := NewAnswerOpener(key)
	r := bufio.NewReader(bytes.NewReader(append(slices.Clone(first), second...)))
	for i, want := range []struct {
		kind    byte
		payload string
	}{{StreamAnswer, "first"}, {StreamRefusal, "why"}} {
		kind, payload, err := o.ReadFrame(r)
		if err != nil || kind != want.kind || string(payload) != want.payload {
			t.Fatalf("frame %d: %d %q %v; want %d %q", i+1, kind, payload, err, want.kind, want.payload)
		}
	}
	if _, _, err := o.ReadFrame(r); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}

	altered := slices.Clone(first)
	altered[frameHeader+1] ^= 1
	reflected := NewStreamSealer(key).AppendFrame(nil, append([]byte{StreamAnswer}, "first"...))
	for name, stream := range map[string][]byte{
		"altered":                   altered,
		"out of order":              second,
		"under another key":         NewAnswerSealer([]byte("another key")).AppendFrame(nil, StreamAnswer, []byte("first")),
		"a request frame sent back": reflected,
		"cut short":                 first[:len(first)-1],
	} {
		if _, _, err := NewAnswerOpener(key).ReadFrame(bufio.NewReader(bytes.NewReader(stream))); !errors.Is(err, ErrStreamFrame) {
			t.Errorf("%s: %v, want %v", name, err, ErrStreamFrame)
		}
	}
}

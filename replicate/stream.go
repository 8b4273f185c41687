package replicate

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
)

// A replication stream carries a master's requests to one replica, and
// the replica's answers back, over one long-lived connection: the same
// requests and answers as /internal/v3/replicate in the same binary form,
// without an HTTP request per batch (whose parsing, headers and signature
// were about a tenth of the nodes' CPU under `majority` writes,
// docs/benchmarks.md). The master opens it with a signed request to
// /internal/v3/replicate-stream (v2 from an older master) asking to
// switch to StreamProtocol; from the replica's 101 answer on, the
// connection carries frames, one request and then its answer at a time.
//
// A request frame is its length (4 bytes, big-endian), the request, and
// an HMAC-SHA256 of the frame's number in the stream (8 bytes, counting
// from 1) and the request, under the stream's key: a key only the two
// nodes can derive (cluster.Signer.StreamKey), so a frame cannot be
// forged, replayed or moved to another stream. An answer frame is its
// length, a kind byte, and the answer (StreamAnswer) or, for
// StreamRefusal, the reason the replica closes the stream.
//
// On StreamProtocolSealed (a master of this version opens it at
// /internal/v4/replicate-stream) every answer frame is sealed too: after
// the kind and the answer comes an HMAC-SHA256 of the answer frame's
// number (counting from 1) and its kind and answer, under a key derived
// from the stream's (so a request frame cannot pass for an answer), so
// that an answer, like a request, cannot be forged, replayed or moved.
// StreamProtocol, whose answers are not sealed, stays for the masters of
// older versions.
const (
	StreamProtocol       = "shoal-replicate-v2"
	StreamProtocolSealed = "shoal-replicate-v3"
)

// Kinds of answer frames.
const (
	StreamAnswer  byte = 0
	StreamRefusal byte = 1
)

// Frame sizes: a request is bounded as the body of a signed internal
// request is (cluster.MaxInternalBody), an answer by MaxStreamAnswer (as
// a node bounds any answer to an internal call).
const (
	frameHeader     = 4
	frameMAC        = sha256.Size
	MaxStreamAnswer = 32 << 20
)

// ErrStreamFrame marks a frame that is not what the stream's other end
// writes: too long, cut short, or (a request) failing its MAC.
var ErrStreamFrame = errors.New("bad replication stream frame")

// StreamSealer writes the request frames of one stream.
type StreamSealer struct {
	mac hash.Hash
	seq uint64
}

// NewStreamSealer seals frames under key.
func NewStreamSealer(key []byte) *StreamSealer {
	return &StreamSealer{mac: hmac.New(sha256.New, key)}
}

// AppendFrame appends the next request frame of the stream, carrying
// request (in the binary form), to dst.
func (s *StreamSealer) AppendFrame(dst, request []byte) []byte {
	s.seq++
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(request)))
	dst = append(dst, request...)
	return append(dst, frameSum(s.mac, s.seq, request)...)
}

// StreamOpener reads the request frames of one stream.
type StreamOpener struct {
	mac hash.Hash
	seq uint64
	max int
}

// NewStreamOpener checks frames against key and refuses requests longer
// than max bytes.
func NewStreamOpener(key []byte, max int) *StreamOpener {
	return &StreamOpener{mac: hmac.New(sha256.New, key), max: max}
}

// ReadFrame reads the next request frame from r and returns its request
// once its MAC checks. io.EOF: the stream ended between frames.
func (o *StreamOpener) ReadFrame(r *bufio.Reader) ([]byte, error) {
	n, err := readLength(r, o.max)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, n+frameMAC)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, fmt.Errorf("%w: cut short: %w", ErrStreamFrame, err)
	}
	o.seq++
	request, sum := frame[:n], frame[n:]
	if !hmac.Equal(sum, frameSum(o.mac, o.seq, request)) {
		return nil, fmt.Errorf("%w: frame %d does not carry the stream's MAC", ErrStreamFrame, o.seq)
	}
	return request, nil
}

func frameSum(mac hash.Hash, seq uint64, payload []byte) []byte {
	mac.Reset()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	mac.Write(n[:])
	mac.Write(payload)
	return mac.Sum(nil)
}

// answerKey is the key the answer frames of the stream of key are sealed
// under.
func answerKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("shoal-stream-answers-v1"))
	return m.Sum(nil)
}

// AnswerSealer writes the answer frames of one stream on
// StreamProtocolSealed.
type AnswerSealer struct {
	mac hash.Hash
	seq uint64
}

// NewAnswerSealer seals the answer frames of the stream of key (the
// stream's own key, as NewStreamOpener takes it).
func NewAnswerSealer(key []byte) *AnswerSealer {
	return &AnswerSealer{mac: hmac.New(sha256.New, answerKey(key))}
}

// AppendFrame appends the next answer frame of the stream, of kind and
// carrying payload, to dst.
func (s *AnswerSealer) AppendFrame(dst []byte, kind byte, payload []byte) []byte {
	s.seq++
	start := len(dst) + frameHeader
	dst = AppendAnswerFrame(dst, kind, payload)
	return append(dst, frameSum(s.mac, s.seq, dst[start:])...)
}

// AnswerOpener reads the answer frames of one stream on
// StreamProtocolSealed.
type AnswerOpener struct {
	mac hash.Hash
	seq uint64
}

// NewAnswerOpener checks the answer frames of the stream of key (the key
// it seals its requests with).
func NewAnswerOpener(key []byte) *AnswerOpener {
	return &AnswerOpener{mac: hmac.New(sha256.New, answerKey(key))}
}

// ReadFrame reads the next answer frame from r and returns its kind and
// payload once its MAC checks.
func (o *AnswerOpener) ReadFrame(r *bufio.Reader) (byte, []byte, error) {
	body, sum, err := readAnswer(r, frameMAC)
	if err != nil {
		return 0, nil, err
	}
	o.seq++
	if !hmac.Equal(sum, frameSum(o.mac, o.seq, body)) {
		return 0, nil, fmt.Errorf("%w: answer frame %d does not carry the stream's MAC", ErrStreamFrame, o.seq)
	}
	return kindOf(body)
}

// AppendAnswerFrame appends an answer frame of kind carrying payload to
// dst (StreamProtocol: not sealed).
func AppendAnswerFrame(dst []byte, kind byte, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)+1))
	return append(append(dst, kind), payload...)
}

// ReadAnswerFrame reads an answer frame from r: its kind and payload
// (StreamProtocol: not sealed).
func ReadAnswerFrame(r *bufio.Reader) (byte, []byte, error) {
	body, _, err := readAnswer(r, 0)
	if err != nil {
		return 0, nil, err
	}
	return kindOf(body)
}

// readAnswer reads an answer frame from r: its kind and answer (body),
// and the trail bytes after them (a sealed frame's MAC).
func readAnswer(r *bufio.Reader, trail int) (body, after []byte, err error) {
	n, err := readLength(r, MaxStreamAnswer+1)
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("%w: an answer frame without its kind", ErrStreamFrame)
	}
	frame := make([]byte, n+trail)
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, nil, fmt.Errorf("%w: cut short: %w", ErrStreamFrame, err)
	}
	return frame[:n], frame[n:], nil
}

// kindOf splits an answer frame's body into its kind and payload.
func kindOf(body []byte) (byte, []byte, error) {
	if body[0] != StreamAnswer && body[0] != StreamRefusal {
		return 0, nil, fmt.Errorf("%w: an answer frame of kind %d", ErrStreamFrame, body[0])
	}
	return body[0], body[1:], nil
}

// readLength reads a frame's length, at most max; io.EOF if the stream
// ended before it.
func readLength(r *bufio.Reader, max int) (int, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: cut short: %w", ErrStreamFrame, err)
	}
	n := binary.BigEndian.Uint32(h[:])
	if uint64(n) > uint64(max) {
		return 0, fmt.Errorf("%w: a frame of %d bytes, more than %d", ErrStreamFrame, n, max)
	}
	return int(n), nil
}

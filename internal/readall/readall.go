// Package readall reads a body whole into a buffer sized for the length
// its sender declared, where io.ReadAll starts at 512 bytes and doubles
// (a 20 KB replication request cost it about three times its size in
// allocations, a quarter of everything a node allocated under writes).
package readall

import (
	"bytes"
	"io"
)

// Believed is how much of a declared length is allocated before any of
// the body has come: the rest only once that much has (a sender that
// declares a long body and sends none would otherwise have a node hold a
// buffer of that length for each such request).
const Believed = 64 << 10

// Sized reads r to its end. declared is the length the sender declared
// (an HTTP Content-Length; negative when unknown), which the caller must
// have bounded already: the buffer is made that large, up to Believed at
// once and the rest once Believed bytes have come. A body longer or
// shorter than declared is still read whole.
func Sized(r io.Reader, declared int64) ([]byte, error) {
	if declared < 0 {
		return io.ReadAll(r)
	}
	// MinRead more, so that reading the end (io.EOF) needs no more room.
	buf := bytes.NewBuffer(make([]byte, 0, min(declared, Believed)+bytes.MinRead))
	if declared > Believed {
		if _, err := buf.ReadFrom(io.LimitReader(r, Believed)); err != nil || buf.Len() < Believed {
			return buf.Bytes(), err
		}
		buf.Grow(int(declared-Believed) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

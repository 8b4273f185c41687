package doc

import (
	crand "crypto/rand"
	"math/bits"
	"math/rand/v2"
	"sync"
	"time"
)

// An id is a 128-bit number written as 26 digits of Crockford's base32, whose
// digits are in ASCII order, so ids of equal length sort as their numbers do.
// The top 48 bits are a Unix time in milliseconds (good until the year 10889)
// and the low 80 bits are random. As in ULID's monotonic mode, an id made in
// the same millisecond as the previous one (or when the clock has gone back)
// is the previous id plus a random increment of 1 to 2^32, so ids from one
// process always increase.
const (
	idLength     = 26
	idAlphabet   = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	randomBits   = 80
	randomHiBits = randomBits - 64 // random bits stored in hi
)

// NewID returns a new document id: 26 characters from 0-9 and A-Z (Crockford
// base32: no I, L, O or U), so it passes [ValidID] and needs no escaping in a
// URL. Ids sort in order of creation time; within one process, every id is
// greater than all ids returned before it, even within one millisecond. Each
// millisecond's first id carries 80 random bits, making ids unique across
// processes with overwhelming probability. NewID is safe for concurrent use.
func NewID() string {
	return ids.next(uint64(time.Now().UnixMilli()))
}

// ids is the process's id generator.
var ids idGenerator

// idGenerator makes monotonic ids. The zero value is ready to use.
type idGenerator struct {
	mu     sync.Mutex
	hi, lo uint64        // the last id: hi = milliseconds<<16 | top 16 random bits
	rng    *rand.ChaCha8 // a CSPRNG seeded from crypto/rand on first use
}

// next returns an id for the time ms (Unix milliseconds).
func (g *idGenerator) next(ms uint64) string {
	g.mu.Lock()
	if g.rng == nil {
		var seed [32]byte
		crand.Read(seed[:]) // never fails (it crashes the program instead)
		g.rng = rand.NewChaCha8(seed)
	}
	if ms > g.hi>>randomHiBits {
		// A new millisecond: all fresh randomness.
		g.hi = ms<<randomHiBits | g.rng.Uint64()>>(64-randomHiBits)
		g.lo = g.rng.Uint64()
	} else {
		// Same millisecond, or the clock went back: increment the last id.
		// A carry out of the random bits moves the time on by 1ms, which
		// keeps ids increasing.
		var carry uint64
		g.lo, carry = bits.Add64(g.lo, g.rng.Uint64()>>32+1, 0)
		g.hi += carry
	}
	hi, lo := g.hi, g.lo
	g.mu.Unlock()
	return encodeID(hi, lo)
}

// encodeID writes the 128-bit number hi<<64|lo in base32.
func encodeID(hi, lo uint64) string {
	var b [idLength]byte
	for i := idLength - 1; i >= 0; i-- {
		b[i] = idAlphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(b[:])
}

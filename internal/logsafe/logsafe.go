// Package logsafe keeps what outside input puts into logs bounded: Clip
// shortens a string (a header, a path, a claimed node id) before it is
// logged, and Limiter lets a repeated log line through at most a few times
// per window, counting the lines it held back.
package logsafe

import (
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxField is how many bytes of an outside string a log line keeps.
const MaxField = 128

// Clip returns s if it has at most MaxField bytes; otherwise its first
// MaxField bytes (cut at a character boundary) followed by a marker giving
// the original length, e.g. "abc…[+899872 of 900000 bytes]".
func Clip(s string) string { return ClipTo(s, MaxField) }

// ClipTo is Clip with a limit of n bytes.
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	// Do not split a UTF-8 sequence: back up to the start of a character
	// (at most 3 bytes).
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + "…[+" + strconv.Itoa(len(s)-cut) + " of " + strconv.Itoa(len(s)) + " bytes]"
}

// Limiter allows at most Max events per Window (a fixed window that starts
// with the first event after the previous one ended). It is safe for
// concurrent use. Time comes from Now, so tests move it by hand.
type Limiter struct {
	max    int
	window time.Duration
	now    func() time.Time

	mu         sync.Mutex
	start      time.Time
	used       int
	suppressed int
}

// NewLimiter allows max events per window; now is the clock (time.Now if
// nil).
func NewLimiter(max int, window time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{max: max, window: window, now: now}
}

// Allow reports whether an event may be logged now. When it may, suppressed
// is how many events were held back since the last one allowed, so the log
// line can say so (and the count starts again).
func (l *Limiter) Allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.start.IsZero() || now.Sub(l.start) >= l.window || now.Before(l.start) {
		l.start, l.used = now, 0
	}
	if l.used >= l.max {
		l.suppressed++
		return false, 0
	}
	l.used++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

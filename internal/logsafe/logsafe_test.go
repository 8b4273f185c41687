package logsafe

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 8, "short"},
		{"exactly8", 8, "exactly8"},
		{"nine-long", 8, "nine-lon…[+1 of 9 bytes]"},
		{"ab€cd", 3, "ab…[+5 of 7 bytes]"}, // € is 3 bytes: not split
		{"", 0, ""},
	} {
		if got := ClipTo(tc.in, tc.n); got != tc.want {
			t.Errorf("ClipTo(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	long := strings.Repeat("x", 900_000)
	got := Clip(long)
	if len(got) > MaxField+40 || !strings.HasSuffix(got, "…[+899872 of 900000 bytes]") {
		t.Fatalf("Clip of 900 KB: %d bytes, %q", len(got), got[len(got)-40:])
	}
	if s := Clip(strings.Repeat("é", 200)); !utf8.ValidString(s) {
		t.Fatalf("Clip split a character: %q", s)
	}
}

func TestLimiterCountsWhatItHoldsBack(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewLimiter(3, time.Minute, func() time.Time { return now })
	var trace []string
	step := func(label string) {
		ok, n := l.Allow()
		switch {
		case ok && n > 0:
			trace = append(trace, label+":log+"+strconv.Itoa(n))
		case ok:
			trace = append(trace, label+":log")
		default:
			trace = append(trace, label+":drop")
		}
	}
	for i := 0; i < 5; i++ {
		step("t0")
	}
	now = now.Add(59 * time.Second)
	step("t59")
	now = now.Add(time.Second) // the window ends
	step("t60")
	step("t60")
	now = now.Add(-time.Hour) // a clock that steps back starts a new window
	step("back")
	want := "t0:log t0:log t0:log t0:drop t0:drop t59:drop t60:log+3 t60:log back:log"
	if got := strings.Join(trace, " "); got != want {
		t.Fatalf("trace\n got %s\nwant %s", got, want)
	}
}

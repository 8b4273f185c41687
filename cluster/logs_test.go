package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Anyone who reaches the gossip port can make memberlist log a warning per
// packet (a packet that does not decrypt); those lines are rate-limited
// and clipped like every other line outside input causes.
func TestMemberlistWarningsAreRateLimited(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var logs bytes.Buffer
	w := newSlogWriter(slog.New(slog.NewJSONHandler(&logs, nil)), func() time.Time { return now })
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(w, "[ERR] memberlist: failed to decrypt packet from=10.0.0.%d:7946 %s\n", i%250, strings.Repeat("z", 10<<10))
	}
	lines := strings.Count(logs.String(), "\n")
	if lines > memberlistLogMax || logs.Len() > memberlistLogMax*1024 {
		t.Fatalf("1000 memberlist errors in one instant logged %d lines, %d bytes; want at most %d short lines", lines, logs.Len(), memberlistLogMax)
	}
	now = now.Add(memberlistLogWindow)
	fmt.Fprintln(w, "[WARN] memberlist: one more")
	if want := fmt.Sprintf(`"suppressed":%d`, 1000-lines); !strings.Contains(logs.String(), want) {
		t.Fatalf("the next window's line does not say %s:\n%s", want, logs.String())
	}
	// Debug lines (dropped unless LOG_LEVEL is debug) are not counted.
	logs.Reset()
	for i := 0; i < 3*memberlistLogMax; i++ {
		fmt.Fprintln(w, "[DEBUG] memberlist: stream connection")
	}
	fmt.Fprintln(w, "[WARN] memberlist: after the debug lines")
	if !strings.Contains(logs.String(), "after the debug lines") {
		t.Fatalf("debug lines used up the warning allowance:\n%s", logs.String())
	}
}

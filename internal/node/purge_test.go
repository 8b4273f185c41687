package node

import (
	"testing"
	"time"
)

func TestPurgeIntervalIsAQuarterOfTheRetentionWithinBounds(t *testing.T) {
	for _, c := range []struct{ retention, want time.Duration }{
		{24 * time.Hour, 10 * time.Minute},
		{time.Hour, 10 * time.Minute},
		{20 * time.Minute, 5 * time.Minute},
		{time.Second, 250 * time.Millisecond},
		{100 * time.Millisecond, 50 * time.Millisecond},
		{time.Millisecond, 50 * time.Millisecond},
	} {
		if got := purgeInterval(c.retention); got != c.want {
			t.Errorf("retention %s: purge every %s, want %s", c.retention, got, c.want)
		}
	}
}

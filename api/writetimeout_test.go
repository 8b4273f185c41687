package api

import (
	"net/http/httptest"
	"testing"
	"time"
)

// A forwarded write waits for the master's answer at least as long as the
// write concern it carries may take: with X-Write-Timeout 30s, a forward
// cut at 10 s answered 504 early and, by closing the connection, cancelled
// the master's wait for its copies.
func TestAForwardWaitsAsLongAsItsWriteConcern(t *testing.T) {
	for _, tc := range []struct {
		header  string
		atLeast time.Duration
	}{{"", forwardTimeout}, {"2s", forwardTimeout}, {"30s", 30 * time.Second}, {"60s", 60 * time.Second}} {
		r := httptest.NewRequest("PUT", "/v1/users/u/collections/c/documents/d", nil)
		if tc.header != "" {
			r.Header.Set("X-Write-Timeout", tc.header)
		}
		if got := forwardTimeoutFor(r); got < tc.atLeast || got < writeTimeout(r) {
			t.Errorf("X-Write-Timeout %q: a forward waits %s for the master, want at least %s", tc.header, got, tc.atLeast)
		}
		// A new master may first wait up to routeWait for its tenure to
		// become writable (awaitWritable), then for the write concern.
		if got := forwardTimeoutFor(r); got <= routeWait+writeTimeout(r) {
			t.Errorf("X-Write-Timeout %q: a forward waits %s for the master, which may take %s before it answers", tc.header, got, routeWait+writeTimeout(r))
		}
	}
}

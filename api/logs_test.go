package api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/testnode"
)

// syncBuffer is a log destination shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// A refused request's path was logged verbatim (at debug level): what a
// client sends is clipped before it reaches a log line.
func TestRefusedRequestLogIsBounded(t *testing.T) {
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(api.New(api.Config{NodeID: "n", PartitionCount: 4, MaxBodyBytes: 1 << 20,
		AuthSecret: []byte(testnode.Secret), Logger: log}, nil, nil))
	defer srv.Close()
	long := "/v1/users/" + strings.Repeat("u", 900<<10) + "/collections"
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest("GET", srv.URL+long, nil)
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("t", 20<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", resp.StatusCode)
		}
	}
	if logs.Len() == 0 || logs.Len() > 32<<10 {
		t.Fatalf("20 refused requests with 900 KB paths logged %d bytes, want some but at most 32 KB", logs.Len())
	}
}

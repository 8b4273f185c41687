package metrictext

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The unlabelled sample of the name, as etcd and Shoal serve it, not a
// longer name that starts with it nor a comment; a line with no value (a
// malformed answer) is no reading, and does not panic.
func TestValueReadsTheUnlabelledSample(t *testing.T) {
	text := []byte("# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n" +
		"# TYPE process_cpu_seconds_total counter\n" +
		"process_cpu_seconds_total_extra 99\n" +
		"process_cpu_seconds_total 12.34 1700000000000\n")
	if v, ok := Value(text, "process_cpu_seconds_total"); !ok || v != 12.34 {
		t.Errorf("got %v %v, want 12.34", v, ok)
	}
	for _, bad := range []string{"process_cpu_seconds_total \n", "process_cpu_seconds_total x\n", "go_goroutines 7\n"} {
		if v, ok := Value([]byte(bad), "process_cpu_seconds_total"); ok {
			t.Errorf("%q: read %v, want no reading", bad, v)
		}
	}
}

// Get reads a server's /metrics whole, and an answer other than 200 is
// an error, not an exposition.
func TestGetReadsMetricsAndRefusesOtherAnswers(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			t.Errorf("asked %s", r.URL.Path)
		}
		w.WriteHeader(status)
		w.Write([]byte("process_cpu_seconds_total 1.5\n"))
	}))
	defer srv.Close()
	body, err := Get(context.Background(), srv.Client(), srv.URL+"/")
	if v, ok := Value(body, "process_cpu_seconds_total"); err != nil || !ok || v != 1.5 {
		t.Fatalf("read %q (%v): %v %v", body, err, v, ok)
	}
	status = http.StatusServiceUnavailable
	if _, err := Get(context.Background(), srv.Client(), srv.URL); err == nil {
		t.Fatal("a 503 was read as metrics")
	}
}

package metrictext

import "testing"

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

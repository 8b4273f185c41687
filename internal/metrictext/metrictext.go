// Package metrictext reads a sample from a Prometheus text exposition
// (what a node's and an etcd member's /metrics serve), for the benchmark
// and the fault suite, which read a counter or two and need no parser.
package metrictext

import (
	"strconv"
	"strings"
)

// Value reads the unlabelled sample of name; ok is false when there is
// none, or its value does not parse.
func Value(text []byte, name string) (v float64, ok bool) {
	for line := range strings.Lines(string(text)) {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		fields := strings.Fields(rest) // the value, then perhaps a timestamp
		if len(fields) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		return v, err == nil
	}
	return 0, false
}

// Package metrictext reads a sample from a Prometheus text exposition
// (what a node's and an etcd member's /metrics serve), for the benchmark
// and the fault suite, which read a counter or two and need no parser.
package metrictext

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Get reads the exposition a server serves at its /metrics (url is the
// server's base URL), at most 8 MiB; an answer other than 200 is an
// error.
func Get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(url, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s/metrics answered %d", strings.TrimSuffix(url, "/"), resp.StatusCode)
	}
	return body, err
}

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

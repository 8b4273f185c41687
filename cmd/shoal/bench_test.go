package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
)

// The benchmark command runs end to end on a node of its own and reports
// every phase with zero errors (its figures are not asserted: they are
// measured and written down, see docs/benchmarks.md).
func TestBenchRunsEveryPhase(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--duration", "300ms", "--clients", "4", "--doc-bytes", "64"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"REST writes (POST)", "REST point reads (GET)", "raw store insertOne", "raw findOne, same documents", "Shoal/raw: writes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first error") {
		t.Errorf("bench reported errors:\n%s", out.String())
	}
}

func TestBenchClusterNeedsATarget(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "--cluster", "--dir", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--urls") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestBenchClusterRunsAgainstACluster(t *testing.T) {
	c := testcluster.Start(t, 3)
	var urls []string
	for _, n := range c.Nodes {
		urls = append(urls, n.URL())
	}
	var out, errb bytes.Buffer
	code := run([]string{"bench", "--cluster", "--urls", strings.Join(urls, ","), "--token", testnode.AdminToken(t),
		"--duration", "300ms", "--clients", "4", "--doc-bytes", "64", "--lag-writes", "20"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{"writes to the master (1)", "writes forwarded (1)", "writes majority", "replication lag"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

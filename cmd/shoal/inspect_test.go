package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

// shoal inspect reads a stopped node's store: the partition a write went
// to shows this node's lease vote, its tenure and its positions.
func TestInspectReadsAStoppedNodesStore(t *testing.T) {
	n := testnode.StartNew(t)
	if r := n.Client(testnode.Token(t, "alice")).Do("PUT", "/v1/users/alice/collections/c/documents/d", `{"n":1}`); r.Status != 201 {
		t.Fatalf("PUT: %d %s", r.Status, r.Body)
	}
	n.Stop()
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", "--data-dir", n.Config.DataDir}, &out, &errb); code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errb.String())
	}
	p := shard.PartitionOf("alice", n.Config.PartitionCount)
	header := fmt.Sprintf("test-node, PARTITION_COUNT=%d, store in %s", n.Config.PartitionCount, n.Config.DataDir)
	row := regexp.MustCompile(fmt.Sprintf(`(?m)^%d +test-node@(\d+) +(\d+) +(\d+) +\d+\.[1-9]\d* +\d+\.\d+$`, p))
	if !strings.Contains(out.String(), header) || !row.MatchString(out.String()) {
		t.Fatalf("inspect printed no header %q or no row of partition %d with a vote, a tenure and a position:\n%s", header, p, out.String())
	}
	m := row.FindStringSubmatch(out.String())
	if m[1] != m[2] {
		t.Errorf("partition %d: lease vote at epoch %s, tenure %s; want the same epoch:\n%s", p, m[1], m[2], out.String())
	}
}

func TestInspectNeedsADataDir(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"inspect"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--data-dir is required") {
		t.Fatalf("inspect without --data-dir: exit %d, %q", code, errb.String())
	}
}

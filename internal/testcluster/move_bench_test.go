package testcluster_test

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/testcluster"
	"github.com/shoal-db/shoal/internal/testnode"
	"github.com/shoal-db/shoal/shard"
)

var (
	moveDocs    = flag.Int("move-docs", 100000, "BenchmarkAPartitionMovesToANewNode: documents in the partition that moves")
	moveProfile = flag.String("move-profile", "", "BenchmarkAPartitionMovesToANewNode: write a CPU profile of the move alone (not the fill) to this file")
)

// BenchmarkAPartitionMovesToANewNode measures how fast a partition moves:
// a three-node cluster, one user's collection of -move-docs 1 KiB
// documents in a partition whose preferred master the fourth node will be,
// then the fourth node added to the peer list. It reports documents per
// second over the copy (from the first look that sees it copying to the
// first that sees it past copying) and over the whole move (from the peer
// list edit to the new node holding the lease). Run it once:
//
//	go test -run '^$' -bench APartitionMoves -benchtime 1x ./internal/testcluster/
func BenchmarkAPartitionMovesToANewNode(b *testing.B) {
	for range b.N {
		b.StopTimer()
		c := testcluster.Start(b, 3)
		token := testnode.AdminToken(b)
		p, user := movingPartition(b)
		c.WaitForMasters(30 * time.Second)
		from := c.MasterOf(p)
		filled := testcluster.FillUser(b, c.Node(from).Client(token), user, *moveDocs, 1024)
		b.Logf("partition %d on %s: %d documents in %s", p, from, *moveDocs, filled.Round(time.Millisecond))

		if *moveProfile != "" {
			f, err := os.Create(*moveProfile)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
		b.StartTimer()
		added := time.Now()
		c.AddNode()
		var copyStart, copyEnd time.Time
		testnode.Eventually(b, 10*time.Minute, fmt.Sprintf("partition %d mastered by node4", p), func() (bool, string) {
			phase := ""
			for _, m := range c.Node(from).Moves() {
				if m.Partition == p {
					phase = m.Phase
				}
			}
			now := time.Now()
			switch {
			case phase == "copying" && copyStart.IsZero():
				copyStart = now
			case phase != "copying" && !copyStart.IsZero() && copyEnd.IsZero():
				copyEnd = now
			}
			return c.MasterOf(p) == "node4", fmt.Sprintf("master %q, move %q", c.MasterOf(p), phase)
		})
		whole := time.Since(added)
		b.StopTimer()
		if *moveProfile != "" {
			pprof.StopCPUProfile()
		}
		if copyStart.IsZero() || copyEnd.IsZero() {
			b.Fatalf("the copy was never seen under way (%v, %v): nothing to time", copyStart, copyEnd)
		}
		copied := copyEnd.Sub(copyStart)
		b.ReportMetric(float64(*moveDocs)/copied.Seconds(), "copy-docs/s")
		b.ReportMetric(float64(*moveDocs)/whole.Seconds(), "move-docs/s")
		b.Logf("copy %s, whole move %s (peer list edit to lease on node4)", copied.Round(time.Millisecond), whole.Round(time.Millisecond))
		c.StopAll()
	}
}

// movingPartition finds a partition whose preferred master a fourth node
// would be, and a user placed in it.
func movingPartition(b *testing.B) (int, string) {
	toNode4 := testcluster.PreferredByANewNode(b)
	for i := 0; ; i++ {
		u := fmt.Sprintf("mover%d", i)
		if p := shard.PartitionOf(u, testcluster.Partitions); slices.Contains(toNode4, p) {
			return p, u
		}
	}
}

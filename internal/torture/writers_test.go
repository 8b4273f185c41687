package torture

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoal-db/shoal/internal/commitlog"
	"github.com/shoal-db/shoal/store"
)

// ack is a hand-made acknowledgement of partition p by node under epoch
// at ms milliseconds, of position epoch.seq.
func ack(node string, p int, epoch uint64, ms int64, seq uint64) commitlog.Record {
	pos := store.Position{Epoch: epoch, Seq: seq}
	return commitlog.Record{Node: node, Partition: p, Epoch: epoch, First: pos, Last: pos, At: ms * int64(time.Millisecond)}
}

func TestCheckWritersCatchesTwoWritersAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		recs []commitlog.Record
		want []string // "earlier node/epoch > later node/epoch" per conflict
	}{
		{"two nodes under one epoch", []commitlog.Record{
			ack("n1", 0, 3, 10, 1), ack("n1", 0, 3, 20, 2), ack("n2", 0, 3, 30, 3),
		}, []string{"n1/3 > n2/3"}},
		{"an old epoch after a newer one", []commitlog.Record{
			ack("n1", 0, 3, 10, 1), ack("n2", 0, 4, 20, 2), ack("n1", 0, 3, 30, 2),
		}, []string{"n2/4 > n1/3"}},
		{"interleaved: a stale master keeps answering beside the new one", []commitlog.Record{
			ack("n1", 2, 5, 10, 1), ack("n2", 2, 6, 11, 1), ack("n1", 2, 5, 12, 2), ack("n2", 2, 6, 13, 2), ack("n1", 2, 5, 14, 3),
		}, []string{"n2/6 > n1/5", "n2/6 > n1/5"}},
		{"the same node back under an older epoch than it had", []commitlog.Record{
			ack("n1", 1, 7, 10, 1), ack("n1", 1, 6, 20, 1),
		}, []string{"n1/7 > n1/6"}},
		{"out of file order: sorted by time", []commitlog.Record{
			ack("n1", 0, 3, 30, 2), ack("n2", 0, 4, 20, 1), ack("n1", 0, 3, 10, 1),
		}, []string{"n2/4 > n1/3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CheckWriters(c.recs)
			var pairs []string
			for _, g := range got {
				pairs = append(pairs, g.Earlier.Node+"/"+itoa(g.Earlier.Epoch)+" > "+g.Later.Node+"/"+itoa(g.Later.Epoch))
			}
			if strings.Join(pairs, ", ") != strings.Join(c.want, ", ") {
				t.Fatalf("conflicts %v, want %v", pairs, c.want)
			}
			if s := got[0].String(); !strings.Contains(s, "partition") || !strings.Contains(s, c.want[0][:2]) {
				t.Fatalf("the conflict does not name the pair: %s", s)
			}
		})
	}
}

func handedOver(r commitlog.Record) commitlog.Record {
	r.HandedOver = true
	return r
}

func itoa(e uint64) string { return strconv.FormatUint(e, 10) }

func TestCheckWritersPassesOneWriterAtATime(t *testing.T) {
	for _, c := range []struct {
		name string
		recs []commitlog.Record
	}{
		{"clean handovers", []commitlog.Record{
			ack("n1", 0, 1, 10, 1), ack("n1", 0, 1, 20, 2), ack("n2", 0, 2, 30, 3), ack("n3", 0, 3, 40, 4), ack("n1", 0, 4, 50, 5),
		}},
		{"the same node re-elected at a higher epoch", []commitlog.Record{
			ack("n1", 0, 1, 10, 1), ack("n1", 0, 3, 20, 2), ack("n1", 0, 3, 30, 3),
		}},
		{"partitions are apart: each has its own masters", []commitlog.Record{
			ack("n1", 0, 5, 10, 1), ack("n2", 1, 2, 20, 1), ack("n2", 0, 6, 30, 2), ack("n1", 1, 1, 15, 1), ack("n1", 1, 3, 40, 2),
		}},
		{"a tie in time is no evidence of order", []commitlog.Record{
			ack("n2", 0, 4, 10, 1), ack("n1", 0, 3, 10, 1),
		}},
		{"nothing acknowledged", nil},
		{"an answer after a handoff that carried the write", []commitlog.Record{
			ack("n1", 0, 3, 10, 1), ack("n2", 0, 4, 20, 2), handedOver(ack("n1", 0, 3, 30, 1)),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := CheckWriters(c.recs); len(got) != 0 {
				t.Fatalf("conflicts %v, want none", got)
			}
		})
	}
}

// The runner's side: every node's commit log in the cluster's directory,
// a torn last line (a node killed in mid-write) counted, not failed.
func TestCheckWritersReadsEveryNodesLog(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []struct {
		id   string
		acks []commitlog.Record
	}{
		{"node1", []commitlog.Record{ack("node1", 0, 1, 10, 1), ack("node1", 1, 1, 20, 1)}},
		{"node2", []commitlog.Record{ack("node2", 0, 2, 30, 2)}},
	} {
		node := &Node{ID: n.id, LogPath: filepath.Join(dir, n.id+".log")}
		l, err := commitlog.Open(node.CommitLogPath(), n.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range n.acks {
			if err := l.Append(a); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
	}
	f, err := os.OpenFile(filepath.Join(dir, "node2"+commitLogSuffix), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"node":"node2","parti`)
	f.Close()
	res, err := checkWriters(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acks != 3 || res.Partitions != 2 || res.Logs != 2 || res.Torn != 1 || len(res.Conflicts) != 0 {
		t.Fatalf("result %+v", res)
	}
	if row := res.Row(); !strings.HasPrefix(row, "yes (3 acknowledgements, 2 partitions") {
		t.Fatalf("row %q", row)
	}

	// A stale record appended after node2's epoch 2 fails the check.
	l, _ := commitlog.Open(filepath.Join(dir, "node1"+commitLogSuffix), "node1")
	pos := store.Position{Epoch: 1, Seq: 2}
	l.Append(commitlog.Record{Partition: 0, Epoch: 1, First: pos, Last: pos, At: 40 * int64(time.Millisecond)})
	l.Close()
	res, err = checkWriters(dir)
	if err != nil || len(res.Conflicts) != 1 || res.Failure() == "" || !strings.HasPrefix(res.Row(), "NO") {
		t.Fatalf("after a stale acknowledgement: %+v, %v", res, err)
	}
}

package commitlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoal-db/shoal/store"
)

func readFile(t *testing.T, path string) (Contents, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Read(f)
}

// Concurrent acknowledgements each land whole on a line of their own.
func TestConcurrentRecordsAreWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commits.jsonl")
	l, err := Open(path, "node1")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 100; i++ {
				pos := store.Position{Epoch: 3, Seq: uint64(g*1000 + i)}
				if err := l.Append(Record{Partition: g, Epoch: 3, First: pos, Last: pos, At: time.Now().UnixNano()}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := readFile(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 800 || c.Opens != 1 || c.Torn != 0 {
		t.Fatalf("%d records, %d opens, %d torn; want 800, 1, 0", len(c.Records), c.Opens, c.Torn)
	}
	for _, r := range c.Records {
		if r.Node != "node1" || r.Epoch != 3 || r.First != r.Last || r.Last.Seq != uint64(r.Partition*1000)+r.Last.Seq%1000 {
			t.Fatalf("record %+v", r)
		}
	}
}

// A process killed in mid-line leaves a torn last line: it is counted,
// and the next process to open the log ends it first, so its own records
// parse and the torn line stays forgiven.
func TestTornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commits.jsonl")
	l, err := Open(path, "node1")
	if err != nil {
		t.Fatal(err)
	}
	pos := store.Position{Epoch: 2, Seq: 7}
	if err := l.Append(Record{Partition: 1, Epoch: 2, First: pos, Last: pos, At: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"node":"node1","partition":1,"epo`)
	f.Close()

	c, err := readFile(t, path)
	if err != nil || len(c.Records) != 1 || c.Torn != 1 {
		t.Fatalf("after a torn last line: %+v, %v; want 1 record, 1 torn", c, err)
	}
	l, err = Open(path, "node1")
	if err != nil {
		t.Fatal(err)
	}
	pos.Seq = 8
	if err := l.Append(Record{Partition: 1, Epoch: 2, First: pos, Last: pos, At: time.Now().UnixNano()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	c, err = readFile(t, path)
	if err != nil || len(c.Records) != 2 || c.Torn != 1 || c.Opens != 2 || c.Records[1].Last.Seq != 8 {
		t.Fatalf("after a restart: %+v, %v; want 2 records, 1 torn, 2 opens", c, err)
	}
}

// A line that does not parse and is not the last its process wrote is no
// kill in mid-write: the log is corrupt.
func TestCorruptLineInTheMiddle(t *testing.T) {
	text := `{"node":"n1","partition":-1,"epoch":0,"first":{"epoch":0,"seq":0},"last":{"epoch":0,"seq":0},"at":1,"opened":true}
{"node":"n1","partition":1,"epo
{"node":"n1","partition":1,"epoch":2,"first":{"epoch":2,"seq":1},"last":{"epoch":2,"seq":1},"at":2}
`
	if _, err := Read(strings.NewReader(text)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read: %v, want ErrCorrupt", err)
	}
}

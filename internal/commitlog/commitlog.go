// Package commitlog keeps a node's own record of the writes it
// acknowledged as a partition's master, for fault testing (COMMIT_LOG):
// one JSON line per acknowledgement, naming the node, the partition, the
// lease epoch the writes were committed under, their positions and the
// wall-clock time the node confirmed it still held that lease while
// answering. A checker that reads every node's log after a run can tell
// whether two nodes accepted writes for one partition at once.
//
// Each line is one write(2) on an O_APPEND file, with no buffering in
// the process: a node killed with SIGKILL loses no record of a write it
// answered (the kernel has it). Nothing is flushed to disk, so a machine
// crash may lose the tail.
package commitlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/shoal-db/shoal/store"
)

// Record is one line of a commit log.
type Record struct {
	Node      string `json:"node"`
	Partition int    `json:"partition"`
	// Epoch is the lease epoch the writes were committed under (and still
	// held when they were acknowledged).
	Epoch uint64 `json:"epoch"`
	// First and Last are the lowest and highest positions the
	// acknowledged writes were committed at.
	First store.Position `json:"first"`
	Last  store.Position `json:"last"`
	// At is when the node acknowledged them, in Unix nanoseconds of its
	// wall clock.
	At int64 `json:"at"`
	// HandedOver: the node's lease had just ended in an orderly handoff
	// that carried these writes to the next master, whose history holds
	// them: the answer confirmed writes accepted under the lease, and At
	// is after the lease.
	HandedOver bool `json:"handed_over,omitempty"`
	// Opened marks the line a node writes when it opens the log (a new
	// process): it records no write. A torn line before it is the last
	// of the previous process.
	Opened bool `json:"opened,omitempty"`
}

// Time is At as a time.
func (r Record) Time() time.Time { return time.Unix(0, r.At) }

func (r Record) String() string {
	return fmt.Sprintf("%s partition %d epoch %d positions %s..%s at %s", r.Node, r.Partition, r.Epoch,
		r.First, r.Last, r.Time().UTC().Format("15:04:05.000000"))
}

// Log appends records to one file. It is safe for concurrent use.
type Log struct {
	f      *os.File
	node   string
	failed atomic.Int64
}

// Open opens (or creates) the commit log at path for node. If the file
// ends in a torn line (the previous process was killed in mid-write), the
// line is ended first, so that no record of this process is glued to it.
func Open(path, node string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("COMMIT_LOG: %w", err)
	}
	var line []byte
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = append(line, '\n')
		}
	}
	l := &Log{f: f, node: node}
	rec, _ := json.Marshal(Record{Node: node, Partition: -1, At: time.Now().UnixNano(), Opened: true})
	line = append(append(line, rec...), '\n')
	if _, err := f.Write(line); err != nil {
		f.Close()
		return nil, fmt.Errorf("COMMIT_LOG %s: %w", path, err)
	}
	return l, nil
}

// Append records an acknowledgement by this log's node (r.Node is set
// to it). It is one write(2).
func (l *Log) Append(r Record) error {
	r.Node = l.node
	line, _ := json.Marshal(r)
	line = append(line, '\n')
	if _, err := l.f.Write(line); err != nil {
		l.failed.Add(1)
		return fmt.Errorf("COMMIT_LOG: %w", err)
	}
	return nil
}

// Failed is how many records could not be written.
func (l *Log) Failed() int64 { return l.failed.Load() }

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// Contents is what a commit log holds.
type Contents struct {
	Records []Record // acknowledgements, in the file's order
	Opens   int      // processes that opened it
	// Torn counts lines cut short by a kill in mid-write: the last line
	// of the file, or of one process's run (the line before an Opened
	// one), that does not parse.
	Torn int
}

// ErrCorrupt is returned for a line that does not parse and was not the
// last one a process wrote.
var ErrCorrupt = errors.New("commit log line does not parse")

// Read parses a commit log. Only a torn line that a process wrote last
// is forgiven; any other line that does not parse is ErrCorrupt.
func Read(r io.Reader) (Contents, error) {
	var c Contents
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	bad, badLine := false, 0 // a line that did not parse, waiting to see what follows it
	n := 0
	for sc.Scan() {
		n++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var rec Record
		err := json.Unmarshal(text, &rec)
		if err == nil && rec.Node == "" {
			err = errors.New("no node")
		}
		if bad {
			if err != nil || !rec.Opened {
				return c, fmt.Errorf("%w: line %d, not the last its process wrote", ErrCorrupt, badLine)
			}
			c.Torn++
			bad = false
		}
		if err != nil {
			bad, badLine = true, n
			continue
		}
		if rec.Opened {
			c.Opens++
			continue
		}
		c.Records = append(c.Records, rec)
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if bad {
		c.Torn++
	}
	return c, nil
}

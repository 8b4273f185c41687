package torture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/shoal-db/shoal/internal/commitlog"
)

// commitLogSuffix names each node's COMMIT_LOG in the cluster's
// directory, beside its log (not in its data directory, so that a node
// whose data is replaced keeps its record).
const commitLogSuffix = ".commits.jsonl"

// CommitLogPath is where the node records the writes it acknowledges as
// a partition's master (its COMMIT_LOG).
func (n *Node) CommitLogPath() string {
	return filepath.Join(filepath.Dir(n.LogPath), n.ID+commitLogSuffix)
}

// WritersResult is the verdict of the one-writer check: from the nodes'
// own records of the writes they acknowledged as masters, whether two
// nodes ever accepted writes for one partition at once.
type WritersResult struct {
	Acks       int // acknowledgements recorded
	Partitions int // partitions they are of
	Logs       int // commit logs read
	Opens      int // node processes that opened one
	Torn       int // lines cut short by a kill in mid-write
	// HandedOver counts acknowledgements made just after an orderly
	// handoff that carried the writes (not checked: the next master's
	// history holds them, so they accept nothing).
	HandedOver int
	// Conflicts are the pairs of acknowledgements that show two writers
	// at once, in time order of the later one.
	Conflicts []WriterConflict
}

// WriterConflict is two acknowledgements that cannot both come from the
// partition's one master: Later was made after Earlier (by wall clock)
// by another node under the same epoch, or under an older epoch than
// Earlier's.
type WriterConflict struct {
	Earlier, Later commitlog.Record
}

func (c WriterConflict) String() string {
	why := fmt.Sprintf("%s acknowledged under epoch %d after %s acknowledged under epoch %d", c.Later.Node, c.Later.Epoch, c.Earlier.Node, c.Earlier.Epoch)
	if c.Later.Epoch == c.Earlier.Epoch {
		why = fmt.Sprintf("%s and %s both acknowledged under epoch %d", c.Earlier.Node, c.Later.Node, c.Later.Epoch)
	}
	return fmt.Sprintf("partition %d: %s, %s later (%s; then %s)", c.Later.Partition, why,
		c.Later.Time().Sub(c.Earlier.Time()), c.Earlier, c.Later)
}

// CheckWriters checks the acknowledgements of every node: per partition,
// in time order, the epochs they were made under never go back, and one
// epoch's are all one node's. A master acknowledges only while it holds
// its lease, and a lease at a later epoch starts only after every earlier
// one ran out, so an acknowledgement under an older epoch after one under
// a newer (a stale master answering after the next one started), or two
// nodes under one epoch, is two nodes accepting writes at once. The same
// node re-elected at a higher epoch is one writer. Acknowledgements
// made after a handoff carried their writes are left out.
func CheckWriters(recs []commitlog.Record) []WriterConflict {
	byPart := map[int][]commitlog.Record{}
	for _, r := range recs {
		if r.HandedOver {
			continue
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	var out []WriterConflict
	for _, p := range sortedInts(byPart) {
		rs := byPart[p]
		// Ties in time are ordered by epoch: only a later time is
		// evidence of an order.
		sort.SliceStable(rs, func(i, j int) bool {
			if rs[i].At != rs[j].At {
				return rs[i].At < rs[j].At
			}
			return rs[i].Epoch < rs[j].Epoch
		})
		var newest *commitlog.Record            // the latest acknowledgement under the highest epoch so far
		lastOf := map[uint64]commitlog.Record{} // the latest acknowledgement under each epoch
		for i := range rs {
			r := rs[i]
			switch prev, seen := lastOf[r.Epoch]; {
			case seen && prev.Node != r.Node:
				out = append(out, WriterConflict{Earlier: prev, Later: r})
			case newest != nil && r.Epoch < newest.Epoch:
				out = append(out, WriterConflict{Earlier: *newest, Later: r})
			}
			lastOf[r.Epoch] = r
			if newest == nil || r.Epoch >= newest.Epoch {
				newest = &rs[i]
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Later.At < out[j].Later.At })
	return out
}

func sortedInts[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// checkWriters reads every commit log in the cluster's directory (every
// node's that ever ran, removed or not) and checks them.
func checkWriters(dir string) (WritersResult, error) {
	var res WritersResult
	paths, err := filepath.Glob(filepath.Join(dir, "*"+commitLogSuffix))
	if err != nil {
		return res, err
	}
	var recs []commitlog.Record
	var errs []error
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c, err := commitlog.Read(f)
		f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(path), err))
			continue
		}
		res.Logs++
		res.Opens += c.Opens
		res.Torn += c.Torn
		recs = append(recs, c.Records...)
	}
	parts := map[int]bool{}
	for _, r := range recs {
		parts[r.Partition] = true
		if r.HandedOver {
			res.HandedOver++
		}
	}
	res.Acks, res.Partitions = len(recs), len(parts)
	res.Conflicts = CheckWriters(recs)
	if len(paths) == 0 {
		errs = append(errs, fmt.Errorf("no commit log (*%s) in %s", commitLogSuffix, dir))
	}
	return res, errors.Join(errs...)
}

// Row is the report's line for the check.
func (w WritersResult) Row() string {
	if w.Logs == 0 {
		return "not checked (no commit logs)"
	}
	torn := ""
	if w.HandedOver > 0 {
		torn = fmt.Sprintf(", %d after a handoff", w.HandedOver)
	}
	if w.Torn > 0 {
		torn += fmt.Sprintf(", %d torn last lines", w.Torn)
	}
	if len(w.Conflicts) == 0 {
		return fmt.Sprintf("yes (%d acknowledgements, %d partitions, %d logs%s)", w.Acks, w.Partitions, w.Logs, torn)
	}
	return fmt.Sprintf("NO: %d conflicting pairs in %d acknowledgements%s", len(w.Conflicts), w.Acks, torn)
}

// Failure is the check's failure, or "".
func (w WritersResult) Failure() string {
	if len(w.Conflicts) == 0 {
		return ""
	}
	var l []string
	for _, c := range w.Conflicts {
		l = append(l, c.String())
	}
	return fmt.Sprintf("%d times two nodes accepted writes for one partition at once:\n  %s", len(l), strings.Join(first(l, 10), "\n  "))
}

package node

import (
	"fmt"
	"strings"
	"time"

	"github.com/shoal-db/shoal/replicate"
)

// drainWaitLogEvery is how long a draining node's copy stays in a
// partition's list before the master logs why, and how often it logs it
// again while the copy stays.
const drainWaitLogEvery = 30 * time.Second

// drainWaits remembers since when each draining node's copy of each
// partition this node masters has been kept in the partition's list (see
// chooseReplicas), so that a drain that waits long says in the log what
// it waits for. Owned by chooseReplicas.
type drainWaits struct {
	since  map[drainWait]time.Time
	logged map[drainWait]time.Time
}

type drainWait struct {
	partition int
	replica   string
}

// kept records that replica's copy of partition was kept at now, and says
// whether to log why (kept for drainWaitLogEvery, and not logged within
// it), with how long it has been kept.
func (w *drainWaits) kept(partition int, replica string, now time.Time) (time.Duration, bool) {
	if w.since == nil {
		w.since, w.logged = map[drainWait]time.Time{}, map[drainWait]time.Time{}
	}
	k := drainWait{partition, replica}
	if _, ok := w.since[k]; !ok {
		w.since[k] = now
	}
	kept := now.Sub(w.since[k])
	if kept < drainWaitLogEvery || now.Sub(w.logged[k]) < drainWaitLogEvery {
		return kept, false
	}
	w.logged[k] = now
	return kept, true
}

// forgetAllBut drops every wait not in still (the copies kept this round).
func (w *drainWaits) forgetAllBut(still map[drainWait]bool) {
	for k := range w.since {
		if !still[k] {
			delete(w.since, k)
			delete(w.logged, k)
		}
	}
}

// describeCopies says what the shipper knows of each replica's copy of
// partition, for a log line: "node1 stream at 3.52 (heard 3)".
func describeCopies(sh *replicate.Shipper, partition int, replicas []string) string {
	var parts []string
	for _, r := range replicas {
		c := sh.Copy(r, partition)
		s := fmt.Sprintf("%s %s", r, c.Stage)
		if c.Known {
			s += " at " + c.Acked.String()
		}
		s += fmt.Sprintf(" (heard %d, queued %d", c.Heard, c.Queued)
		if !c.Running {
			s += ", sender stopped"
		}
		if c.LastError != "" {
			s += ", last error: " + c.LastError
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, "; ")
}

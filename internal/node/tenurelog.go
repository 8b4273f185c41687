package node

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/shoal-db/shoal/internal/wording"
)

// tenureLog gathers the partitions this node became master of, so that a
// round of them is logged in one line ("master of 101 partitions, epoch
// 1"), not one line each (a node's start printed 271); each partition's
// own line is at debug level.
type tenureLog struct {
	mu     sync.Mutex
	won    []int
	lo, hi uint64 // the epochs won, lowest and highest
}

// add records that this node became master of partition p at epoch.
func (l *tenureLog) add(p int, epoch uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.won) == 0 || epoch < l.lo {
		l.lo = epoch
	}
	l.hi = max(l.hi, epoch)
	l.won = append(l.won, p)
}

// flush logs what was recorded since the last flush, if anything.
func (l *tenureLog) flush(log *slog.Logger) {
	l.mu.Lock()
	won, lo, hi := l.won, l.lo, l.hi
	l.won, l.lo, l.hi = nil, 0, 0
	l.mu.Unlock()
	if len(won) == 0 {
		return
	}
	slices.Sort(won)
	epochs := fmt.Sprintf("epoch %d", lo)
	if hi != lo {
		epochs = fmt.Sprintf("epochs %d to %d", lo, hi)
	}
	log.Info(fmt.Sprintf("master of %s, %s", wording.Plural(len(won), "partition"), epochs), "partitions", wording.Ranges(won))
}

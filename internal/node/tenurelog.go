package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/shoal-db/shoal/internal/wording"
	"github.com/shoal-db/shoal/placement"
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

// verdictLog remembers the campaign rule's last verdict per partition and
// logs, at debug, each change with the inputs that made it: what a fault
// run's debug log needs to tell why a node did or did not campaign.
type verdictLog struct {
	mu   sync.Mutex
	last map[int]string
}

func (v *verdictLog) note(log *slog.Logger, p int, verdict string, in placement.WantInput, l placement.Lapse) {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	v.mu.Lock()
	changed := v.last[p] != verdict
	if changed {
		if v.last == nil {
			v.last = map[int]string{}
		}
		v.last[p] = verdict
	}
	v.mu.Unlock()
	if changed {
		log.Debug("campaign rule's verdict changed", "partition", p, "verdict", verdict,
			"table_master", in.Assignment.Master, "table_epoch", in.Assignment.Epoch, "regular", in.Regular,
			"holding", in.Holding, "stopping", in.Stopping, "handing_off", in.HandingOff, "receiving", in.Receiving,
			"superseded", in.Superseded, "learned_holder", in.LearnedHolder, "newest_epoch", in.NewestEpoch,
			"lapse_holder", l.Holder, "lapse_epoch", l.Epoch, "lapse_ended", l.Ended)
	}
}

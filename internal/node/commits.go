package node

import (
	"log/slog"
	"time"

	"github.com/shoal-db/shoal/api"
	"github.com/shoal-db/shoal/internal/commitlog"
	"github.com/shoal-db/shoal/internal/logsafe"
)

// commitRecorder is COMMIT_LOG as the API sees it (api.Acknowledger):
// each acknowledgement is one line of the log; a line that cannot be
// written is logged (rate-limited) and the write is answered all the
// same (the log is evidence for a fault test, not part of the data).
type commitRecorder struct {
	log    *commitlog.Log
	logger *slog.Logger
	limit  *logsafe.Limiter
}

func openCommitLog(path, node string, logger *slog.Logger) (*commitRecorder, error) {
	l, err := commitlog.Open(path, node)
	if err != nil {
		return nil, err
	}
	return &commitRecorder{log: l, logger: logger, limit: logsafe.NewLimiter(5, time.Minute, time.Now)}, nil
}

func (c *commitRecorder) Acknowledged(a api.Acknowledgement) {
	err := c.log.Append(commitlog.Record{Partition: a.Partition, Epoch: a.Epoch, First: a.First, Last: a.Last, At: a.At.UnixNano(), HandedOver: a.HandedOver})
	if err != nil {
		if ok, held := c.limit.Allow(); ok {
			c.logger.Error("could not record an acknowledged write", "partition", a.Partition, "epoch", a.Epoch, "err", err, "held_back", held)
		}
	}
}

func (c *commitRecorder) Close() error { return c.log.Close() }

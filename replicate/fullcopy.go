package replicate

import (
	"log/slog"

	"github.com/shoal-db/shoal/record"
)

// fullCopy sends a replica every document and tombstone of a partition in
// key order, in chunks that each replace the replica's copy of a key range;
// only the final chunk moves the replica to target. Interrupted, it starts
// over from the first key: the replica's position has not moved.
func (s *Shipper) fullCopy(d *dest, pr *progress, p int, epoch uint64, acked, target record.Position) error {
	// A copy of an empty partition is a new store's first (every copy of
	// a new store awaits one): not worth a line at info.
	level := slog.LevelInfo
	if target == (record.Position{}) {
		level = slog.LevelDebug
	}
	s.log.Log(s.ctx, level, "sending a replica a full copy: it is behind the tombstone horizon, or awaits one (its store is new, or it threw its copy away)",
		"replica", d.id, "partition", p, "acked", acked, "horizon", s.horizon(p), "target", target)
	if s.cfg.Observer != nil {
		s.cfg.Observer.FullCopyStarted(p)
	}
	after := ""
	for {
		limit := s.scanLimit(pr)
		docs, err := s.cfg.Source.ScanKeys(s.ctx, p, after, limit)
		if err != nil {
			s.scanFailed(pr, limit)
			return err
		}
		sizes := s.scanned(pr, limit, docs)
		more := len(docs) == limit
		keyTo := 0 // the header names the chunk's last key
		for _, doc := range docs {
			keyTo = max(keyTo, quotedSize(doc.Key))
		}
		rm := newRoom(s.cfg.MaxBatchDocs, s.cfg.MaxBatchBytes-wireBatchBase-quotedSize(after)-keyTo)
		if n := rm.take(0, sizes); n < len(docs) {
			docs, more = docs[:n], true
		}
		// Read after the scan: it covers every tombstone the scan missed.
		b, last := fullCopyChunk(p, epoch, after, docs, more, acked, target, s.horizon(p))
		s.stamp(&b)
		if ok, err := s.sendChunk(d, pr, b); !ok {
			return err
		}
		if last {
			s.log.Log(s.ctx, level, "full copy done", "replica", d.id, "partition", p, "at", target)
			s.mu.Lock()
			pr.caughtUp(true)
			s.mu.Unlock()
			return nil
		}
		if err := s.flushLive(d); err != nil {
			return err
		}
		after = b.KeyTo
	}
}

// fullCopyChunk builds the chunk of a full copy that follows the key after,
// from the documents scanned after it, in key order: while more may follow
// them it covers up to the last of them; otherwise it covers to the end
// and, being the final chunk, carries the target position.
func fullCopyChunk(p int, epoch uint64, after string, docs []*record.Doc, more bool, acked, target, horizon record.Position) (record.Batch, bool) {
	b := record.Batch{Partition: p, Epoch: epoch, UpTo: acked, Docs: docs, Full: true, KeyFrom: after, Horizon: horizon}
	if !more {
		b.UpTo = target
		return b, true
	}
	b.KeyTo = docs[len(docs)-1].Key
	return b, false
}

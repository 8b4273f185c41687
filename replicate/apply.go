package replicate

import (
	"context"
	"errors"
	"sync"

	"github.com/shoal-db/shoal/store"
)

// Apply answers a request on the replica's side. The batches of each
// partition are applied in order, the partitions side by side (each has
// its own writer); the positions they reach are then made durable in one
// store write, before the answer says so.
func Apply(ctx context.Context, w *store.Writer, req Request) Response {
	out := Response{Results: make([]Result, len(req.Batches))}
	byPartition := map[int][]int{} // partition -> indexes of its batches, in order
	for i, wb := range req.Batches {
		byPartition[wb.Partition] = append(byPartition[wb.Partition], i)
	}
	var wg sync.WaitGroup
	for _, idx := range byPartition {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range idx {
				out.Results[i] = result(req.Batches[i].Partition, w.Apply(ctx, FromWire(req.Batches[i])))
			}
		}()
	}
	wg.Wait()
	if err := w.SyncApplied(ctx); err != nil {
		for i := range out.Results {
			if r := &out.Results[i]; r.Code == CodeOK {
				r.Code, r.Error = CodeError, err.Error()
			}
		}
	}
	return out
}

// result turns the outcome of one batch into its answer.
func result(partition int, r store.ApplyResult) Result {
	res := Result{Partition: partition, Applied: r.Applied, Epoch: r.Epoch, Code: CodeOK}
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, store.ErrGap):
		res.Code = CodeGap
	case errors.Is(r.Err, store.ErrDiverged):
		res.Code, res.Diverged = CodeDiverged, r.Diverged
	case errors.Is(r.Err, store.ErrStaleEpoch):
		res.Code = CodeStaleEpoch
	case errors.Is(r.Err, store.ErrIsMaster):
		res.Code = CodeIsMaster
	case errors.Is(r.Err, store.ErrNeedsFullCopy):
		res.Code = CodeFullCopy
	default:
		res.Code, res.Error = CodeError, r.Err.Error()
	}
	return res
}

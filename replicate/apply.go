package replicate

import (
	"context"
	"errors"
	"sync"

	"github.com/shoal-db/shoal/record"
	"github.com/shoal-db/shoal/replicate/applybatch"
)

// Applier is the replica's side of the store that Apply drives: the
// partitions' writers (store.Writer), each batch applied on its
// partition's writer, then the reached positions made durable at once.
type Applier interface {
	Apply(ctx context.Context, b record.Batch) applybatch.Result
	SyncApplied(ctx context.Context) error
}

// Apply answers a request on the replica's side. The batches of each
// partition are applied in order, the partitions side by side (each has
// its own writer); the positions they reach are then made durable in one
// store write, before the answer says so.
func Apply(ctx context.Context, w Applier, req Request) Response {
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
func result(partition int, r applybatch.Result) Result {
	res := Result{Partition: partition, Applied: r.Applied, Epoch: r.Epoch, Code: CodeOK}
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, applybatch.ErrGap):
		res.Code = CodeGap
	case errors.Is(r.Err, applybatch.ErrDiverged):
		res.Code, res.Diverged = CodeDiverged, r.Diverged
	case errors.Is(r.Err, applybatch.ErrStaleEpoch):
		res.Code = CodeStaleEpoch
	case errors.Is(r.Err, applybatch.ErrIsMaster):
		res.Code = CodeIsMaster
	case errors.Is(r.Err, applybatch.ErrNeedsFullCopy):
		res.Code = CodeFullCopy
	default:
		res.Code, res.Error = CodeError, r.Err.Error()
	}
	return res
}

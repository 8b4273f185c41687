package replicate

import (
	"context"
	"slices"

	"github.com/shoal-db/shoal/store"
)

// wiring implements the shipper's Mastership, Source, Transport and Observer from
// functions, for tests; a nil function answers the zero value (and Send
// nothing at all).
type wiring struct {
	epoch      func(int) (uint64, bool)
	replicas   func(int) []string
	uncounted  func(int) []string
	copies     func() int
	last       func(int) store.Position
	epochStart func(int, uint64) store.Position
	epochs     func(int, uint64) []store.EpochStart
	horizon    func(int) store.Position
	get        func(context.Context, int, string) (*store.Doc, error)
	scan       func(context.Context, int, store.Position, int) ([]*store.Doc, error)
	scanKeys   func(context.Context, int, string, int) ([]*store.Doc, error)
	count      func(context.Context, int, store.Position) (int64, error)
	send       func(context.Context, string, Request) (Response, error)
	// fullCopyStarted, if set, is told of every full copy begun.
	fullCopyStarted func(int)
}

// config is a shipper Config over w, with base's bounds.
func (w *wiring) config(base Config) Config {
	base.Mastership, base.Source, base.Transport, base.Observer = w, w, w, w
	return base
}

func (w *wiring) Epoch(p int) (uint64, bool) {
	if w.epoch == nil {
		return 0, false
	}
	return w.epoch(p)
}

func (w *wiring) Replicas(p int) []string {
	if w.replicas == nil {
		return nil
	}
	return w.replicas(p)
}

func (w *wiring) Counted(p int, _ uint64, replicas []string) []string {
	if w.uncounted == nil {
		return replicas
	}
	u := w.uncounted(p)
	return slices.DeleteFunc(slices.Clone(replicas), func(r string) bool { return slices.Contains(u, r) })
}

func (w *wiring) Copies() int {
	if w.copies == nil {
		return 0
	}
	return w.copies()
}

func (w *wiring) Last(p int) store.Position {
	if w.last == nil {
		return store.Position{}
	}
	return w.last(p)
}

func (w *wiring) EpochStart(p int, e uint64) store.Position {
	if w.epochStart == nil {
		return store.Position{}
	}
	return w.epochStart(p, e)
}

func (w *wiring) Epochs(p int, e uint64) []store.EpochStart {
	if w.epochs == nil {
		return nil
	}
	return w.epochs(p, e)
}

func (w *wiring) Horizon(p int) store.Position {
	if w.horizon == nil {
		return store.Position{}
	}
	return w.horizon(p)
}

func (w *wiring) Get(ctx context.Context, p int, key string) (*store.Doc, error) {
	if w.get == nil {
		return nil, store.ErrNotFound
	}
	return w.get(ctx, p, key)
}

func (w *wiring) Scan(ctx context.Context, p int, after store.Position, limit int) ([]*store.Doc, error) {
	if w.scan == nil {
		return nil, nil
	}
	return w.scan(ctx, p, after, limit)
}

func (w *wiring) ScanKeys(ctx context.Context, p int, afterKey string, limit int) ([]*store.Doc, error) {
	if w.scanKeys == nil {
		return nil, nil
	}
	return w.scanKeys(ctx, p, afterKey, limit)
}

func (w *wiring) Count(ctx context.Context, p int, after store.Position) (int64, error) {
	if w.count == nil {
		return 0, nil
	}
	return w.count(ctx, p, after)
}

func (w *wiring) Send(ctx context.Context, replica string, req Request) (Response, error) {
	if w.send == nil {
		return Response{}, context.Canceled
	}
	return w.send(ctx, replica, req)
}

func (w *wiring) FullCopyStarted(p int) {
	if w.fullCopyStarted != nil {
		w.fullCopyStarted(p)
	}
}

func (w *wiring) Copied(string, int, int, int64) {}

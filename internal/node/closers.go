package node

import (
	"context"
	"errors"
)

// closers is a stack of what a node opened: each part, once open, pushes
// what closes it, and close runs them last first. StartWith runs it when
// it fails part way, Close when the node stops.
type closers []func(ctx context.Context) error

func (cs *closers) push(close func(ctx context.Context) error) { *cs = append(*cs, close) }

// close runs every closer, the last pushed first, each even when one
// before it failed, and empties the stack; it returns their errors joined
// in the order they ran.
func (cs *closers) close(ctx context.Context) error {
	var errs []error
	for len(*cs) > 0 {
		last := len(*cs) - 1
		close := (*cs)[last]
		*cs = (*cs)[:last]
		if err := close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

package engine

import (
	"context"

	"github.com/sluice-project/sluice/internal/store"
)

// StepChildren returns the children the step named step made of item parent, in ordinal order.
// It is the read of the core a collecting action needs (a dataset request's result reads its
// files' outcomes): a domain's read port declares it, and the engine serves it locally, so that
// the action itself holds no store.
func (e *Engine) StepChildren(ctx context.Context, parent int64, step string) ([]*store.Item, error) {
	return e.store.ItemListChildren(ctx, parent, step)
}

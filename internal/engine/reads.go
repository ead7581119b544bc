package engine

import (
	"context"

	"github.com/sluice-project/sluice/internal/store"
)

// Job returns the job id as the store holds it now; a missing job is an error wrapping
// [store.ErrNotFound].
func (e *Engine) Job(ctx context.Context, id int64) (*store.Job, error) {
	return e.store.JobGet(ctx, id)
}

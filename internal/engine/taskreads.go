package engine

import (
	"context"

	"github.com/sluice-project/sluice/internal/store"
)

// The reads below are what whoever runs a task (a worker, the remote worker protocol) needs of
// the database outside a transaction: the task's item and job, the children an earlier attempt
// of it recorded, and the conversion cache. Each is one statement; none locks.

// TaskItem returns the item task runs on, as committed.
func (e *Engine) TaskItem(ctx context.Context, task *store.Task) (*store.Item, error) {
	return e.store.ItemGet(ctx, task.ItemID)
}

// TaskJob returns the job of a task, by its id, as committed: its workflow, creation time (which
// identifies its trace) and state (whether the task's attempt still counts).
func (e *Engine) TaskJob(ctx context.Context, jobID int64) (*store.Job, error) {
	return e.store.JobGet(ctx, jobID)
}

// EarlierChildren returns up to limit children an earlier attempt of task recorded, from
// ordinal from on, in ordinal order: what an attempt that runs again compares its own with.
func (e *Engine) EarlierChildren(ctx context.Context, task *store.Task, from, limit int) ([]*store.Item, error) {
	return e.store.ItemListChildrenFrom(ctx, task.ItemID, task.Step, from, limit)
}

// CachedEffects returns the conversion cache's entry under key; [store.ErrNotFound] when it has
// none.
func (e *Engine) CachedEffects(ctx context.Context, key string) ([]byte, error) {
	return e.store.CacheGet(ctx, key)
}

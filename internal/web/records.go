package web

import (
	"context"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Records is what the UI reads of the engine's records: what the API reads, and the tasks of
// items, the events fired on them and the domains' tables it shows (the fleet register). A
// [store.Store] satisfies it. The UI never writes through it: its forms go through the API's
// handler, and the API through the engine.
type Records interface {
	api.Records
	ItemGetMany(ctx context.Context, ids []int64) ([]*record.Item, error)
	TaskCounts(ctx context.Context, jobID int64) ([]record.TaskCount, error)
	TaskListByJob(ctx context.Context, p store.TaskListParams) ([]*record.Task, error)
	TaskListByItem(ctx context.Context, itemID int64) ([]*record.Task, error)
	TaskListByItems(ctx context.Context, itemIDs []int64) ([]*record.Task, error)
	EventListByItem(ctx context.Context, itemID int64) ([]string, error)
	DocumentList(ctx context.Context, p store.DocumentListParams) ([]*store.Document, error)
	DocumentCounts(ctx context.Context, p store.DocumentListParams) ([]store.TypeCount, error)
}

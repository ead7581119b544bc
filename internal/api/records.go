package api

import (
	"context"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Records is what the API reads of the engine's records: jobs, items, their outputs and the
// stored workflows. A [store.Store] satisfies it. The API never writes through it: every change
// of state (create, seal, cancel, retry, fire, apply a workflow) is a method of the engine.
type Records interface {
	JobGet(ctx context.Context, id int64) (*record.Job, error)
	JobList(ctx context.Context, p store.JobListParams) ([]*record.Job, error)
	JobListRunning(ctx context.Context) ([]*record.Job, error)
	ItemGet(ctx context.Context, id int64) (*record.Item, error)
	ItemList(ctx context.Context, p store.ItemListParams) ([]*record.Item, error)
	OutputList(ctx context.Context, p store.OutputListParams) ([]*record.Output, error)
	OutputHistoryList(ctx context.Context, itemID int64) ([]*record.SupersededOutput, error)
	WorkflowGet(ctx context.Context, name string, version int) (*record.Workflow, error)
	WorkflowList(ctx context.Context) ([]*record.Workflow, error)
	// QueueStats is what GET /v1/queues and /metrics read the queues from (package scale).
	QueueStats(ctx context.Context, p store.QueueStatsParams) ([]store.QueueStat, error)
	// DomainSQL is what the domains' typed stores read through (documents search, fleet).
	DomainSQL() store.DomainSQL
}

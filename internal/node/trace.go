package node

import (
	"context"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/tracing"
)

// traceJobEnd records the span of a job this process ended (package tracing): one read of the
// job's row per job, for its creation and end times.
func (n *Node) traceJobEnd(jobID int64, _ record.JobState) {
	ctx := context.Background()
	if j, err := n.Store.JobGet(ctx, jobID); err == nil {
		tracing.EndJob(ctx, j)
	}
}

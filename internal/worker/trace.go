package worker

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/tracing"
)

// traceAttempt starts the span of an attempt of t, a child of its job's span (package tracing).
// The job's creation time, which identifies its trace, comes from the worker's cache of jobs.
// With no tracer provider set, it returns ctx and a no-op span: no job lookup, no span.
func (w *Worker) traceAttempt(ctx context.Context, t *record.Task) (context.Context, trace.Span) {
	if tracing.Off() {
		return ctx, noop.Span{}
	}
	return tracing.Attempt(ctx, t, w.jobCreated(ctx, t.JobID))
}

// jobCreated returns when the job was created, from the cache jobWorkflow fills.
func (w *Worker) jobCreated(ctx context.Context, jobID int64) (created time.Time) {
	if _, _, err := w.jobWorkflow(ctx, jobID); err == nil {
		w.jobs.mu.Lock()
		created = w.jobs.m[jobID].created
		w.jobs.mu.Unlock()
	}
	if created.IsZero() { // the cache was cleared in between, or the job could not be read
		if j, err := w.e.TaskJob(ctx, jobID); err == nil {
			created = j.CreatedAt
		}
	}
	return created
}

// traceCommit starts the span of the transaction committing batch, linked to the spans of the
// attempts whose results it commits.
func traceCommit(ctx context.Context, batch []op) (context.Context, trace.Span) {
	ctx, span := tracing.Commit(ctx, len(batch))
	if span.IsRecording() {
		for _, o := range batch {
			if o.span.IsValid() {
				span.AddLink(trace.Link{SpanContext: o.span})
			}
		}
	}
	return ctx, span
}

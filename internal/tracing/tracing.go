// Package tracing gives Sluice's work OpenTelemetry spans: a span per job, per task attempt
// (in process or on a remote worker) and per store commit, all of one job in one trace.
//
// A job's trace outlives any process — a job may run for days, across restarts and on many
// machines — so its ids are not kept anywhere: they are derived from the job's id and creation
// time ([JobContext]), which every process reads from the same row. A task attempt's span is a
// child of the job's span wherever it runs; the job's span itself is recorded, with the job's
// creation and end as its start and end, by the process that ends the job ([EndJob]).
//
// Spans go to the OpenTelemetry global tracer provider, as OpenTelemetry's instrumentation
// libraries do: `sluice` sets it from the standard OTEL_* variables ([Setup]); a program
// embedding the engine sets its own with otel.SetTracerProvider. Without one, every call here
// is a no-op.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-project/sluice/internal/record"
)

// Name is the instrumentation scope of Sluice's spans.
const Name = "github.com/sluice-project/sluice"

// The spans' names.
const (
	SpanJob       = "sluice.job"
	SpanTask      = "sluice.task"
	SpanCommit    = "sluice.commit"
	SpanFragment  = "sluice.worker.fragment"
	SpanConverter = "sluice.converter"
)

func tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(Name) }

// unset is the global tracer provider as OpenTelemetry starts it: until a provider is set with
// otel.SetTracerProvider (by [Setup] or a program embedding the engine), GetTracerProvider
// returns it, and every span is a no-op.
var unset = otel.GetTracerProvider()

// Off reports whether no tracer provider has been set, so that a caller on a hot path (an
// attempt per task) can skip building a span that would do nothing: the job's span context
// (a SHA-256), the no-op span and the context values cost about 2 µs a task.
func Off() bool { return otel.GetTracerProvider() == unset }

// JobContext returns the span context of the job's span: its trace id and span id are the
// first 24 bytes of SHA-256 over the job's id and creation time (in milliseconds, as every
// store driver keeps it), so every process computes the same ones. It is marked remote: spans
// started under it are its children without it being recorded here.
func JobContext(jobID int64, created time.Time) trace.SpanContext {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(jobID))
	binary.BigEndian.PutUint64(b[8:], uint64(created.UnixMilli()))
	sum := sha256.Sum256(append([]byte("sluice job "), b[:]...))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// spanKindInternal is the option of every attempt's span, made once.
var spanKindInternal = trace.WithSpanKind(trace.SpanKindInternal)

// Attempt starts the span of one attempt of a task, a child of its job's span (the job created
// at created). End it with [End].
func Attempt(ctx context.Context, t *record.Task, created time.Time) (context.Context, trace.Span) {
	ctx = trace.ContextWithRemoteSpanContext(ctx, JobContext(t.JobID, created))
	ctx, span := tracer().Start(ctx, SpanTask, spanKindInternal)
	if span.IsRecording() { // not with tracing off: every task pays for this call
		span.SetAttributes(attribute.String("action", t.Action), attribute.String("step", t.Step), attribute.Int64("job_id", t.JobID),
			attribute.Int64("item_id", t.ItemID), attribute.Int64("task_id", t.ID), attribute.Int("attempt", t.Attempt))
	}
	return ctx, span
}

// End ends span with err as its status.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// EndJob records the span of a job that ended: from its creation to its end, with its
// workflow and final state. The process whose transaction ended the job calls it.
func EndJob(ctx context.Context, j *record.Job) {
	sc := JobContext(j.ID, j.CreatedAt)
	// The job span's own ids are the derived ones, so that the attempts' spans are its
	// children: [IDs] hands them out (Setup installs it); under a provider without it, the
	// span gets ids of its own and the attempts are in another trace.
	ctx = withIDs(ctx, sc)
	end := j.FinishedAt
	if end.IsZero() {
		end = time.Now()
	}
	_, span := tracer().Start(ctx, SpanJob, trace.WithNewRoot(), trace.WithTimestamp(j.CreatedAt), trace.WithAttributes(
		attribute.Int64("job_id", j.ID), attribute.String("workflow", j.WorkflowName),
		attribute.Int("workflow_version", j.WorkflowVersion), attribute.String("state", string(j.State))))
	if j.State == record.JobFailed {
		span.SetStatus(codes.Error, j.Error)
	}
	span.End(trace.WithTimestamp(end))
}

// Commit starts the span of a store transaction committing a batch of ops. Its caller links it
// to the spans of the task attempts whose results it commits.
func Commit(ctx context.Context, ops int) (context.Context, trace.Span) {
	return tracer().Start(ctx, SpanCommit, trace.WithNewRoot(), trace.WithAttributes(attribute.Int("ops", ops)))
}

// Traceparent returns the W3C traceparent header of the span in ctx, which the worker protocol
// sends with a task and accepts back on its fragments; "" unless the span is recording (with
// tracing off, nothing is sent).
func Traceparent(ctx context.Context) string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Inject sets the traceparent header of an outbound request made for the span in ctx (the http
// action's calls), when it is recording.
func Inject(ctx context.Context, h http.Header) {
	if tp := Traceparent(ctx); tp != "" {
		h.Set("Traceparent", tp)
	}
}

// Converter starts the span of a converter run (a sandboxed subprocess) under the attempt's.
func Converter(ctx context.Context, tool string) (context.Context, trace.Span) {
	ctx, span := tracer().Start(ctx, SpanConverter)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("tool", tool))
	}
	return ctx, span
}

// Extract returns ctx with the remote span context of the request's traceparent header, if it
// has a valid one.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(h))
}

// Fragment starts the span of a fragment request of the worker protocol: a child of the
// worker's span when the request carries its traceparent, else of the task's attempt span.
func Fragment(ctx context.Context, r *http.Request, task trace.SpanContext, fragment string) (context.Context, trace.Span) {
	ctx = trace.ContextWithRemoteSpanContext(ctx, task)
	ctx = Extract(ctx, r.Header)
	return tracer().Start(ctx, SpanFragment, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("fragment", fragment)))
}

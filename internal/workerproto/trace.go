package workerproto

import (
	"context"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/tracing"
)

// sessionTrace is the span of a remote task attempt (package tracing): started when the task is
// handed out, ended when its result is applied, it times out, is canceled or is given back. Its
// traceparent goes to the worker with the task (header and task JSON), and the worker's
// fragment requests may send one back, which parents their spans. The zero value records
// nothing.
type sessionTrace struct {
	span trace.Span
	tp   string
	once sync.Once
}

// start starts the span of the attempt of task, in the trace of its job, created then.
func (st *sessionTrace) start(ctx context.Context, task *record.Task, created time.Time) {
	ctx, st.span = tracing.Attempt(context.WithoutCancel(ctx), task, created)
	st.span.SetAttributes(attribute.Bool("remote", true))
	st.tp = tracing.Traceparent(ctx)
}

// parent returns the attempt's traceparent, "" when it has no span.
func (st *sessionTrace) parent() string { return st.tp }

// setHeader sets the traceparent header of a response carrying the task.
func (st *sessionTrace) setHeader(h http.Header) {
	if st.tp != "" {
		h.Set("Traceparent", st.tp)
	}
}

// end ends the span, once, with how the task ended.
func (st *sessionTrace) end(ended string) {
	if st.span == nil {
		return
	}
	st.once.Do(func() {
		st.span.SetAttributes(attribute.String("ended", ended))
		st.span.End()
	})
}

// fragment starts the span of a fragment request, a child of the worker's span when the
// request has a traceparent, else of the attempt's.
func (st *sessionTrace) fragment(r *http.Request, name string) (context.Context, trace.Span) {
	var sc trace.SpanContext
	if st.span != nil {
		sc = st.span.SpanContext()
	}
	return tracing.Fragment(r.Context(), r, sc, name)
}

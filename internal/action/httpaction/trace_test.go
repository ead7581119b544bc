package httpaction

import (
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestTraceparent checks that a call made for a traced attempt carries its trace context, and
// that one made with tracing off carries none.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, respond(http.StatusOK, ""))
	with := map[string]any{"url": srv.URL, "method": "GET"}
	if _, err := run(t, t.Context(), with, nil); err != nil {
		t.Fatal(err)
	}
	if h := (<-reqs).header.Get("Traceparent"); h != "" {
		t.Errorf("untraced call sent traceparent %q", h)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(t.Context())
	ctx, span := tp.Tracer("test").Start(t.Context(), "attempt")
	defer span.End()
	if _, err := run(t, ctx, with, nil); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if h := (<-reqs).header.Get("Traceparent"); !strings.EqualFold(h, want) {
		t.Errorf("traced call sent traceparent %q, want %q", h, want)
	}
}

package converter

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-project/sluice/internal/tracing"
)

// TestConverterSpan checks that a converter run is a span under the attempt's, naming the tool,
// with the run's failure as its status. Not parallel: it sets the global tracer provider.
func TestConverterSpan(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) }()

	ctx, attempt := tp.Tracer("test").Start(t.Context(), "attempt")
	r := &Runner{Dir: t.TempDir()}
	if err := r.Run(ctx, "sh", []string{"-c", "exit 3"}, nil); err == nil {
		t.Fatal("sh -c 'exit 3' succeeded")
	}
	attempt.End()
	var found bool
	for _, s := range exp.GetSpans() {
		if s.Name != tracing.SpanConverter {
			continue
		}
		found = true
		if s.Parent.SpanID() != attempt.SpanContext().SpanID() || s.Status.Code != codes.Error || len(s.Attributes) != 1 || s.Attributes[0].Value.AsString() != "sh" {
			t.Errorf("converter span under %s, status %v, attributes %v", s.Parent.SpanID(), s.Status, s.Attributes)
		}
	}
	if !found {
		t.Error("no converter span")
	}
}

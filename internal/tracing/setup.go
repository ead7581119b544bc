package tracing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// Enabled reports whether the standard OpenTelemetry variables ask for traces to be exported:
// OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with OTEL_TRACES_EXPORTER unset; never with
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. Tracing is off by default.
func Enabled(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "otlp":
		return true
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return false
}

// Setup installs, when [Enabled], a global tracer provider that exports spans with OTLP over
// HTTP (protobuf) as the OTEL_* variables configure it — endpoint, headers, timeout, sampler
// (OTEL_TRACES_SAMPLER), batching (OTEL_BSP_*), service name (OTEL_SERVICE_NAME, default
// "sluice") — and the W3C trace-context propagator. The returned function flushes and stops
// the exporter; it does nothing when tracing is off.
func Setup(ctx context.Context, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	if !Enabled(getenv) {
		return func(context.Context) error { return nil }, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("%s=%s: sluice exports traces with OTLP over HTTP only (http/protobuf)", v, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res := resource.Default()
	if getenv("OTEL_SERVICE_NAME") == "" {
		res, _ = resource.Merge(res, resource.NewSchemaless(semconv.ServiceName("sluice")))
	}
	tp := NewProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return tp.Shutdown(ctx)
	}, nil
}

// NewProvider returns a tracer provider with opts and [IDs], so that a job's span has the ids
// its tasks' spans refer to.
func NewProvider(opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{sdktrace.WithIDGenerator(IDs())}, opts...)...)
}

// IDs returns an ID generator that hands a job's span the ids [JobContext] derives, and random
// ids to every other span.
func IDs() sdktrace.IDGenerator { return ids{} }

type ids struct{}

type idsKey struct{}

// withIDs returns ctx asking the generator for sc's ids for the next root span.
func withIDs(ctx context.Context, sc trace.SpanContext) context.Context {
	return context.WithValue(ctx, idsKey{}, sc)
}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(idsKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var t trace.TraceID
	for !t.IsValid() {
		putRandom(t[:])
	}
	return t, randomSpanID()
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID { return randomSpanID() }

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		putRandom(s[:])
	}
	return s
}

// putRandom fills b from math/rand/v2's ChaCha8-based generator: trace ids must be unique,
// not secret (the SDK's own generator is no stronger).
func putRandom(b []byte) {
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
}

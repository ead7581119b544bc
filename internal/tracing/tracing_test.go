package tracing

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/sluice-project/sluice/internal/record"
)

func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set: off", nil, false},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"a traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"exporter otlp", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, false},
		{"sdk disabled wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	} {
		if got := Enabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%s: Enabled = %v", tc.name, got)
		}
	}
	if _, err := Setup(t.Context(), func(k string) string {
		return map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}[k]
	}); err == nil {
		t.Error("Setup accepted OTLP over gRPC")
	}
}

// TestSetupExportsOTLP points the standard OTEL_* variables at a fake collector and checks that
// a job's span reaches it as OTLP over HTTP, with the job's derived trace id.
func TestSetupExportsOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var body []byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("X-Test"))
		body = append(body, b...)
		mu.Unlock()
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-test=yes")
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	shutdown, err := Setup(t.Context(), os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	EndJob(t.Context(), &record.Job{ID: 7, WorkflowName: "w", State: record.JobComplete, CreatedAt: created, FinishedAt: created.Add(time.Minute)})
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "POST /v1/traces application/x-protobuf yes" {
		t.Fatalf("collector got %q", got)
	}
	tid := JobContext(7, created).TraceID()
	if !bytes.Contains(body, tid[:]) || !bytes.Contains(body, []byte(SpanJob)) {
		t.Errorf("the export holds no span %s of trace %s", SpanJob, tid)
	}
}

// BenchmarkAttempt measures an attempt span with tracing off (the global no-op provider), the
// cost every task pays, against one recorded by the SDK.
func BenchmarkAttempt(b *testing.B) {
	task := &record.Task{ID: 1, JobID: 2, ItemID: 3, Action: "a", Step: "s", Attempt: 1}
	created := time.Now()
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, span := Attempt(context.Background(), task, created)
			End(span, nil)
		}
	})
	b.Run("sdk", func(b *testing.B) {
		tp := NewProvider()
		prev := otel.GetTracerProvider()
		otel.SetTracerProvider(tp)
		defer otel.SetTracerProvider(prev)
		b.ReportAllocs()
		for b.Loop() {
			_, span := Attempt(context.Background(), task, created)
			End(span, nil)
		}
	})
}

// Off says whether a provider is set: spans are skipped only while none is, and a provider set
// later (as a program embedding the engine does) turns them on.
func TestOff(t *testing.T) {
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)
	if prev == unset && !Off() {
		t.Error("Off() = false with no provider set")
	}
	otel.SetTracerProvider(NewProvider())
	if Off() {
		t.Error("Off() = true with a provider set")
	}
}

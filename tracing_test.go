package sluice_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/action"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/tracing"
	"github.com/sluice-project/sluice/remote"
)

// TestTraceOfOneJob records the spans of one job in memory: the job's span, an attempt span per
// task — the in-process ones and the remote worker's, whose worker continues the trace from the
// traceparent it was handed and sends its own back on its fragments — and the store commits,
// linked to the attempts they commit.
func TestTraceOfOneJob(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := tracing.NewProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	ctx := t.Context()
	e, err := sluice.Open(ctx, sluice.Config{DataDir: t.TempDir(), Actions: []action.Action{wordCount{}}, Remote: []string{"Upper"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	srv := httptest.NewServer(e.Handler())
	defer srv.Close()
	token, _ := e.CreateToken("worker")
	if _, _, err := e.ApplyWorkflow(ctx, []byte(`name: traced
steps:
  count: {action: wordcount, needs: [start]}
  up: {action: remote, with: {name: Upper}, needs: [start], when: root}
`)); err != nil {
		t.Fatal(err)
	}
	job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "traced", Files: []sluice.File{{Name: "a.txt", Content: strings.NewReader("one two")}}})
	if err != nil {
		t.Fatal(err)
	}

	// A remote worker that traces: its span "convert" continues the task's trace.
	c := &remote.Client{Server: srv.URL + "/v1/workers", Token: token}
	var task *remote.TaskHandle
	for task == nil {
		if task, err = c.Poll(ctx, "Upper"); err != nil {
			t.Fatal(err)
		}
	}
	handed := task.Traceparent
	resp, err := http.Get(task.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if handed == "" || resp.Header.Get("Traceparent") != handed {
		t.Fatalf("task JSON traceparent %q, task response header %q", handed, resp.Header.Get("Traceparent"))
	}
	wctx := propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": handed})
	wctx, convert := tp.Tracer("a-worker").Start(wctx, "convert")
	task.Traceparent = tracing.Traceparent(wctx)
	r, err := task.OpenBlob(wctx)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := io.ReadAll(r)
	r.Close()
	err = task.PostJSON(wctx, "0.json", remote.File{Filename: "a.upper", ContentType: "text/plain", LanguageCode: "en", Metadata: map[string]any{}})
	if err == nil {
		err = task.Post(wctx, "0.blob", strings.NewReader(strings.ToUpper(string(in))))
	}
	if err == nil {
		err = task.Post(wctx, "done", nil)
	}
	convert.End()
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if job, err = e.Wait(wait, job.ID); err != nil || job.State != sluice.JobComplete {
		t.Fatalf("job: %+v %v", job, err)
	}

	jobSC := tracing.JobContext(job.ID, job.CreatedAt)
	var jobSpan tracetest.SpanStub
	poll.Until(t, 10*time.Second, "the job's span", func() (bool, string) {
		for _, s := range exp.GetSpans() {
			if s.Name == tracing.SpanJob && s.SpanContext.TraceID() == jobSC.TraceID() {
				jobSpan = s
				return true, ""
			}
		}
		return false, ""
	})
	if jobSpan.SpanContext.SpanID() != jobSC.SpanID() || !attr(jobSpan, "state", "complete") || !attr(jobSpan, "workflow", "traced") ||
		!jobSpan.StartTime.Equal(job.CreatedAt) {
		t.Errorf("job span %s %v from %s", jobSpan.SpanContext.SpanID(), jobSpan.Attributes, jobSpan.StartTime)
	}

	var local []tracetest.SpanStub
	var remoteAttempt, worker tracetest.SpanStub
	var fragments []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() != jobSC.TraceID() {
			continue
		}
		switch {
		case s.Name == tracing.SpanTask && attr(s, "remote", "true"):
			remoteAttempt = s
		case s.Name == tracing.SpanTask:
			local = append(local, s)
		case s.Name == "convert":
			worker = s
		case s.Name == tracing.SpanFragment:
			fragments = append(fragments, s)
		}
	}
	// count ran on the root and on the worker's child.
	if len(local) != 2 {
		t.Fatalf("%d in-process attempt spans in the job's trace, want 2", len(local))
	}
	for _, s := range local {
		if s.Parent.SpanID() != jobSC.SpanID() || !attr(s, "action", "wordcount") || !attr(s, "attempt", "1") ||
			!attr(s, "job_id", itoa(job.ID)) || attrValue(s, "item_id") == "" {
			t.Errorf("attempt span %v under %s, want wordcount attempt 1 of job %d under the job span", s.Attributes, s.Parent.SpanID(), job.ID)
		}
	}
	if !remoteAttempt.SpanContext.IsValid() || remoteAttempt.Parent.SpanID() != jobSC.SpanID() || !attr(remoteAttempt, "ended", "done") {
		t.Errorf("remote attempt span %v under %s", remoteAttempt.Attributes, remoteAttempt.Parent.SpanID())
	}
	if !worker.SpanContext.IsValid() || worker.Parent.SpanID() != remoteAttempt.SpanContext.SpanID() {
		t.Errorf("the worker's span is under %s, want the remote attempt %s", worker.Parent.SpanID(), remoteAttempt.SpanContext.SpanID())
	}
	if len(fragments) != 3 {
		t.Errorf("%d fragment spans, want 3 (0.json, 0.blob, done)", len(fragments))
	}
	for _, f := range fragments {
		if f.Parent.SpanID() != worker.SpanContext.SpanID() {
			t.Errorf("fragment span %v under %s, want the worker's %s", f.Attributes, f.Parent.SpanID(), worker.SpanContext.SpanID())
		}
	}
	// Each in-process attempt's result was committed by a commit span linked to it.
	for _, a := range local {
		found := false
		for _, s := range exp.GetSpans() {
			for _, l := range s.Links {
				found = found || s.Name == tracing.SpanCommit && l.SpanContext.SpanID() == a.SpanContext.SpanID()
			}
		}
		if !found {
			t.Errorf("no commit span links to attempt %s", a.SpanContext.SpanID())
		}
	}
}

func attrValue(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == attribute.Key(key) {
			return kv.Value.Emit()
		}
	}
	return ""
}

func attr(s tracetest.SpanStub, key, want string) bool { return attrValue(s, key) == want }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

package httpaction

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/actiontest"
	"github.com/sluice-project/sluice/internal/egress"
)

// request is what a test server saw.
type request struct {
	method string
	uri    string
	header http.Header
	body   []byte
}

// serve starts a server that records each request and answers with h.
func serve(t *testing.T, h http.HandlerFunc) (*httptest.Server, <-chan request) {
	t.Helper()
	reqs := make(chan request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		reqs <- request{method: r.Method, uri: r.RequestURI, header: r.Header.Clone(), body: body}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, reqs
}

// respond answers with a status, headers (name, value pairs) and a body.
func respond(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// loopbackConfig allows the test servers' loopback addresses, which the default egress policy
// refuses.
func loopbackConfig(t *testing.T) Config {
	t.Helper()
	p, err := egress.New([]string{"127.0.0.0/8", "::1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Egress: p}
}

// run runs the http action on an item holding data with the given settings.
func run(t *testing.T, ctx context.Context, with map[string]any, data []byte) (*actiontest.Recorder, error) {
	t.Helper()
	task := actiontest.NewTask(t, "dir/report 1.pdf", "application/pdf", data, with, map[string]any{"lang": "fra"})
	task.Item.ID = 42
	task.JobID = 7
	task.Item.BlobSHA256 = "abc123"
	task.Item.Metadata = map[string]any{"token": "s3cret", "pages": 3}
	a := New(loopbackConfig(t))
	if err := a.Spec().Validate(with); err != nil {
		t.Fatalf("Validate(%v) = %v", with, err)
	}
	rec := &actiontest.Recorder{}
	return rec, a.Run(ctx, task, rec)
}

func TestItemBody(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, respond(http.StatusOK, "ignored"))
	with := map[string]any{
		"url":     srv.URL + "/items/{{.Item.ID}}/{{pathescape .Item.Name}}?lang={{.Item.Options.lang}}&step={{queryescape .Step}}",
		"headers": map[string]any{"Authorization": "Bearer {{.Item.Metadata.token}}", "x-job": "{{.Job}}"},
	}
	if _, err := run(t, t.Context(), with, []byte("blob")); err != nil {
		t.Fatal(err)
	}
	r := <-reqs
	if r.method != http.MethodPost {
		t.Errorf("method = %s; want POST", r.method)
	}
	if want := "/items/42/dir%2Freport%201.pdf?lang=fra&step=step"; r.uri != want {
		t.Errorf("uri = %s; want %s", r.uri, want)
	}
	for k, want := range map[string]string{"Authorization": "Bearer s3cret", "X-Job": "7",
		"Content-Type": "application/json", "Idempotency-Key": "sluice-7-42-step"} {
		if got := r.header.Get(k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	want := map[string]any{"job_id": 7.0, "item_id": 42.0, "name": "dir/report 1.pdf",
		"content_type": "application/pdf", "size": 4.0, "sha256": "abc123",
		"metadata": map[string]any{"token": "s3cret", "pages": 3.0},
		"options":  map[string]any{"lang": "fra"}, "step": "step"}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("body = %s; want %s", gotJSON, wantJSON)
	}
}

func TestBlobBody(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, respond(http.StatusCreated, ""))
	with := map[string]any{"url": srv.URL + "/upload", "method": "put", "body": "blob"}
	if _, err := run(t, t.Context(), with, []byte("%PDF-1.7 blob")); err != nil {
		t.Fatal(err)
	}
	r := <-reqs
	if r.method != http.MethodPut || string(r.body) != "%PDF-1.7 blob" {
		t.Errorf("request = %s %q; want PUT %q", r.method, r.body, "%PDF-1.7 blob")
	}
	if got := r.header.Get("Content-Type"); got != "application/pdf" {
		t.Errorf("Content-Type = %q; want application/pdf", got)
	}
	if got := r.header.Get("Content-Length"); got != "13" {
		t.Errorf("Content-Length = %q; want 13", got)
	}
}

func TestNoBodyForGet(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, respond(http.StatusOK, ""))
	if _, err := run(t, t.Context(), map[string]any{"url": srv.URL, "method": "GET"}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	r := <-reqs
	if r.method != http.MethodGet || len(r.body) != 0 || r.header.Get("Content-Type") != "" {
		t.Errorf("request = %s %q with Content-Type %q; want GET without a body", r.method, r.body, r.header.Get("Content-Type"))
	}
}

func TestBlobBodyWithoutBlob(t *testing.T) {
	t.Parallel()
	task := actiontest.NewTask(t, "a", "", nil, map[string]any{"url": "http://127.0.0.1:1/", "body": "blob"}, nil)
	task.Item.BlobSHA256 = ""
	if err := New(Config{}).Run(t.Context(), task, &actiontest.Recorder{}); !action.IsPermanent(err) {
		t.Fatalf("Run = %v; want a permanent error", err)
	}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	outcomes := map[string]any{"2xx": "sent", "404": "not-found", "4XX": "rejected", "503": "busy"}
	tests := []struct {
		name   string
		status int
		want   []string
	}{
		{name: "class", status: http.StatusCreated, want: []string{"sent"}},
		{name: "exact code wins", status: http.StatusNotFound, want: []string{"not-found"}},
		{name: "class of an error status", status: http.StatusGone, want: []string{"rejected"}},
		{name: "mapped server error", status: http.StatusServiceUnavailable, want: []string{"busy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := serve(t, respond(tt.status, ""))
			rec, err := run(t, t.Context(), map[string]any{"url": srv.URL, "outcomes": outcomes}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Events, tt.want) {
				t.Fatalf("events = %v; want %v", rec.Events, tt.want)
			}
		})
	}
}

// TestFailureOutcome checks the long form of outcomes: a status mapped to a failure outcome
// fails the task for good (not retried, even a 5xx) with its event emitted, which the engine fires
// with the step's failure events; a success outcome in the long form is the short form's.
func TestFailureOutcome(t *testing.T) {
	t.Parallel()
	outcomes := map[string]any{
		"404": map[string]any{"event": "platform-404", "outcome": "failure"},
		"5xx": map[string]any{"event": "platform-down", "outcome": "failure"},
		"409": map[string]any{"event": "exists", "outcome": "success"},
		"2xx": "sent",
	}
	for _, tt := range []struct {
		status  int
		event   string
		failure string // "" for a success
	}{
		{status: 404, event: "platform-404", failure: "status 404 (platform-404): gone"},
		{status: 503, event: "platform-down", failure: "status 503 (platform-down): gone"},
		{status: 409, event: "exists"},
		{status: 200, event: "sent"},
	} {
		srv, _ := serve(t, respond(tt.status, "gone"))
		rec, err := run(t, t.Context(), map[string]any{"url": srv.URL, "outcomes": outcomes}, nil)
		if !slices.Equal(rec.Events, []string{tt.event}) {
			t.Errorf("status %d: events %v, want [%s]", tt.status, rec.Events, tt.event)
		}
		switch {
		case tt.failure == "" && err != nil:
			t.Errorf("status %d: Run = %v, want a success", tt.status, err)
		case tt.failure != "" && (!action.IsPermanent(err) || !strings.Contains(err.Error(), tt.failure)):
			t.Errorf("status %d: Run = %v, want a permanent error with %q", tt.status, err, tt.failure)
		}
	}
	c, err := parseConfig(map[string]any{"url": "http://x/", "outcomes": outcomes})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Outcomes(); !slices.Equal(got, []string{"exists", "platform-404", "platform-down", "sent"}) {
		t.Errorf("declared outcomes %v, want every mapped event", got)
	}
}

func TestStatusErrors(t *testing.T) {
	t.Parallel()
	future := time.Now().Add(3 * time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name          string
		handler       http.HandlerFunc
		wantPermanent bool
		wantSnooze    time.Duration
		wantMsg       string
	}{
		{name: "500 is transient", handler: respond(500, "database is down"), wantMsg: "status 500: database is down"},
		{name: "429 is transient", handler: respond(429, ""), wantMsg: "status 429: (empty body)"},
		{name: "404 is permanent", handler: respond(404, "no such item\n"), wantPermanent: true,
			wantMsg: "status 404: no such item"},
		{name: "400 snippet is capped", handler: respond(400, strings.Repeat("x", 10000)), wantPermanent: true,
			wantMsg: "status 400: " + strings.Repeat("x", 512) + "…"},
		{name: "503 Retry-After seconds", handler: respond(503, "", "Retry-After", "7"), wantSnooze: 7 * time.Second},
		{name: "429 Retry-After date is capped", handler: respond(429, "", "Retry-After", future), wantSnooze: time.Hour},
		{name: "503 bad Retry-After", handler: respond(503, "", "Retry-After", "soon"), wantMsg: "status 503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := serve(t, tt.handler)
			_, err := run(t, t.Context(), map[string]any{"url": srv.URL + "/x?token=secret"}, nil)
			if err == nil {
				t.Fatal("Run = nil; want an error")
			}
			if d, ok := action.AsSnooze(err); ok != (tt.wantSnooze > 0) || d != tt.wantSnooze {
				t.Fatalf("Run = %v; want snooze %v", err, tt.wantSnooze)
			}
			if action.IsPermanent(err) != tt.wantPermanent {
				t.Fatalf("Run = %v; permanent = %v, want %v", err, action.IsPermanent(err), tt.wantPermanent)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("error %q does not contain %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error %q shows the URL's query", err)
			}
		})
	}
}

// block returns a handler that waits until the client goes away or the test ends.
func block(t *testing.T, arrived chan<- struct{}) http.HandlerFunc {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // runs before the server's Close, registered earlier
	return func(_ http.ResponseWriter, r *http.Request) {
		if arrived != nil {
			arrived <- struct{}{}
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Config.Handler = block(t, nil)
	_, err := run(t, t.Context(), map[string]any{"url": srv.URL, "timeout": "50ms"}, nil)
	if err == nil || action.IsPermanent(err) || !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Fatalf("Run = %v; want a transient timeout", err)
	}
	if _, ok := action.AsSnooze(err); ok {
		t.Fatalf("Run = %v; want no snooze", err)
	}
}

func TestConnectionError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(respond(200, ""))
	url := srv.URL
	srv.Close()
	_, err := run(t, t.Context(), map[string]any{"url": url + "/in?api_key=k3y-6d1f&page=2"}, nil)
	if err == nil || action.IsPermanent(err) {
		t.Fatalf("Run = %v; want a transient error", err)
	}
	// The error is the task's, shown by the API and the UI: the URL's secrets are masked.
	if strings.Contains(err.Error(), "k3y-6d1f") || !strings.Contains(err.Error(), "api_key=xxxxx&page=2") {
		t.Errorf("Run = %v; want the URL with its key masked", err)
	}
}

func TestContextCancel(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	srv.Config.Handler = block(t, arrived)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	task := actiontest.NewTask(t, "a", "", nil, map[string]any{"url": srv.URL}, nil)
	go func() { done <- New(loopbackConfig(t)).Run(ctx, task, &actiontest.Recorder{}) }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("request did not arrive")
	}
	cancel()
	actiontest.WantCanceled(t, done)
}

// TestJSONResponse checks how http reads a JSON result (package result tests the object itself):
// only on a success, after the status's outcome, with the size capped.
func TestJSONResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body    string
		status        int
		wantEvents    []string
		wantChildren  int
		wantPermanent string
	}{
		{name: "full", status: 200, body: `{"events": ["indexed"], "metadata": {"remote_id": "r-1"}, "text": "hi"}`,
			wantEvents: []string{"indexed"}},
		{name: "with mapped status", status: 202, body: `{"metadata": {"queued": true}}`, wantEvents: []string{"accepted"}},
		{name: "children", status: 200, body: `{"children": [{"name": "a", "content": "x"}, {"name": "b", "content_base64": "eQ=="}]}`,
			wantChildren: 2},
		{name: "error", status: 200, body: `{"error": "unsupported language"}`, wantPermanent: "unsupported language"},
		{name: "not json", status: 200, body: `OK`, wantPermanent: "response is not a JSON object"},
		{name: "too large", status: 200, body: `{"text": "` + strings.Repeat("x", maxResponse) + `"}`,
			wantPermanent: "larger than 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := serve(t, respond(tt.status, tt.body, "Content-Type", "application/json"))
			with := map[string]any{"url": srv.URL, "response": "json", "events": []any{"indexed"},
				"outcomes": map[string]any{"202": "accepted"}}
			rec, err := run(t, t.Context(), with, nil)
			if tt.wantPermanent != "" {
				if !action.IsPermanent(err) || !strings.Contains(err.Error(), tt.wantPermanent) {
					t.Fatalf("Run = %v; want a permanent error containing %q", err, tt.wantPermanent)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rec.Events, tt.wantEvents) || len(rec.Children) != tt.wantChildren {
				t.Errorf("events %v and %d children; want %v and %d", rec.Events, len(rec.Children), tt.wantEvents, tt.wantChildren)
			}
			if tt.wantChildren == 2 && (string(rec.Children[0].Data) != "x" || string(rec.Children[1].Data) != "y") {
				t.Errorf("children's content = %q, %q; want x, y", rec.Children[0].Data, rec.Children[1].Data)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header string
		want   time.Duration
		wantOK bool
	}{
		{name: "absent"},
		{name: "seconds", header: "30", want: 30 * time.Second, wantOK: true},
		{name: "zero is at least a second", header: "0", want: time.Second, wantOK: true},
		{name: "huge is capped", header: "99999999999", want: time.Hour, wantOK: true},
		{name: "negative", header: "-1"},
		{name: "date", header: now.Add(90 * time.Second).Format(http.TimeFormat), want: 90 * time.Second, wantOK: true},
		{name: "past date", header: now.Add(-time.Hour).Format(http.TimeFormat), want: time.Second, wantOK: true},
		{name: "garbage", header: "later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := retryAfter(tt.header, now)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("retryAfter(%q) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSpec(t *testing.T) {
	t.Parallel()
	spec := New(Config{}).Spec()
	if spec.Name != "http" || spec.Version != "1" || spec.Doc == "" {
		t.Fatalf("spec = %+v", spec)
	}
	for _, s := range spec.Settings {
		if s.Doc == "" {
			t.Errorf("setting %s has no doc", s.Name)
		}
	}
	with := map[string]any{"url": "http://x/", "outcomes": map[string]any{"2xx": "b", "404": "a"}, "events": []any{"c"}}
	if got := spec.OutcomesFor(with); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("OutcomesFor = %v", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	u := "https://example.com/items"
	tests := []struct {
		name    string
		with    map[string]any
		wantKey string
	}{
		{name: "minimal", with: map[string]any{"url": u}},
		{name: "everything", with: map[string]any{"url": u + "/{{.Item.ID}}?x={{urlquery .Item.Metadata.a.b}}",
			"method": "PATCH", "headers": map[string]any{"X-Step": "{{.Step}}", "Host": "h"}, "body": "blob",
			"timeout": "5s", "outcomes": map[string]any{"2xx": "ok", "599": "odd", "1XX": "info"},
			"events": []any{"e"}, "response": "json"}},
		{name: "url wholly templated", with: map[string]any{"url": "{{.Item.Metadata.callback}}"}},
		{name: "missing url", with: map[string]any{}, wantKey: "url"},
		{name: "url not http", with: map[string]any{"url": "ftp://example.com/"}, wantKey: "url"},
		{name: "url relative", with: map[string]any{"url": "/items/{{.Item.ID}}"}, wantKey: "url"},
		{name: "bad url template", with: map[string]any{"url": u + "/{{.Item.ID"}, wantKey: "url"},
		{name: "unknown url field", with: map[string]any{"url": u + "/{{.Item.Path}}"}, wantKey: "url"},
		{name: "exec-only field", with: map[string]any{"url": u + "/{{.Input}}"}, wantKey: "url"},
		{name: "unknown method", with: map[string]any{"url": u, "method": "FETCH"}, wantKey: "method"},
		{name: "bad header name", with: map[string]any{"url": u, "headers": map[string]any{"X Y": "1"}}, wantKey: "headers"},
		{name: "content-length header", with: map[string]any{"url": u, "headers": map[string]any{"content-length": "1"}}, wantKey: "headers"},
		{name: "unknown header field", with: map[string]any{"url": u, "headers": map[string]any{"X": "{{.Nope}}"}}, wantKey: "headers"},
		{name: "unknown body", with: map[string]any{"url": u, "body": "form"}, wantKey: "body"},
		{name: "outcome key word", with: map[string]any{"url": u, "outcomes": map[string]any{"ok": "x"}}, wantKey: "outcomes"},
		{name: "outcome key 600", with: map[string]any{"url": u, "outcomes": map[string]any{"600": "x"}}, wantKey: "outcomes"},
		{name: "outcome key 6xx", with: map[string]any{"url": u, "outcomes": map[string]any{"6xx": "x"}}, wantKey: "outcomes"},
		{name: "outcome empty event", with: map[string]any{"url": u, "outcomes": map[string]any{"200": ""}}, wantKey: "outcomes"},
		{name: "outcome failure form", with: map[string]any{"url": u, "outcomes": map[string]any{"404": map[string]any{"event": "gone", "outcome": "failure"}}}},
		{name: "outcome unknown kind", with: map[string]any{"url": u, "outcomes": map[string]any{"404": map[string]any{"event": "gone", "outcome": "retry"}}}, wantKey: "outcomes"},
		{name: "outcome without event", with: map[string]any{"url": u, "outcomes": map[string]any{"404": map[string]any{"outcome": "failure"}}}, wantKey: "outcomes"},
		{name: "outcome unknown field", with: map[string]any{"url": u, "outcomes": map[string]any{"404": map[string]any{"event": "gone", "status": "failure"}}}, wantKey: "outcomes"},
		{name: "outcome a number", with: map[string]any{"url": u, "outcomes": map[string]any{"404": 1}}, wantKey: "outcomes"},
		{name: "unknown response", with: map[string]any{"url": u, "response": "text"}, wantKey: "response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			actiontest.CheckSettings(t, New(Config{}), tt.with, tt.wantKey)
		})
	}
}

// TestEgressPolicy checks that the action's requests go through the egress policy: by default a
// loopback server is refused with a permanent error naming the policy and is never reached, and
// with loopback allowed, a redirect to the cloud metadata address is refused.
func TestEgressPolicy(t *testing.T) {
	t.Parallel()
	srv, reqs := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	task := actiontest.NewTask(t, "a", "", nil, map[string]any{"url": srv.URL + "/hook", "method": "GET"}, nil)
	err := New(Config{}).Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "refused by policy (loopback address; allow it with --egress-allow 127.0.0.0/8)") {
		t.Errorf("default policy: %v; want a permanent refusal", err)
	}
	select {
	case r := <-reqs:
		t.Fatalf("a refused request arrived: %+v", r)
	default:
	}
	err = New(loopbackConfig(t)).Run(t.Context(), task, &actiontest.Recorder{})
	if !action.IsPermanent(err) || !strings.Contains(err.Error(), "egress to 169.254.169.254:80 refused by policy") {
		t.Errorf("redirect to the metadata address: %v; want a permanent refusal", err)
	}
	if len(reqs) != 1 {
		t.Errorf("%d requests arrived, want the one redirected", len(reqs))
	}
}

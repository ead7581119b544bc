package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.uber.org/goleak"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/action"
	"github.com/sluice-project/sluice/client"
	"github.com/sluice-project/sluice/internal/api"
)

// TestMain fails the package's tests if a goroutine outlives them, and teaches the OpenAPI
// validator the API's bodies that are plain text.
func TestMain(m *testing.M) {
	for _, ct := range []string{"text/event-stream", "application/yaml", "image/svg+xml"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
	goleak.VerifyTestMain(m)
	os.Exit(0)
}

// shout is an action of the test's own: it upper-cases a text file and records it as the
// item's text and a document.
type shout struct{}

func (shout) Spec() action.Spec { return action.Spec{Name: "shout", Doc: "upper-cases text"} }

func (shout) Run(ctx context.Context, t *action.Task, out action.Output) error {
	r, err := t.OpenBlob(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	text := strings.ToUpper(string(b))
	if err := out.SetText(ctx, text); err != nil {
		return err
	}
	doc, _ := json.Marshal(map[string]any{"title": t.Item.Name, "chars": len(text)})
	return out.SetOutput(ctx, "document", doc)
}

const shoutWorkflow = `name: shouting
external: [reviewed]
steps:
  shout: {action: shout, needs: [start]}
  ack: {action: noop, needs: [reviewed]}
`

// validator checks every request to the handler and every answer against the OpenAPI
// document, so the test fails on a field, status or content type the document does not
// describe — the handlers and the document cannot drift apart.
type validator struct {
	t      *testing.T
	h      http.Handler
	router routers.Router
	mu     sync.Mutex
	seen   map[string]bool // operation ids validated
}

func newValidator(t *testing.T, h http.Handler) *validator {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{t: t, h: h, router: router, seen: map[string]bool{}}
}

func (v *validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		v.t.Errorf("%s %s: not in the OpenAPI document: %v", r.Method, r.URL.Path, err)
		v.h.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: r.Clone(r.Context()), PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}}
	in.Request.Body = io.NopCloser(bytes.NewReader(body))
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		v.t.Errorf("request %s %s does not match the document: %v", r.Method, r.URL.Path, err)
	}
	rec := httptest.NewRecorder()
	v.h.ServeHTTP(rec, r)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code, Header: rec.Header(),
		Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		v.t.Errorf("answer %d to %s %s does not match the document: %v\n%s", rec.Code, r.Method, r.URL.Path, err, rec.Body.Bytes())
	}
	v.mu.Lock()
	v.seen[route.Operation.OperationID] = true
	v.mu.Unlock()
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// TestClientAgainstServer drives a real engine's API with the generated client, every request
// and answer checked against the OpenAPI document: it stores a workflow, creates a job with an
// uploaded file, follows its progress to the end, and reads its items and documents.
func TestClientAgainstServer(t *testing.T) {
	ctx := t.Context()
	e, err := sluice.Open(ctx, sluice.Config{DataDir: t.TempDir(), Actions: []action.Action{shout{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	token, err := e.CreateToken("admin")
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(t, e.Handler())
	srv := httptest.NewServer(v)
	defer srv.Close()
	c, err := client.NewClientWithResponses(srv.URL, client.WithBearer(token))
	if err != nil {
		t.Fatal(err)
	}

	applied, err := c.ApplyWorkflowWithBodyWithResponse(ctx, "application/yaml", strings.NewReader(shoutWorkflow))
	if err != nil {
		t.Fatal(err)
	}
	if applied.JSON201 == nil || applied.JSON201.Workflow == nil || applied.JSON201.Workflow.Name != "shouting" {
		t.Fatalf("apply workflow: %d %s", applied.StatusCode(), applied.Body)
	}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	jobPart, _ := json.Marshal(client.CreateJobRequest{Workflow: "shouting"})
	_ = mw.WriteField("job", string(jobPart))
	fw, _ := mw.CreateFormFile("file", "hello.txt")
	_, _ = io.WriteString(fw, "hello, sluice")
	_ = mw.Close()
	created, err := c.CreateJobWithBodyWithResponse(ctx, mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	if created.JSON201 == nil || created.JSON201.State != "running" && created.JSON201.State != "complete" {
		t.Fatalf("create job: %d %s", created.StatusCode(), created.Body)
	}
	job := created.JSON201.Id

	// The job waits for the external event "reviewed" on its root: fire it (an undeclared one
	// is refused).
	roots, err := c.ListItemsWithResponse(ctx, job, &client.ListItemsParams{})
	if err != nil || roots.JSON200 == nil || len(roots.JSON200.Items) != 1 {
		t.Fatalf("list roots: %v %s", err, roots.Body)
	}
	root := roots.JSON200.Items[0].Id
	fired, err := c.FireEventWithResponse(ctx, job, client.EventRequest{Event: "reviewed", ItemId: &root})
	if err != nil || fired.JSON202 == nil || fired.JSON202.Fired != 1 || len(fired.JSON202.Items) != 1 || fired.JSON202.Items[0] != root {
		t.Fatalf("fire event: %v %s", err, fired.Body)
	}
	unknown, err := c.FireEventWithResponse(ctx, job, client.EventRequest{Event: "nope", ItemId: &root})
	if err != nil || unknown.StatusCode() != 422 || unknown.JSONDefault == nil || unknown.JSONDefault.Code != "unknown_event" {
		t.Fatalf("undeclared event: %v %d %s", err, unknown.StatusCode(), unknown.Body)
	}

	// Follow the progress stream until its end event; its data are Progress objects.
	resp, err := c.FollowProgress(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	var last client.Progress
	var end string
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "progress":
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &last); err != nil {
				t.Fatalf("progress data: %v: %s", err, line)
			}
		case strings.HasPrefix(line, "data: ") && event == "end":
			end = strings.TrimPrefix(line, "data: ")
		}
	}
	resp.Body.Close()
	if end != `{"state":"complete"}` || last.Fraction != 1 || last.State != "complete" {
		t.Fatalf("progress ended with %q after %+v", end, last)
	}

	got, err := c.GetJobWithResponse(ctx, job)
	if err != nil || got.JSON200 == nil || got.JSON200.State != "complete" || got.JSON200.FinishedAt == nil {
		t.Fatalf("get job: %v %+v", err, got)
	}
	items, err := c.ListItemsWithResponse(ctx, job, &client.ListItemsParams{})
	if err != nil || items.JSON200 == nil || len(items.JSON200.Items) != 1 || items.JSON200.Items[0].Name != "hello.txt" || !items.JSON200.Items[0].HasText {
		t.Fatalf("list items: %v %s", err, items.Body)
	}
	text, err := c.DownloadItemWithResponse(ctx, items.JSON200.Items[0].Id, client.Text)
	if err != nil || string(text.Body) != "HELLO, SLUICE" {
		t.Fatalf("download text: %v %q", err, text.Body)
	}
	docs, err := c.ListDocumentsWithResponse(ctx, job, &client.ListDocumentsParams{})
	if err != nil || docs.JSON200 == nil || len(docs.JSON200.Outputs) != 1 {
		t.Fatalf("list documents: %v %s", err, docs.Body)
	}
	if d := docs.JSON200.Outputs[0]; d.ItemId != items.JSON200.Items[0].Id || d.Value["title"] != "hello.txt" || d.Value["chars"] != float64(13) {
		t.Errorf("document %+v", d)
	}
	list, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{})
	if err != nil || list.JSON200 == nil || len(list.JSON200.Jobs) != 1 || list.JSON200.Jobs[0].Id != job {
		t.Fatalf("list jobs: %v %s", err, list.Body)
	}
	// Pages of one: the job and a cursor, then the last (empty) page without one; a cursor the
	// list did not make is a 400 in plain words.
	one := int64(1)
	first, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{Limit: &one})
	if err != nil || first.JSON200 == nil || len(first.JSON200.Jobs) != 1 || first.JSON200.NextCursor == nil {
		t.Fatalf("first page of jobs: %v %s", err, first.Body)
	}
	rest, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{Limit: &one, Cursor: first.JSON200.NextCursor})
	if err != nil || rest.JSON200 == nil || len(rest.JSON200.Jobs) != 0 || rest.JSON200.NextCursor != nil {
		t.Fatalf("last page of jobs: %v %s", err, rest.Body)
	}
	malformed := "x" + *first.JSON200.NextCursor
	bad, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{Cursor: &malformed})
	if err != nil || bad.StatusCode() != 400 || bad.JSONDefault == nil || bad.JSONDefault.Message != "cursor: not a cursor of this list" {
		t.Fatalf("a malformed cursor: %v %d %s", err, bad.StatusCode(), bad.Body)
	}
	// An error answer is described too.
	missing, err := c.GetJobWithResponse(ctx, job+100)
	if err != nil || missing.StatusCode() != 404 || missing.JSONDefault == nil || missing.JSONDefault.Code != "not_found" {
		t.Fatalf("missing job: %v %d %s", err, missing.StatusCode(), missing.Body)
	}
	for _, op := range []string{"applyWorkflow", "createJob", "fireEvent", "followProgress", "getJob", "listItems", "downloadItem", "listDocuments", "listJobs"} {
		if !v.seen[op] {
			t.Errorf("operation %s was not validated", op)
		}
	}
}

// TestWorkerProtocolAgainstDocument serves one remote task through the generated client — poll,
// re-read the task, download its input, post a child and done — every request and answer
// checked against the OpenAPI document, the task JSON included.
func TestWorkerProtocolAgainstDocument(t *testing.T) {
	ctx := t.Context()
	e, err := sluice.Open(ctx, sluice.Config{DataDir: t.TempDir(), Remote: []string{"Upper"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	token, err := e.CreateToken("worker")
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(t, e.Handler())
	srv := httptest.NewServer(v)
	defer srv.Close()
	if _, _, err := e.ApplyWorkflow(ctx, []byte("name: upper\nsteps:\n  up: {action: remote, with: {name: Upper}, needs: [start], when: root}\n")); err != nil {
		t.Fatal(err)
	}
	job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "upper", Files: []sluice.File{{Name: "a.txt", Content: strings.NewReader("abc")}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewClientWithResponses(srv.URL, client.WithBearer(token))
	if err != nil {
		t.Fatal(err)
	}
	var task *client.WorkerTask
	for task == nil {
		polled, err := c.PollTaskWithResponse(ctx, "Upper")
		if err != nil {
			t.Fatal(err)
		}
		if polled.StatusCode() != 201 && polled.StatusCode() != 204 {
			t.Fatalf("poll: %d %s", polled.StatusCode(), polled.Body)
		}
		task = polled.JSON201
	}
	if task.Filename != "a.txt" || task.Blob.NBytes != 3 || !strings.HasSuffix(task.Url, "/v1/workers/Upper/"+task.Id) {
		t.Errorf("task %+v", task)
	}
	again, err := c.GetTaskWithResponse(ctx, "Upper", task.Id, &client.GetTaskParams{})
	if err != nil || again.JSON200 == nil || again.JSON200.Id != task.Id {
		t.Fatalf("get task: %v %s", err, again.Body)
	}
	blob, err := c.GetTaskBlobWithResponse(ctx, "Upper", task.Id, &client.GetTaskBlobParams{})
	if err != nil || string(blob.Body) != "abc" {
		t.Fatalf("blob: %v %q", err, blob.Body)
	}
	for _, f := range []struct{ name, ct, body string }{
		{"0.json", "application/json", `{"filename":"a.up","contentType":"text/plain","languageCode":"en","metadata":{},"wantOcr":false,"wantSplitByPage":false}`},
		{"0.blob", "application/octet-stream", "ABC"},
		{"done", "application/octet-stream", ""},
	} {
		res, err := c.PostFragmentWithBodyWithResponse(ctx, "Upper", task.Id, f.name, &client.PostFragmentParams{}, f.ct, strings.NewReader(f.body))
		if err != nil || res.StatusCode() != 202 {
			t.Fatalf("post %s: %v %d %s", f.name, err, res.StatusCode(), res.Body)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if j, err := e.Wait(wctx, job.ID); err != nil || j.State != sluice.JobComplete {
		t.Fatalf("job: %+v %v", j, err)
	}
	for _, op := range []string{"pollTask", "getTask", "getTaskBlob", "postFragment"} {
		if !v.seen[op] {
			t.Errorf("operation %s was not validated", op)
		}
	}
}

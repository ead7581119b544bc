package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/docsearch"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// doc is an in-process action that records a document output and text.
type doc struct{}

func (doc) Spec() action.Spec { return action.Spec{Name: "doc"} }
func (doc) Run(ctx context.Context, t *action.Task, out action.Output) error {
	if strings.HasSuffix(t.Item.Name, ".bad") {
		return action.Permanentf("bad input")
	}
	out.SetText(ctx, "text of "+t.Item.Name)
	// Thumbnails for the download tests: one a browser would run (SVG), one it would only show.
	switch {
	case strings.HasSuffix(t.Item.Name, ".svg"):
		out.SetThumbnail(ctx, strings.NewReader(svgDoc), "image/svg+xml")
	case strings.HasSuffix(t.Item.Name, ".pdf"):
		out.SetThumbnail(ctx, strings.NewReader("\x89PNG fake"), "image/png")
	}
	title, _ := json.Marshal(map[string]string{"title": t.Item.Name})
	return out.SetOutput(ctx, "document", title)
}

// flaky is an in-process action that fails permanently until fixed is set.
type flaky struct{ fixed *atomic.Bool }

func (flaky) Spec() action.Spec { return action.Spec{Name: "flaky"} }
func (f flaky) Run(ctx context.Context, t *action.Task, out action.Output) error {
	if !f.fixed.Load() {
		return action.Permanentf("service down")
	}
	return nil
}

type bundle struct {
	fixed  *atomic.Bool // makes the flaky action succeed
	e      *engine.Engine
	db     api.Records // the engine's store
	srv    *httptest.Server
	tokens *api.TokenStore
	admin  string
	reader string
	worker string
	dir    string
	leader *atomic.Bool // what the API reports as maintenance leadership
	// matchDoc checks every answer of do against the OpenAPI document.
	matchDoc bool
}

// setup serves the API over a SQLite store.
func setup(t *testing.T) *bundle {
	t.Helper()
	return setupOn(t, drivertest.OpenSQLite)
}

// setupOn serves the API over a store of the driver open opens.
func setupOn(t *testing.T, open drivertest.Open) *bundle {
	t.Helper()
	return setupWith(t, open, nil)
}

// setupWith serves the API over a store of the driver open opens, with its configuration
// changed by tweak.
func setupWith(t testing.TB, open drivertest.Open, tweak func(*api.Config)) *bundle {
	t.Helper()
	return setupFull(t, open, tweak, nil)
}

// setupFull is [setupWith] with, when svc is set, the objects domain and workflow served by it.
func setupFull(t testing.TB, open drivertest.Open, tweak func(*api.Config), svc *objects.Service) *bundle {
	t.Helper()
	dir := t.TempDir()
	db := open(t)
	blobs, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	cat := &action.Catalog{}
	fixed := new(atomic.Bool)
	cat.Register(doc{}, flaky{fixed}, ingest.New(), workerproto.RemoteAction())
	fs := fileset.New(fileset.Config{PartialDir: filepath.Join(dir, "partial")})
	cat.Register(fs.Actions()...)
	if svc != nil {
		cat.Register(append(svc.Actions(), basic.NewPass())...)
	}
	var w *worker.Worker
	var wp *workerproto.Server
	e := engine.New(engine.Config{Store: db, Catalog: cat,
		OnReady:  func(qs []string) { w.Ready(qs); wp.Wake() },
		OnCancel: func(ids []int64) { w.CancelTasks(ids); wp.CancelTasks(ids) }})
	if err := fileset.Register(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := docsearch.Register(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if err := audit.Register(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if svc != nil {
		if err := objects.Register(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	set := metric.New()
	w = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 50 * time.Millisecond, Metrics: set})
	tokens, err := api.OpenTokenStore(filepath.Join(dir, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	backend := workerproto.NewBackend(e, blobs, w)
	wp = workerproto.New(workerproto.Config{Backend: backend, Auth: tokens.WorkerAuth(), LongPoll: 100 * time.Millisecond})
	leader := new(atomic.Bool)
	cfg := api.Config{Backend: backend, Records: db, Tokens: tokens, Workers: wp, PathRoots: []string{filepath.Join(dir, "inbox")},
		ProgressInterval: 20 * time.Millisecond, Leader: leader.Load, Metrics: set}
	if tweak != nil {
		tweak(&cfg)
	}
	a := api.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	wp.Start(ctx)
	hs := httptest.NewUnstartedServer(a.Handler())
	hs.Config = a.Server()
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		wp.Stop()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		w.Stop(sctx)
		cancel()
		db.Close()
	})
	b := &bundle{fixed: fixed, e: e, db: db, srv: hs, tokens: tokens, dir: dir, leader: leader}
	for _, p := range []struct {
		dst  *string
		role api.Role
	}{{&b.admin, api.RoleAdmin}, {&b.reader, api.RoleReader}, {&b.worker, api.RoleWorker}} {
		if *p.dst, err = tokens.Create(p.role); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

const docsWorkflow = `name: docs
external: [approved]
steps:
  doc: {action: doc, needs: [start], success: [documented]}
  approve: {action: doc, needs: [documented, approved]}
`

func (b *bundle) do(t *testing.T, method, path, token, contentType string, body io.Reader) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if b.matchDoc {
		matchDocument(t, req, resp, data)
	}
	return resp.StatusCode, data
}

func (b *bundle) json(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	var r io.Reader
	if s, ok := body.(string); ok {
		r = strings.NewReader(s)
	} else if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	code, data := b.do(t, method, path, b.admin, "application/json", r)
	if code != want {
		t.Fatalf("%s %s = %d, want %d: %s", method, path, code, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

func waitState(t *testing.T, b *bundle, id int64, want string) map[string]any {
	t.Helper()
	var j map[string]any
	poll.Until(t, 20*time.Second, fmt.Sprintf("job %d to be %s", id, want), func() (bool, string) {
		j = nil
		b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil, 200, &j)
		return j["state"] == want, fmt.Sprint(j)
	})
	return j
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testJobLifecycle(t, open)
	})
}

func testJobLifecycle(t *testing.T, open drivertest.Open) {
	b := setupOn(t, open)
	var applied map[string]any
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, &applied)
	if applied["valid"] != true {
		t.Fatalf("apply: %v", applied)
	}
	// Upload two files in one streamed multipart request.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	jp, _ := mw.CreateFormField("job")
	jp.Write([]byte(`{"workflow":"docs","metadata":{"batch":"b1","big":12345678901234567890,"zip":"01234","half":1.5,"nested":{"ключ":[1,2.50]}}}`))
	for _, name := range []string{"a.txt", "b.bad"} {
		fp, _ := mw.CreateFormFile("file", name)
		fp.Write([]byte("content of " + name))
	}
	mw.Close()
	code, data := b.do(t, "POST", "/v1/jobs", b.admin, mw.FormDataContentType(), &buf)
	if code != 201 {
		t.Fatalf("create: %d %s", code, data)
	}
	var job struct {
		ID int64 `json:"id"`
	}
	json.Unmarshal(data, &job)

	// Wait for the doc step, then the items are waiting for the external event.
	var items struct {
		Items []struct {
			ID       int64  `json:"id"`
			Name     string `json:"name"`
			Error    string `json:"error"`
			HasText  bool   `json:"has_text"`
			Metadata map[string]any
		} `json:"items"`
	}
	poll.Until(t, 20*time.Second, "both items done", func() (bool, string) {
		b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/items", job.ID), nil, 200, &items)
		return len(items.Items) == 2 && items.Items[0].HasText && items.Items[1].Error != "", fmt.Sprintf("%+v", items)
	})
	if items.Items[1].Error != "bad input" {
		t.Errorf("error %q", items.Items[1].Error)
	}
	// The metadata comes back exactly as sent, on each item.
	_, raw := b.do(t, "GET", fmt.Sprintf("/v1/jobs/%d/items", job.ID), b.admin, "", nil)
	var exact struct {
		Items []struct {
			Metadata map[string]any `json:"metadata"`
		} `json:"items"`
	}
	if err := metadata.Unmarshal(raw, &exact); err != nil || len(exact.Items) != 2 {
		t.Fatalf("items: %v: %s", err, raw)
	}
	for _, it := range exact.Items {
		md := it.Metadata
		nested, _ := md["nested"].(map[string]any)
		if md["big"] != json.Number("12345678901234567890") || md["zip"] != "01234" || md["half"] != json.Number("1.5") ||
			fmt.Sprint(nested["ключ"]) != "[1 2.50]" {
			t.Errorf("item metadata %v, want it as sent", md)
		}
	}
	// A key that matches no item is a 404 naming the event and the waiting items' keys; a
	// job that does not exist is named.
	code, raw = b.do(t, "POST", fmt.Sprintf("/v1/jobs/%d/events", job.ID), b.admin, "application/json",
		strings.NewReader(`{"event":"approved","key":"batch","value":"nope"}`))
	if code != 404 || !strings.Contains(string(raw), `\"approved\"`) || !strings.Contains(string(raw), "batch=b1") {
		t.Errorf("no match: %d %s; want 404 naming the event and batch=b1", code, raw)
	}
	for _, path := range []string{"/v1/jobs/99", "/v1/jobs/99/progress", "/v1/jobs/99/events", "/v1/items/99"} {
		method := "GET"
		var body io.Reader
		if strings.HasSuffix(path, "/events") {
			method, body = "POST", strings.NewReader(`{"event":"approved","key":"batch","value":"b1"}`)
		}
		code, raw := b.do(t, method, path, b.admin, "application/json", body)
		if code != 404 || !strings.Contains(string(raw), "99 does not exist") ||
			strings.Contains(string(raw), "store:") || strings.Contains(string(raw), "sql") || strings.Contains(string(raw), "no rows") {
			t.Errorf("%s %s = %d %s; want 404 naming 99 in plain words", method, path, code, raw)
		}
	}
	// Fire the external event by metadata key (the correlation), then by item id (a repeat).
	var fired struct {
		Items []int64 `json:"items"`
		Fired int     `json:"fired"`
	}
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/events", job.ID), map[string]any{"event": "approved", "key": "batch", "value": "b1"}, 202, &fired)
	if len(fired.Items) != 2 {
		t.Errorf("fired %+v", fired)
	}
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/events", job.ID), map[string]any{"event": "approved", "item_id": items.Items[0].ID}, 202, &fired)
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/events", job.ID), map[string]any{"event": "nope", "item_id": items.Items[0].ID}, 422, nil)
	waitState(t, b, job.ID, "complete")

	var docs, errs struct {
		Outputs []struct {
			ItemID int64          `json:"item_id"`
			Value  map[string]any `json:"value"`
		} `json:"outputs"`
	}
	b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/documents", job.ID), nil, 200, &docs)
	if len(docs.Outputs) != 1 || docs.Outputs[0].Value["title"] != "a.txt" {
		t.Errorf("documents %+v", docs)
	}
	b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/errors", job.ID), nil, 200, &errs)
	code, data = b.do(t, "GET", fmt.Sprintf("/v1/items/%d/original", items.Items[0].ID), b.reader, "", nil)
	if code != 200 || string(data) != "content of a.txt" {
		t.Errorf("original: %d %q", code, data)
	}
	code, data = b.do(t, "GET", fmt.Sprintf("/v1/items/%d/text", items.Items[0].ID), b.reader, "", nil)
	if code != 200 || string(data) != "text of a.txt" {
		t.Errorf("text: %d %q", code, data)
	}
	code, _ = b.do(t, "GET", fmt.Sprintf("/v1/items/%d/thumbnail", items.Items[0].ID), b.reader, "", nil)
	if code != 404 {
		t.Errorf("thumbnail: %d", code)
	}
	var list struct {
		Jobs []map[string]any `json:"jobs"`
	}
	b.json(t, "GET", "/v1/jobs?state=complete&limit=10", nil, 200, &list)
	if len(list.Jobs) != 1 {
		t.Errorf("jobs %+v", list)
	}
	// The filters: each that holds finds the job, each that does not, none; bad ones are 400s
	// naming the filter.
	day := time.Now().UTC().Format(time.DateOnly)
	for q, want := range map[string]int{
		"workflow=docs&meta=batch%3Db1&q=DOC": 1, "meta=big%3D12345678901234567890": 1, "meta=batch%3Db2": 0, "workflow=other": 0,
		"created_from=" + day + "&created_until=" + day: 1, "created_until=2000-01-01": 0, fmt.Sprintf("q=%d", job.ID): 1,
	} {
		b.json(t, "GET", "/v1/jobs?"+q, nil, 200, &list)
		if len(list.Jobs) != want {
			t.Errorf("GET /v1/jobs?%s: %d jobs, want %d", q, len(list.Jobs), want)
		}
	}
	for q, msg := range map[string]string{"state=done": `state: "done" is not a job state: one of running, complete, failed, canceled`, "created_from=yesterday": `created_from "yesterday"`,
		"meta=batch": `meta "batch"`, "meta=a%3D1&meta=a%3D1&meta=a%3D1&meta=a%3D1&meta=a%3D1&meta=a%3D1&meta=a%3D1&meta=a%3D1&meta=a%3D1": "at most 8 meta filters"} {
		var e api.Error
		b.json(t, "GET", "/v1/jobs?"+q, nil, 400, &e)
		if !strings.Contains(e.Message, msg) {
			t.Errorf("GET /v1/jobs?%s: %q, want it to name %s", q, e.Message, msg)
		}
	}
	// SSE on a finished job: one progress event, then end.
	code, data = b.do(t, "GET", fmt.Sprintf("/v1/jobs/%d/progress", job.ID), b.reader, "", nil)
	if code != 200 || !strings.Contains(string(data), "event: progress\ndata: {\"state\":\"complete\",\"fraction\":1") || !strings.Contains(string(data), "event: end") {
		t.Errorf("progress stream: %d %s", code, data)
	}
}

func TestProgressStreamAndCancel(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testProgressStreamAndCancel(t, open)
	})
}

func testProgressStreamAndCancel(t *testing.T, open drivertest.Open) {
	b := setupOn(t, open)
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	os.MkdirAll(filepath.Join(b.dir, "inbox"), 0o700)
	os.WriteFile(filepath.Join(b.dir, "inbox", "x.txt"), []byte("x"), 0o600)
	var job struct {
		ID int64 `json:"id"`
	}
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "docs", "paths": []string{filepath.Join(b.dir, "inbox", "x.txt")}}, 201, &job)
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "docs", "paths": []string{"/etc/passwd"}}, 400, nil)
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "nope"}, 404, nil)

	req, _ := http.NewRequestWithContext(t.Context(), "GET", fmt.Sprintf("%s/v1/jobs/%d/progress?token=%s", b.srv.URL, job.ID, b.reader), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Scan()
	if sc.Text() != "event: progress" {
		t.Fatalf("first line %q", sc.Text())
	}
	// The job waits for its external event; cancel it and the stream ends with the state.
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", job.ID), nil, 200, nil)
	var rest strings.Builder
	for sc.Scan() {
		rest.WriteString(sc.Text() + "\n")
	}
	if !strings.Contains(rest.String(), "event: end\ndata: {\"state\":\"canceled\"}") {
		t.Errorf("stream tail %s", rest.String())
	}
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", job.ID), nil, 409, nil)
}

func TestWorkflowEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var v map[string]any
	b.json(t, "POST", "/v1/workflows/validate", "name: x\nsteps:\n  a: {action: nosuch, needs: [start]}\n", 200, &v)
	if v["valid"] != false || len(v["errors"].([]any)) == 0 {
		t.Errorf("validate %v", v)
	}
	b.json(t, "POST", "/v1/workflows", "name: x\nsteps:\n  a: {action: nosuch, needs: [start]}\n", 422, nil)
	b.json(t, "POST", "/v1/workflows", "name: r\nsteps:\n  conv: {action: remote, needs: [start], with: {name: Pdf}}\n", 201, nil)
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	var list struct {
		Workflows []map[string]any `json:"workflows"`
	}
	b.json(t, "GET", "/v1/workflows", nil, 200, &list)
	if len(list.Workflows) != 2 {
		t.Errorf("workflows %v", list)
	}
	var wf map[string]any
	b.json(t, "GET", "/v1/workflows/docs", nil, 200, &wf)
	if wf["version"] != float64(1) || !strings.Contains(wf["source"].(string), "approved") {
		t.Errorf("workflow %v", wf)
	}
	code, data := b.do(t, "GET", "/v1/workflows/docs/graph", b.reader, "", nil)
	if code != 200 || !bytes.HasPrefix(bytes.TrimSpace(data), []byte("<svg")) && !bytes.Contains(data, []byte("<svg")) {
		t.Errorf("svg: %d %.80s", code, data)
	}
	code, data = b.do(t, "GET", "/v1/workflows/docs/graph?format=dot", b.reader, "", nil)
	if code != 200 || !strings.Contains(string(data), "digraph") {
		t.Errorf("dot: %d %.80s", code, data)
	}
	b.json(t, "GET", "/v1/workflows/nope", nil, 404, nil)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Every route refuses a missing or wrong token.
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	b.json(t, "GET", "/v1/openapi.json", nil, 200, &doc)
	for path, ops := range doc.Paths {
		for method := range ops {
			if path == "/healthz" || path == "/readyz" {
				continue // probes: no token
			}
			p := strings.NewReplacer("{id}", "1", "{content}", "text", "{name}", "docs", "{action}", "Pdf", "{fragment}", "done").Replace(path)
			if strings.HasPrefix(path, "/v1/workers/{action}/{id}") {
				continue // task URLs: the unguessable id is the credential (checked in workerproto)
			}
			for _, tok := range []string{"", "wrong"} {
				code, data := b.do(t, strings.ToUpper(method), p, tok, "", nil)
				if code != 401 {
					t.Errorf("%s %s with token %q = %d: %s", method, p, tok, code, data)
				}
				var e map[string]string
				if json.Unmarshal(data, &e) != nil || e["code"] != "unauthorized" {
					t.Errorf("%s %s: error body %s", method, p, data)
				}
			}
			// Worker tokens only speak the worker protocol.
			if !strings.HasPrefix(path, "/v1/workers/") {
				if code, _ := b.do(t, strings.ToUpper(method), p, b.worker, "", nil); code != 403 {
					t.Errorf("%s %s with a worker token = %d", method, p, code)
				}
			}
		}
	}
	if code, data := b.do(t, "POST", "/v1/jobs", b.worker, "application/json", strings.NewReader(`{"workflow":"docs"}`)); code != 403 {
		t.Errorf("worker token created a job: %d %s", code, data)
	}
	if code, _ := b.do(t, "POST", "/v1/jobs", b.reader, "application/json", strings.NewReader(`{"workflow":"docs"}`)); code != 403 {
		t.Errorf("reader token created a job: %d", code)
	}
	if code, _ := b.do(t, "POST", "/v1/workers/Pdf", b.worker, "", nil); code != 204 {
		t.Errorf("worker poll = %d", code)
	}
	if code, _ := b.do(t, "POST", "/v1/workers/Pdf", b.reader, "", nil); code != 403 {
		t.Errorf("reader poll = %d", code)
	}
	if code, _ := b.do(t, "GET", "/healthz", "", "", nil); code != 200 {
		t.Errorf("healthz = %d", code)
	}
	if code, data := b.do(t, "GET", "/readyz", "", "", nil); code != 200 || string(data) != "ready\n" {
		t.Errorf("readyz without a token = %d %q", code, data)
	}
	if code, _ := b.do(t, "GET", "/v1/nothing", "", "", nil); code != 401 {
		t.Errorf("unknown path without token = %d", code)
	}
	fi, err := os.Stat(filepath.Join(b.dir, "tokens.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens.json: %v %v", fi.Mode(), err)
	}
	raw, _ := os.ReadFile(filepath.Join(b.dir, "tokens.json"))
	if strings.Contains(string(raw), b.admin) {
		t.Error("tokens.json holds a plaintext token")
	}
}

func TestRetryJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
	b.json(t, "POST", "/v1/workflows", "name: flaky\nsteps:\n  call: {action: flaky, needs: [start]}\n", 201, nil)
	inbox := filepath.Join(b.dir, "inbox")
	os.MkdirAll(inbox, 0o700)
	os.WriteFile(filepath.Join(inbox, "x.txt"), []byte("x"), 0o600)
	type jobJSON struct {
		ID    int64  `json:"id"`
		State string `json:"state"`
		Error string `json:"error"`
	}
	var job, waiting jobJSON
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "flaky", "paths": []string{filepath.Join(inbox, "x.txt")}}, 201, &job)
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "docs", "paths": []string{filepath.Join(inbox, "x.txt")}}, 201, &waiting)
	// A per-item error does not fail the job: it completes with the error on its item.
	waitState(t, b, job.ID, "complete")
	itemError := func() string {
		t.Helper()
		var items struct {
			Items []struct {
				Error string `json:"error"`
			} `json:"items"`
		}
		b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/items", job.ID), nil, 200, &items)
		if len(items.Items) != 1 {
			t.Fatalf("job %d has %d items, want 1", job.ID, len(items.Items))
		}
		return items.Items[0].Error
	}
	if e := itemError(); e != "service down" {
		t.Fatalf("item error = %q, want %q", e, "service down")
	}

	retry := fmt.Sprintf("/v1/jobs/%d/retry", job.ID)
	if code, data := b.do(t, "POST", retry, b.reader, "", nil); code != 403 {
		t.Errorf("retry with a reader token = %d %s, want 403", code, data)
	}
	if code, data := b.do(t, "POST", retry, "", "", nil); code != 401 {
		t.Errorf("retry without a token = %d %s, want 401", code, data)
	}
	var apiErr api.Error
	b.json(t, "POST", "/v1/jobs/999999/retry", nil, 404, &apiErr)
	if apiErr.Code != "not_found" || !strings.Contains(apiErr.Message, "job 999999") {
		t.Errorf("unknown job: %+v", apiErr)
	}
	b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", waiting.ID), nil, 409, &apiErr)
	if apiErr.Code != "conflict" || !strings.Contains(apiErr.Message, "is running") {
		t.Errorf("running job: %+v", apiErr)
	}

	b.fixed.Store(true)
	var retried jobJSON
	b.json(t, "POST", retry, nil, 200, &retried)
	if retried.ID != job.ID || retried.State == "failed" || retried.Error != "" {
		t.Errorf("retry answered %+v, want job %d running (or complete already)", retried, job.ID)
	}
	waitState(t, b, job.ID, "complete")
	if e := itemError(); e != "" {
		t.Errorf("item error after retry = %q, want none", e)
	}
	b.json(t, "POST", retry, nil, 409, &apiErr)
	if apiErr.Code != "conflict" || !strings.Contains(apiErr.Message, fmt.Sprintf("job %d has no failed or canceled tasks", job.ID)) {
		t.Errorf("retry with nothing to retry: %+v", apiErr)
	}
}

// TestRetryKeepsErrors is the reported reproduction over HTTP: a retried file that fails again is
// still listed in /errors, and its item's attempts list both runs; once it is fixed, its
// document replaces its error, which stays in its history.
func TestRetryKeepsErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.json(t, "POST", "/v1/workflows", "name: flakydocs\nsteps:\n  call: {action: flaky, needs: [start]}\n  collect: {action: ingest, needs: [children.done]}\n", 201, nil)
	inbox := filepath.Join(b.dir, "inbox")
	os.MkdirAll(inbox, 0o700)
	os.WriteFile(filepath.Join(inbox, "x.txt"), []byte("x"), 0o600)
	var job struct {
		ID int64 `json:"id"`
	}
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "flakydocs", "paths": []string{filepath.Join(inbox, "x.txt")}}, 201, &job)
	waitState(t, b, job.ID, "complete")
	type outputs struct {
		Outputs []struct {
			ItemID int64           `json:"item_id"`
			Value  json.RawMessage `json:"value"`
		} `json:"outputs"`
	}
	list := func(kind string) outputs {
		t.Helper()
		var o outputs
		b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/%s", job.ID, kind), nil, 200, &o)
		return o
	}
	type history struct {
		Attempts []struct {
			Step    string `json:"step"`
			Attempt int    `json:"attempt"`
			State   string `json:"state"`
			Error   string `json:"error"`
		} `json:"attempts"`
		Superseded []struct {
			Kind string `json:"kind"`
		} `json:"superseded_outputs"`
	}
	attempts := func(itemID int64) (string, history) {
		t.Helper()
		var h history
		b.json(t, "GET", fmt.Sprintf("/v1/items/%d/attempts", itemID), nil, 200, &h)
		var lines []string
		for _, a := range h.Attempts {
			lines = append(lines, fmt.Sprintf("%s %d %s %s", a.Step, a.Attempt, a.State, a.Error))
		}
		return strings.Join(lines, "; "), h
	}
	errs := list("errors")
	if len(errs.Outputs) != 1 {
		t.Fatalf("errors before the retry = %+v, want 1", errs)
	}
	item := errs.Outputs[0].ItemID
	retry := fmt.Sprintf("/v1/jobs/%d/retry", job.ID)

	b.json(t, "POST", retry, nil, 200, nil)
	waitState(t, b, job.ID, "complete")
	if errs := list("errors"); len(errs.Outputs) != 1 || errs.Outputs[0].ItemID != item || !strings.Contains(string(errs.Outputs[0].Value), "service down") {
		t.Errorf("errors after a retry that failed again = %+v, want the item's error", errs)
	}
	if got, _ := attempts(item); got != "call 1 failed service down; call 2 failed service down; collect 1 complete ; collect 2 complete " {
		t.Errorf("attempts after a retry that failed again = %q", got)
	}

	b.fixed.Store(true)
	b.json(t, "POST", retry, nil, 200, nil)
	waitState(t, b, job.ID, "complete")
	if errs, docs := list("errors"), list("documents"); len(errs.Outputs) != 0 || len(docs.Outputs) != 1 || docs.Outputs[0].ItemID != item {
		t.Errorf("after a retry that succeeded: errors %+v, documents %+v; want none and the item's", errs, docs)
	}
	got, h := attempts(item)
	if got != "call 1 failed service down; call 2 failed service down; call 3 complete ; collect 1 complete ; collect 2 complete ; collect 3 complete " {
		t.Errorf("attempts after a retry that succeeded = %q", got)
	}
	if len(h.Superseded) != 1 || h.Superseded[0].Kind != "error" {
		t.Errorf("superseded outputs = %+v, want the error", h.Superseded)
	}
	var apiErr api.Error
	b.json(t, "GET", "/v1/items/999999/attempts", nil, 404, &apiErr)

	// The job's history holds the same attempts, read a task per page through the cursors,
	// with the item, when each was queued and how long it ran.
	var lines []string
	next := ""
	for pages := 0; ; pages++ {
		var page struct {
			Attempts []struct {
				ItemID      int64      `json:"item_id"`
				Step        string     `json:"step"`
				Attempt     int        `json:"attempt"`
				State       string     `json:"state"`
				Error       string     `json:"error"`
				QueuedAt    time.Time  `json:"queued_at"`
				StartedAt   time.Time  `json:"started_at"`
				FinishedAt  *time.Time `json:"finished_at"`
				DurationSec *float64   `json:"duration_seconds"`
			} `json:"attempts"`
			NextCursor string `json:"next_cursor"`
		}
		b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/history?limit=1&cursor=%s", job.ID, next), nil, 200, &page)
		for _, a := range page.Attempts {
			if a.ItemID != item || a.QueuedAt.IsZero() || a.StartedAt.Before(a.QueuedAt) || a.FinishedAt == nil || a.DurationSec == nil ||
				*a.DurationSec != a.FinishedAt.Sub(a.StartedAt).Seconds() {
				t.Errorf("history attempt %+v: want item %d, queued before started, a finish and its duration", a, item)
			}
			lines = append(lines, fmt.Sprintf("%s %d %s %s", a.Step, a.Attempt, a.State, a.Error))
		}
		if next = page.NextCursor; next == "" {
			break
		}
		if pages > 10 {
			t.Fatal("the job's history does not end")
		}
	}
	if got := strings.Join(lines, "; "); got != "call 1 failed service down; call 2 failed service down; call 3 complete ; collect 1 complete ; collect 2 complete ; collect 3 complete " {
		t.Errorf("the job's history = %q", got)
	}
	b.json(t, "GET", "/v1/jobs/999999/history", nil, 404, &apiErr)
	b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/history?cursor=%s", job.ID, cursor.MakeID(cursor.History(job.ID+1), 1)), nil, 400, &apiErr)
}

// TestOpenAPIMatchesRoutes: every documented path is routed (probed through the handler's mux
// with a reader token: a routed path never answers the catch-all "no such endpoint"), and every
// route is documented.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	b.json(t, "GET", "/v1/openapi.json", nil, 200, &doc)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
			p := strings.NewReplacer("{id}", "999999", "{content}", "text", "{name}", "zz", "{action}", "Zz", "{fragment}", "done").Replace(path)
			code, data := b.do(t, strings.ToUpper(method), p, b.admin, "application/json", strings.NewReader("{}"))
			if strings.Contains(string(data), "no such endpoint") || code == 405 {
				t.Errorf("documented %s %s is not routed: %d %s", method, path, code, data)
			}
		}
	}
	for _, r := range b.apiForRoutes(t).Routes() {
		if !documented[r] {
			t.Errorf("route %s is not documented", r)
		}
	}
	if code, data := b.do(t, "GET", "/v1/nothing", b.admin, "", nil); code != 404 || !strings.Contains(string(data), "no such endpoint") {
		t.Errorf("unknown path = %d %s", code, data)
	}
}

func (b *bundle) apiForRoutes(t *testing.T) *api.API {
	return api.New(api.Config{Backend: workerproto.NewBackend(b.e, nil, nil), Records: b.db, NoAuth: true})
}

// TestAuditLog: a named token's cancel and retry, and a workflow saved, are in the audit log with
// who and when, newest first, by job and paged; a reader's refused retry is not; nothing is
// ever removed from it.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	alice, err := b.tokens.CreateNamed(api.RoleAdmin, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.tokens.CreateNamed(api.RoleAdmin, "bad\nname"); err == nil {
		t.Error("a token name with a newline was accepted")
	}
	inbox := filepath.Join(b.dir, "inbox")
	os.MkdirAll(inbox, 0o700)
	os.WriteFile(filepath.Join(inbox, "x.txt"), []byte("x"), 0o600)
	var job struct {
		ID int64 `json:"id"`
	}
	b.json(t, "POST", "/v1/workflows", "name: flakydocs\nsteps:\n  call: {action: flaky, needs: [start]}\n  collect: {action: ingest, needs: [children.done]}\n", 201, nil)
	b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "flakydocs", "paths": []string{filepath.Join(inbox, "x.txt")}}, 201, &job)
	waitState(t, b, job.ID, "complete")
	if code, data := b.do(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", job.ID), b.reader, "", nil); code != 403 {
		t.Fatalf("a reader's retry: %d %s", code, data)
	}
	if code, data := b.do(t, "POST", fmt.Sprintf("/v1/jobs/%d/retry", job.ID), alice, "", nil); code != 200 {
		t.Fatalf("alice's retry: %d %s", code, data)
	}
	type page struct {
		Entries []struct {
			Who, Action, Detail string
			JobID               int64     `json:"job_id"`
			At                  time.Time `json:"at"`
		} `json:"entries"`
		NextCursor string `json:"next_cursor"`
	}
	var all, mine, first, second page
	b.json(t, "GET", "/v1/audit", nil, 200, &all)
	if len(all.Entries) != 2 || all.Entries[0].Who != "alice" || all.Entries[0].Action != "retry" || all.Entries[0].JobID != job.ID ||
		all.Entries[1].Action != "workflow" || !strings.HasPrefix(all.Entries[1].Who, "token ") || all.Entries[1].Detail != "saved flakydocs v1" ||
		time.Since(all.Entries[0].At) > time.Minute {
		t.Errorf("the audit log: %+v; want alice's retry, then the workflow saved by an unnamed token", all.Entries)
	}
	b.json(t, "GET", fmt.Sprintf("/v1/audit?job_id=%d", job.ID), nil, 200, &mine)
	if len(mine.Entries) != 1 || mine.Entries[0].Action != "retry" {
		t.Errorf("the job's audit log: %+v", mine.Entries)
	}
	b.json(t, "GET", "/v1/audit?limit=1", nil, 200, &first)
	b.json(t, "GET", "/v1/audit?limit=1&cursor="+first.NextCursor, nil, 200, &second)
	if len(first.Entries) != 1 || len(second.Entries) != 1 || second.Entries[0].Action != "workflow" {
		t.Errorf("the audit log a page at a time: %+v then %+v", first, second)
	}
	b.json(t, "GET", "/v1/audit?job_id=x", nil, 400, nil)
}

// TestAuditCommitsWithTheChange: an audit entry is written in the transaction of its change, on
// both drivers. While the log cannot be written, a cancel, an event and a workflow saved are
// refused and change nothing (no change without its entry); once it can, each commits with
// exactly one entry.
func TestAuditCommitsWithTheChange(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		b := setupOn(t, open)
		inbox := filepath.Join(b.dir, "inbox")
		os.MkdirAll(inbox, 0o700)
		os.WriteFile(filepath.Join(inbox, "a.txt"), []byte("a"), 0o600)
		b.json(t, "POST", "/v1/workflows", docsWorkflow, 201, nil)
		var job struct {
			ID int64 `json:"id"`
		}
		b.json(t, "POST", "/v1/jobs", map[string]any{"workflow": "docs", "paths": []string{filepath.Join(inbox, "a.txt")}}, 201, &job)
		var items struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
		}
		poll.Until(t, 30*time.Second, "the file waiting for its approval", func() (bool, string) {
			b.json(t, "GET", fmt.Sprintf("/v1/jobs/%d/items", job.ID), nil, 200, &items)
			p, err := b.e.Progress(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return len(items.Items) == 1 && p.Waiting, fmt.Sprint(p.Items, p.Tasks)
		})
		rename := func(from, to string) {
			t.Helper()
			x := b.db.DomainSQL()
			if _, err := x.Exec(t.Context(), "ALTER TABLE "+from+" RENAME TO "+to); err != nil {
				t.Fatal(err)
			}
		}
		rename("audit_events", "audit_events_away")
		b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", job.ID), nil, 500, nil)
		b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/events", job.ID), map[string]any{"event": "approved", "item_id": items.Items[0].ID}, 500, nil)
		b.json(t, "POST", "/v1/workflows", strings.Replace(docsWorkflow, "success: [documented]", "success: [documented, done]", 1), 500, nil)
		if j := waitState(t, b, job.ID, "running"); j["state"] != "running" {
			t.Fatalf("the job after a refused cancel: %v", j)
		}
		if p, err := b.e.Progress(t.Context(), job.ID); err != nil || !p.Waiting {
			t.Errorf("the file after a refused approval: %v %v, want still waiting", p, err)
		}
		var wfs struct {
			Workflows []struct{ Name string } `json:"workflows"`
		}
		if b.json(t, "GET", "/v1/workflows", nil, 200, &wfs); len(wfs.Workflows) != 1 {
			t.Errorf("workflows after a refused save: %+v, want docs v1 alone", wfs.Workflows)
		}
		rename("audit_events_away", "audit_events")

		b.json(t, "POST", fmt.Sprintf("/v1/jobs/%d/cancel", job.ID), nil, 200, nil)
		var all struct {
			Entries []struct{ Action, Detail string } `json:"entries"`
		}
		b.json(t, "GET", "/v1/audit", nil, 200, &all)
		if len(all.Entries) != 2 || all.Entries[0].Action != "cancel" || all.Entries[1].Action != "workflow" || all.Entries[1].Detail != "saved docs v1" {
			t.Errorf("the audit log: %+v; want the workflow saved, then one cancel", all.Entries)
		}
	})
}

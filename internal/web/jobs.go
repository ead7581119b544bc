package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// jobRow is a job as the pages show it.
type jobRow struct {
	*record.Job
	Progress *engine.Progress
	Items    int // items so far
	Done     int // ingested items
	Failed   int // failed tasks
}

// Percent is the progress in whole percent.
func (j jobRow) Percent() int {
	if j.Progress == nil {
		return 0
	}
	if j.State != record.JobComplete {
		return int(j.Progress.Fraction * 100) // 100 % means done
	}
	return 100
}

// Running reports whether the job is running.
func (j jobRow) Running() bool { return j.State == record.JobRunning }

// duration is how long the job ran: to its end, or to now while it runs.
func (j jobRow) duration(now time.Time) time.Duration {
	if j.FinishedAt.IsZero() {
		return now.Sub(j.CreatedAt)
	}
	return j.FinishedAt.Sub(j.CreatedAt)
}

// Duration is how long the job ran, to now while it runs.
func (j jobRow) Duration() time.Duration { return j.duration(time.Now()) }

func (w *Web) jobRow(ctx context.Context, j *record.Job) jobRow {
	row := jobRow{Job: j}
	if p, err := w.b.Engine().Progress(ctx, j.ID); err == nil {
		row.Progress = p
		for st, n := range p.Items {
			row.Items += n
			if st == record.ItemIngested {
				row.Done += n
			}
		}
		row.Failed = p.Tasks[record.TaskFailed]
	}
	return row
}

func (w *Web) jobsPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	jq, err := readJobsQuery(r.URL.Query())
	if err != nil {
		return err
	}
	page, err := w.listJobs(r.Context(), jq)
	if err != nil {
		return err
	}
	wfs, err := w.latestWorkflows(r.Context())
	if err != nil {
		return err
	}
	data := struct {
		*jobsPage
		Q         jobsQuery
		Headers   map[string]sortHeader
		Workflows []workflowChoice
		AllStates []record.JobState
		Filtered  bool
		Now       time.Time
	}{page, jq, jq.headers(), wfs, record.JobStates(),
		len(jq.Values) > 0, w.b.Engine().Now()}
	w.render(rw, r, http.StatusOK, "jobs", s, pageData{Title: "Jobs", Nav: "jobs", Data: data})
	return nil
}

// workflowChoice is a stored workflow offered for a new job.
type workflowChoice struct {
	Name     string
	Version  int
	Versions int
}

// latestWorkflows lists each stored workflow once, at its latest version, by name.
func (w *Web) latestWorkflows(ctx context.Context) ([]workflowChoice, error) {
	wfs, err := w.rec.WorkflowList(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*workflowChoice{}
	for _, wf := range wfs {
		c := by[wf.Name]
		if c == nil {
			c = &workflowChoice{Name: wf.Name}
			by[wf.Name] = c
		}
		c.Versions++
		if wf.Version > c.Version {
			c.Version = wf.Version
		}
	}
	out := make([]workflowChoice, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (w *Web) newJobPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	wfs, err := w.latestWorkflows(r.Context())
	if err != nil {
		return err
	}
	selected := r.URL.Query().Get("workflow")
	if selected == "" {
		selected = "documents"
	}
	w.render(rw, r, http.StatusOK, "newjob", s, pageData{Title: "New job", Nav: "jobs", Data: struct {
		Workflows []workflowChoice
		Selected  string
	}{wfs, selected}})
	return nil
}

// itemRow is an item with its tasks.
type itemRow struct {
	*record.Item
	Tasks []*record.Task
	// PDF is the item's one child when that is the PDF a converter made of it (same name,
	// application/pdf): shown as the item's PDF, not as an item inside it.
	PDF int64
}

// itemPage is a page of one level of the item tree.
type itemPage struct {
	JobID    int64
	ParentID int64
	Items    []itemRow
	// Next is the cursor of the next page; empty on the last one.
	Next string
}

const itemsPerPage = 50

// items is the page of parent's children in job jobID after the cursor c (empty: the first).
func (w *Web) items(ctx context.Context, jobID, parent int64, c string) (*itemPage, error) {
	after, err := cursor.Read(cursor.Items(jobID, parent), c, 1)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	p := store.ItemListParams{JobID: jobID, ParentID: &parent, Limit: itemsPerPage}
	if after != nil {
		p.AfterSort = after[0]
	}
	items, err := w.rec.ItemList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &itemPage{JobID: jobID, ParentID: parent}
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	byItem := map[int64][]*record.Task{}
	if len(ids) > 0 {
		tasks, err := w.rec.TaskListByItems(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			byItem[t.ItemID] = append(byItem[t.ItemID], t)
		}
	}
	for _, it := range items {
		row := itemRow{Item: it, Tasks: byItem[it.ID]}
		if it.NChildren == 1 && it.ContentType != "application/pdf" {
			if row.PDF, err = w.pdfOf(ctx, it); err != nil {
				return nil, err
			}
		}
		out.Items = append(out.Items, row)
	}
	if len(items) == itemsPerPage {
		out.Next = cursor.Make(cursor.Items(jobID, parent), items[len(items)-1].SortKey)
	}
	return out, nil
}

// pdfOf returns the id of the PDF a converter made of it, its child of the same name, or 0.
func (w *Web) pdfOf(ctx context.Context, it *record.Item) (int64, error) {
	parent := it.ID
	kids, err := w.rec.ItemList(ctx, store.ItemListParams{JobID: it.JobID, ParentID: &parent, Limit: 1})
	if err != nil || len(kids) == 0 {
		return 0, err
	}
	if k := kids[0]; k.Name == it.Name && k.ContentType == "application/pdf" {
		return k.ID, nil
	}
	return 0, nil
}

// outputValue is a document's or an error's output, as the documents workflow writes them.
type outputValue struct {
	ItemID  int64
	Title   string `json:"title"`
	Name    string `json:"name"`
	Message string `json:"message"`
	Page    int    `json:"page_number"`
	Item    *record.Item
}

// outputOf is the output of the item with this value; it (nil when unknown) fills in what the
// value leaves out.
func outputOf(itemID int64, value []byte, it *record.Item) outputValue {
	v := outputValue{ItemID: itemID, Item: it}
	_ = json.Unmarshal(value, &v)
	if it != nil {
		if v.Name == "" {
			v.Name = it.Name
		}
		if v.Message == "" {
			v.Message = it.Error
		}
		if v.Title == "" {
			v.Title = it.Name
		}
	}
	return v
}

func (w *Web) outputs(ctx context.Context, jobID int64, kind string, after int64, limit int) ([]outputValue, int64, error) {
	outs, err := w.rec.OutputList(ctx, store.OutputListParams{JobID: jobID, Kind: kind, AfterItem: after, Limit: limit})
	if err != nil {
		return nil, 0, err
	}
	ids := make([]int64, len(outs))
	for i, o := range outs {
		ids[i] = o.ItemID
	}
	items := map[int64]*record.Item{}
	if len(ids) > 0 {
		its, err := w.rec.ItemGetMany(ctx, ids)
		if err != nil {
			return nil, 0, err
		}
		for _, it := range its {
			items[it.ID] = it
		}
	}
	var vals []outputValue
	for _, o := range outs {
		vals = append(vals, outputOf(o.ItemID, o.Value, items[o.ItemID]))
	}
	var next int64
	if len(outs) == limit {
		next = outs[len(outs)-1].ItemID
	}
	return vals, next, nil
}

// pathJob returns the job the path's {id} names, or a 404 saying there is none.
func (w *Web) pathJob(r *http.Request) (*record.Job, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	j, err := w.rec.JobGet(r.Context(), id)
	if err != nil {
		return nil, store.NotFound(err, "job", id)
	}
	return j, nil
}

func (w *Web) jobPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	j, err := w.pathJob(r)
	if err != nil {
		return err
	}
	ctx, id := r.Context(), j.ID
	roots, err := w.items(ctx, id, 0, "")
	if err != nil {
		return err
	}
	errs, _, err := w.outputs(ctx, id, "error", 0, 200)
	if err != nil {
		return err
	}
	var external []string
	if def, _, err := w.b.Engine().Definition(ctx, j.WorkflowName, j.WorkflowVersion); err == nil {
		external = def.External
	}
	var waiting []waitingTask
	if j.State == record.JobRunning && len(external) > 0 {
		if waiting, err = w.waitingSteps(ctx, j, w.b.Engine().Now()); err != nil {
			return err
		}
	}
	tl, err := w.timeline(ctx, j, "", timelinePreview)
	if err != nil {
		return err
	}
	docs, err := w.rec.OutputList(ctx, store.OutputListParams{JobID: id, Kind: store.OutputDocument, Limit: 1})
	if err != nil {
		return err
	}
	changes, err := audit.List(ctx, w.rec, audit.ListParams{JobID: id, Limit: 20})
	if err != nil {
		return err
	}
	steps, err := w.steps(ctx, j)
	if err != nil {
		return err
	}
	// "The job was created." is news only while the job runs: the page reloads itself, with
	// the same address, when the job ends.
	code := r.URL.Query().Get("notice")
	if code == "created" && j.State != record.JobRunning {
		code = ""
	}
	data := struct {
		Job      jobRow
		Roots    *itemPage
		Errors   []outputValue
		External []string
		Waiting  []waitingTask
		Notice   string
		Timeline *timeline
		// HasDocuments says the job made a document so far.
		HasDocuments bool
		Metadata     []metadataField
		// Changes are the job's last 20 entries of the audit log.
		Changes []audit.Entry
		// Steps are its workflow's steps with their task counts; nil when the workflow's
		// version cannot be read.
		Steps *jobSteps
	}{w.jobRow(ctx, j), roots, errs, external, waiting, notice(code), tl, len(docs) > 0, metadataFields(j.Metadata), changes, steps}
	w.render(rw, r, http.StatusOK, "job", s, pageData{Title: fmt.Sprintf("Job %d", id), Nav: "jobs", Data: data})
	return nil
}

// metadataField is a key of a job's metadata and its value as JSON text (a string unquoted).
type metadataField struct{ Key, Value string }

// metadataFields lists the metadata's keys in order, for the job page.
func metadataFields(raw []byte) []metadataField {
	var m map[string]json.RawMessage
	if metadata.Unmarshal(raw, &m) != nil {
		return nil
	}
	out := make([]metadataField, 0, len(m))
	for k, v := range m {
		f := metadataField{Key: k, Value: string(v)}
		var str string
		if json.Unmarshal(v, &str) == nil {
			f.Value = str
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// notice turns a notice code from a redirect into words (never reflecting the query's text).
func notice(code string) string {
	switch code {
	case "canceled":
		return "The job was canceled."
	case "retried":
		return "The failed tasks run again."
	case "event":
		return "The event was sent."
	case "created":
		return "The job was created."
	}
	return ""
}

func (w *Web) itemsFragment(rw http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	parent, _ := strconv.ParseInt(r.URL.Query().Get("parent_id"), 10, 64)
	page, err := w.items(r.Context(), id, parent, r.URL.Query().Get("cursor"))
	if err != nil {
		return err
	}
	if len(page.Items) == 0 {
		// An empty level of a job that does not exist is a 404 naming it, not an empty list.
		if _, err := w.pathJob(r); err != nil {
			return err
		}
	}
	w.render(rw, r, http.StatusOK, "frag-items", s, pageData{Data: page})
	return nil
}

// callAPI runs a request through the API's handler with the session's token and returns its
// status and its decoded error message, so the UI's forms share the API's rules (409 for
// canceling a job that is not running, 422 for an undeclared event, …).
func (w *Web) callAPI(ctx context.Context, s *session, method, path string, body any) (int, string, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	w.cfg.API.ServeHTTP(rec, req)
	var e struct {
		Message string `json:"message"`
	}
	if rec.Code >= 400 {
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
	}
	return rec.Code, e.Message, nil
}

// jobAction posts to the API and goes back to the job page, or shows the API's refusal.
func (w *Web) jobAction(rw http.ResponseWriter, r *http.Request, s *session, verb, done string, body any) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	status, msg, err := w.callAPI(r.Context(), s, http.MethodPost, fmt.Sprintf("/v1/jobs/%d/%s", id, verb), body)
	if err != nil {
		return err
	}
	if status >= 400 {
		if msg == "" {
			msg = http.StatusText(status)
		}
		return errorf(status, "%s", msg)
	}
	http.Redirect(rw, r, fmt.Sprintf("/jobs/%d?notice=%s", id, done), http.StatusSeeOther)
	return nil
}

func (w *Web) cancelJob(rw http.ResponseWriter, r *http.Request, s *session) error {
	return w.jobAction(rw, r, s, "cancel", "canceled", nil)
}

func (w *Web) retryJob(rw http.ResponseWriter, r *http.Request, s *session) error {
	return w.jobAction(rw, r, s, "retry", "retried", nil)
}

// fireEvent fires a declared external event, on an item by id or on every item whose metadata
// has key=value (the correlation key).
func (w *Web) fireEvent(rw http.ResponseWriter, r *http.Request, s *session) error {
	event := strings.TrimSpace(r.PostFormValue("event"))
	corr := strings.TrimSpace(r.PostFormValue("correlation"))
	body := map[string]any{"event": event}
	if id, err := strconv.ParseInt(corr, 10, 64); err == nil && id > 0 {
		body["item_id"] = id
	} else {
		k, v, ok := strings.Cut(corr, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return errorf(http.StatusBadRequest, "write the correlation as key=value (a metadata key of the item) or an item id")
		}
		body["key"], body["value"] = strings.TrimSpace(k), metadataValue(strings.TrimSpace(v))
	}
	return w.jobAction(rw, r, s, "events", "event", body)
}

// metadataValue reads a typed value: a JSON number (kept exact), boolean or quoted string, else
// the text ("01234" stays a string). The form offers the waiting items' keys written so
// ([engine.CorrelationKeys]).
func metadataValue(v string) any {
	var x any
	if metadata.Unmarshal([]byte(v), &x) == nil {
		switch x.(type) {
		case json.Number, bool, string:
			return x
		}
	}
	return v
}

// since is how long ago t was.
func since(now, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return now.Sub(t)
}

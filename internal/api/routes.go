package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

func (a *API) routes() []route {
	return append([]route{
		{"GET", "/v1/openapi.json", RoleReader, "The OpenAPI 3.1 document of this API", a.openAPI, 200},
		{"GET", "/metrics", RoleReader, "Prometheus metrics (text format)", a.serveMetrics, 200},
		{"GET", "/v1/jobs", RoleReader, "List jobs, newest first (filters: state, workflow, q, created_from, created_until, meta=KEY=VALUE repeated; pagination: cursor, limit)", a.listJobs, 200},
		{"POST", "/v1/jobs", RoleAdmin, "Create a job from a workflow: JSON with server-side paths, or multipart uploads", a.createJob, 201},
		{"GET", "/v1/jobs/{id}", RoleReader, "A job with its progress", a.getJob, 200},
		{"POST", "/v1/jobs/{id}/cancel", RoleAdmin, "Cancel a running job", a.cancelJob, 200},
		{"POST", "/v1/jobs/{id}/retry", RoleAdmin, "Retry the failed and canceled tasks of an ended job (409 when there are none)", a.retryJob, 200},
		{"GET", "/v1/jobs/{id}/progress", RoleReader, "The job's progress as server-sent events until it ends", a.progress, 200},
		{"GET", "/v1/jobs/{id}/history", RoleReader, "Every attempt of the job's tasks: when each was queued, started and ended, its worker and error (pagination: cursor, limit — tasks per page)", a.jobHistory, 200},
		{"GET", "/v1/jobs/{id}/items", RoleReader, "A level of the job's item tree (parent_id; pagination: cursor, limit)", a.listItems, 200},
		{"GET", "/v1/jobs/{id}/waits", RoleReader, "What the running job waits on: the external events its open items need, and its blocked steps with what they need, counted (limit: open items read, default 1000)", a.jobWaits, 200},
		{"POST", "/v1/jobs/{id}/events", RoleAdmin, "Fire an external event on an item, by item id or by a metadata key", a.fireEvent, 202},
		{"GET", "/v1/jobs/{id}/documents", RoleReader, "The job's documents (outputs of kind document)", a.listOutputs("document"), 200},
		{"GET", "/v1/jobs/{id}/errors", RoleReader, "The job's errors (outputs of kind error)", a.listOutputs("error"), 200},
		{"GET", "/v1/documents/search", RoleReader, "Full-text search of documents, best first (q; filters: job_id, type, meta=KEY=VALUE repeated; pagination: cursor, limit)", a.searchDocuments, 200},
		{"POST", "/v1/filesets", RoleAdmin, "Ingest datasets: a job of the fileset workflow with a root per request ({requests: [...], key})", a.createFilesets, 201},
		{"GET", "/v1/filesets", RoleReader, "Stored fileset results by (ingest_type, base_url) (filters: status; pagination: cursor, limit)", a.listFilesets, 200},
		{"GET", "/v1/queues", RoleReader, "The scaling signal: per queue and action, the backlog (ready tasks), the oldest one's age, the tasks running, the throughput (completed in the last minute) and the recommended number of workers", a.listQueues, 200},
		{"GET", "/v1/audit", RoleReader, "The audit log, newest first: who canceled, retried, sent an event, approved or saved a workflow, and when (filter: job_id; pagination: cursor, limit)", a.listAudit, 200},
		{"GET", "/v1/items/{id}", RoleReader, "One item, with every step of its workflow in order and the state of each on the item", a.getItem, 200},
		{"GET", "/v1/items/{id}/attempts", RoleReader, "Every attempt of the item's tasks, and the outputs a later result superseded", a.itemAttempts, 200},
		{"GET", "/v1/items/{id}/{content}", RoleReader, "Download an item's original, pdf, text or thumbnail", a.download, 200},
		{"GET", "/v1/workflows", RoleReader, "List stored workflow versions", a.listWorkflows, 200},
		{"POST", "/v1/workflows", RoleAdmin, "Validate and store a workflow (YAML or JSON body)", a.applyWorkflow, 201},
		{"POST", "/v1/workflows/validate", RoleReader, "Validate a workflow without storing it", a.validateWorkflow, 200},
		{"GET", "/v1/workflows/{name}", RoleReader, "A workflow's definition (latest or ?version=)", a.getWorkflow, 200},
		{"GET", "/v1/workflows/{name}/graph", RoleReader, "A workflow's diagram (?format=svg or dot)", a.graph, 200},
	}, append(a.graphRoutes(), a.sheetRoutes()...)...)
}

// --- jobs

type jobJSON struct {
	ID              int64           `json:"id"`
	Key             string          `json:"key,omitempty"`
	Workflow        string          `json:"workflow"`
	WorkflowVersion int             `json:"workflow_version"`
	State           record.JobState `json:"state"`
	Error           string          `json:"error,omitempty"`
	Metadata        json.RawMessage `json:"metadata"`
	Options         json.RawMessage `json:"options"`
	CreatedAt       time.Time       `json:"created_at"`
	FinishedAt      *time.Time      `json:"finished_at,omitempty"`
	Progress        *progressJSON   `json:"progress,omitempty"`
}

type progressJSON struct {
	State      record.JobState          `json:"state"`
	Fraction   float64                  `json:"fraction"`
	Items      map[record.ItemState]int `json:"items"`
	Tasks      map[record.TaskState]int `json:"tasks"`
	ElapsedSec float64                  `json:"elapsed_seconds"`
	// ETASec is the estimated time left, null when unknown: before any progress, once the job
	// ended, and while Waiting.
	ETASec *float64 `json:"eta_seconds"`
	// Waiting is true while an item of the running job waits for an external event or an
	// approval: then the time left is unknown.
	Waiting bool `json:"waiting"`
	// WaitingForDownstream is true while a step of the running job that creates children
	// waits for them to be processed: the job's backlog is at the server's --max-backlog.
	WaitingForDownstream bool `json:"waiting_for_downstream"`
}

func toJob(j *record.Job) *jobJSON {
	out := &jobJSON{ID: j.ID, Key: j.Key, Workflow: j.WorkflowName, WorkflowVersion: j.WorkflowVersion, State: j.State, Error: j.Error,
		Metadata: rawOr(j.Metadata), Options: rawOr(j.Options), CreatedAt: j.CreatedAt}
	if !j.FinishedAt.IsZero() {
		t := j.FinishedAt
		out.FinishedAt = &t
	}
	return out
}

func toProgress(p *engine.Progress) *progressJSON {
	out := &progressJSON{State: p.State, Fraction: p.Fraction, Items: p.Items, Tasks: p.Tasks,
		ElapsedSec: p.Elapsed.Seconds(), Waiting: p.Waiting, WaitingForDownstream: p.Downstream}
	if p.ETA > 0 {
		eta := p.ETA.Seconds()
		out.ETASec = &eta
	}
	return out
}

func rawOr(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	return b
}

// jobList is a page of GET /v1/jobs.
type jobList struct {
	Jobs []*jobJSON `json:"jobs"`
	// NextCursor is the cursor of the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request) error {
	c, limit, err := pageOf(r, 100)
	if err != nil {
		return err
	}
	after, err := cursor.ReadID(cursor.Jobs, c)
	if err != nil {
		return badCursor(err)
	}
	p, err := JobFilter(r.URL.Query())
	if err != nil {
		return err
	}
	p.AfterID, p.Limit = after, limit
	jobs, err := a.rec.JobList(r.Context(), p)
	if err != nil {
		return err
	}
	out := jobList{Jobs: []*jobJSON{}}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, toJob(j))
	}
	if len(jobs) == limit && limit > 0 {
		out.NextCursor = cursor.MakeID(cursor.Jobs, jobs[len(jobs)-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	j, err := a.rec.JobGet(r.Context(), id)
	if err != nil {
		return notFound(err, "job %d", id)
	}
	out := toJob(j)
	if p, err := a.b.Engine().Progress(r.Context(), id); err == nil {
		out.Progress = toProgress(p)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// notFound turns a store's not-found into a 404 naming what the request asked for ("job 99
// does not exist"); other errors pass.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, store.ErrNotFound) {
		return errf(CodeNotFound, format+" does not exist", args...)
	}
	return err
}

// createJobRequest is the JSON body of POST /v1/jobs, or the "job" part of a multipart upload.
// Only workflow is required (omitempty marks the rest optional in the OpenAPI document).
type createJobRequest struct {
	Workflow string         `json:"workflow"`
	Version  int            `json:"version,omitempty"`
	Key      string         `json:"key,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	Options  map[string]any `json:"options,omitempty"`
	// Paths are server-side files under one of the configured path roots.
	Paths []string `json:"paths,omitempty"`
}

func (a *API) createJob(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var req createJobRequest
	var roots []engine.Root
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	lim := a.cfg.Limits
	if mt == "multipart/form-data" {
		// Files are streamed part by part into the blob store; nothing is buffered whole. An
		// upload may take as long as it keeps sending.
		if bd, ok := r.Body.(*deadlineBody); ok {
			bd.streaming()
		}
		uploadLeft := lim.MaxUploadBytes
		mr := multipart.NewReader(r.Body, params["boundary"])
		for parts := 1; ; parts++ {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return errf(CodeBadRequest, "read multipart body: %v", err)
			}
			if parts > lim.MaxParts {
				return tooLarge("max-parts", "the request has more than %d multipart parts", lim.MaxParts)
			}
			switch part.FormName() {
			case "job":
				if err := metadata.Decoder(io.LimitReader(part, 1<<20)).Decode(&req); err != nil {
					return errf(CodeBadRequest, "job part: %v", err)
				}
			case "file", "files":
				name := part.FileName()
				if name == "" {
					name = fmt.Sprintf("file-%d", len(roots))
				}
				if len(roots) >= lim.MaxRoots {
					return tooLarge("max-roots", "a job may be created with at most %d roots (files and paths)", lim.MaxRoots)
				}
				cr := &capReader{r: part, left: uploadLeft}
				sha, size, err := a.b.Blobs().Put(ctx, cr)
				if cr.hit {
					return tooLarge("max-upload-bytes", "the files uploaded for one job exceed %s (at %q)", formatBytes(lim.MaxUploadBytes), name)
				}
				if cr.readErr != nil {
					return errf(CodeBadRequest, "read upload %q: %v (a truncated or malformed multipart body)", name, cr.readErr)
				}
				if err != nil {
					return fmt.Errorf("store upload %q: %w", name, err)
				}
				uploadLeft -= size
				roots = append(roots, engine.Root{Ordinal: len(roots), Name: name, ContentType: part.Header.Get("Content-Type"), BlobSHA256: sha, Size: size})
			default:
				return errf(CodeBadRequest, "unexpected part %q: send a \"job\" JSON part and \"file\" parts", part.FormName())
			}
		}
	} else if err := decodeCapped(r.Body, 4<<20, "the job JSON", &req); err != nil {
		return err
	}
	if req.Workflow == "" {
		return errf(CodeBadRequest, "workflow is required")
	}
	if err := a.jobMetadataLocations(req.Workflow, req.Metadata); err != nil {
		return err
	}
	if len(roots)+len(req.Paths) > lim.MaxRoots {
		return tooLarge("max-roots", "a job may be created with at most %d roots (files and paths), not %d", lim.MaxRoots, len(roots)+len(req.Paths))
	}
	for _, p := range req.Paths {
		root, err := a.serverFile(r, p, len(roots))
		if err != nil {
			return err
		}
		roots = append(roots, root)
	}
	sub, err := a.b.Engine().Submit(ctx, engine.SubmitParams{Workflow: req.Workflow, Version: req.Version, Key: req.Key,
		Metadata: req.Metadata, Options: req.Options})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound(err, "workflow %s", store.WorkflowRef(req.Workflow, req.Version))
		}
		return err
	}
	return a.submit(w, r, sub, roots)
}

// submit adds the roots to a job just created (or found by its key), seals it and answers with
// it: 201 when created, 200 for a retried request.
func (a *API) submit(w http.ResponseWriter, r *http.Request, sub *engine.Submission, roots []engine.Root) error {
	ctx := r.Context()
	// Roots are committed in batches: the job is sealed only after the last one, so it
	// cannot complete while some are still being added. A retried request (same key) adds the
	// roots its first try did not, and seals.
	if err := sub.Add(ctx, roots...); err != nil {
		return err
	}
	if err := sub.Seal(ctx); err != nil {
		return err
	}
	job := sub.Job()
	if j, err := a.rec.JobGet(ctx, job.ID); err == nil {
		job = j
	}
	status := http.StatusCreated
	if !sub.Created() {
		status = http.StatusOK
	}
	writeJSON(w, status, toJob(job))
	return nil
}

// serverFile stores a server-side file, which must lie under a configured root ([API.location]).
// The file is opened through an [os.Root]: a symlink may point elsewhere inside the root but
// never out of it, and ".." is refused outright. Only regular files are read: a FIFO would block
// the request until some writer came, and a device could be endless, so both are refused before
// they are read.
func (a *API) serverFile(r *http.Request, p string, ordinal int) (engine.Root, error) {
	t, err := a.location("path", p, pathroot.Local)
	if err != nil {
		return engine.Root{}, err
	}
	if !t.Info.Mode().IsRegular() {
		return engine.Root{}, notKind("path", p, t.Info.Mode(), "a regular file")
	}
	// Opened without blocking: should the file have become a FIFO since the check, opening it
	// does not wait for a writer, and the check below refuses it.
	f, err := t.Open()
	if err != nil {
		return engine.Root{}, a.locationError("path", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return engine.Root{}, fmt.Errorf("stat %q: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return engine.Root{}, notKind("path", p, fi.Mode(), "a regular file")
	}
	sha, size, err := a.b.Blobs().Put(r.Context(), f)
	if err != nil {
		return engine.Root{}, err
	}
	return engine.Root{Ordinal: ordinal, Name: filepath.Base(t.Abs), BlobSHA256: sha, Size: size,
		ContentType: mime.TypeByExtension(filepath.Ext(t.Abs))}, nil
}

func (a *API) cancelJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	j, err := a.rec.JobGet(r.Context(), id)
	if err != nil {
		return notFound(err, "job %d", id)
	}
	if j.State != record.JobRunning {
		return errf(CodeConflict, "job %d is %s, not running", id, j.State)
	}
	if err := a.b.Engine().Cancel(a.audited(r, "cancel", id, ""), id); err != nil {
		return err
	}
	j, err = a.rec.JobGet(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toJob(j))
	return nil
}

// retryJob re-runs the failed and canceled tasks of an ended job ([engine.Engine.Retry]) and returns the job,
// running again.
func (a *API) retryJob(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	j, err := a.b.Engine().Retry(a.audited(r, "retry", id, ""), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(err, "job %d", id)
	case errors.Is(err, engine.ErrNotRetryable), errors.Is(err, engine.ErrNothingToRetry):
		return errf(CodeConflict, "%s", err)
	case err != nil:
		return err
	}
	writeJSON(w, http.StatusOK, toJob(j))
	return nil
}

// progress streams the job's progress as server-sent events: one "progress" event per interval
// while it changes, and a final one when the job ends.
func (a *API) progress(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	e := a.b.Engine()
	p, err := e.Progress(r.Context(), id)
	if err != nil {
		return notFound(err, "job %d", id)
	}
	read := false // p is the first value
	return a.streamProgress(w, r, func() (any, bool, string, error) {
		if read {
			if p, err = e.Progress(r.Context(), id); err != nil {
				return nil, false, "", err
			}
		}
		read = true
		return toProgress(p), p.State != record.JobRunning, fmt.Sprintf("{\"state\":%q}", p.State), nil
	})
}

// --- items

type itemJSON struct {
	ID            int64            `json:"id"`
	JobID         int64            `json:"job_id"`
	ParentID      int64            `json:"parent_id,omitempty"`
	Ordinal       int              `json:"ordinal"`
	Name          string           `json:"name"`
	ContentType   string           `json:"content_type,omitempty"`
	Size          int64            `json:"size"`
	SHA256        string           `json:"sha256,omitempty"`
	State         record.ItemState `json:"state"`
	Error         string           `json:"error,omitempty"`
	NChildren     int              `json:"n_children"`
	HasText       bool             `json:"has_text"`
	HasThumbnail  bool             `json:"has_thumbnail"`
	Metadata      json.RawMessage  `json:"metadata"`
	Options       json.RawMessage  `json:"options"`
	SortKey       string           `json:"sort_key"`
	CreatedAt     time.Time        `json:"created_at"`
	ThumbnailType string           `json:"thumbnail_type,omitempty"`
	// Steps are, in GET /v1/items/{id} only, every step its job's workflow declares, in order,
	// with the state of each on the item: blocked (and what it needs), ready, running,
	// complete, failed, skipped (and why).
	Steps []stepJSON `json:"steps,omitempty"`
}

func toItem(it *record.Item) *itemJSON {
	return &itemJSON{ID: it.ID, JobID: it.JobID, ParentID: it.ParentID, Ordinal: it.Ordinal, Name: it.Name, ContentType: it.ContentType,
		Size: it.Size, SHA256: it.BlobSHA256, State: it.State, Error: it.Error, NChildren: it.NChildren, HasText: it.HasText,
		HasThumbnail: it.ThumbnailSHA != "", Metadata: rawOr(it.Metadata), Options: rawOr(it.Options), SortKey: it.SortKey,
		CreatedAt: it.CreatedAt, ThumbnailType: it.ThumbnailType}
}

// itemList is a page of GET /v1/jobs/{id}/items.
type itemList struct {
	Items []*itemJSON `json:"items"`
	// NextCursor is the cursor of the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (a *API) listItems(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	parent, err := queryInt(r, "parent_id", 0, 0)
	if err != nil {
		return err
	}
	c, limit, err := pageOf(r, 100)
	if err != nil {
		return err
	}
	after, err := cursor.Read(cursor.Items(id, parent), c, 1)
	if err != nil {
		return badCursor(err)
	}
	p := store.ItemListParams{JobID: id, ParentID: &parent, Limit: limit}
	if after != nil {
		p.AfterSort = after[0]
	}
	if r.URL.Query().Get("errors") == "true" {
		p.OnlyErrored = true
	}
	items, err := a.rec.ItemList(r.Context(), p)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		if err := a.parentsExist(r.Context(), id, parent); err != nil {
			return err
		}
	}
	out := itemList{Items: []*itemJSON{}}
	for _, it := range items {
		out.Items = append(out.Items, toItem(it))
	}
	if len(items) == limit && limit > 0 {
		out.NextCursor = cursor.Make(cursor.Items(id, parent), items[len(items)-1].SortKey)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parentsExist returns a 404 naming the job, or the parent item, of a list that does not exist:
// a list under a missing job is "job 99 does not exist", never an empty page. Lists ask only
// when a page comes back empty, so pages with rows cost no extra read.
func (a *API) parentsExist(ctx context.Context, jobID, parentID int64) error {
	if _, err := a.rec.JobGet(ctx, jobID); err != nil {
		return notFound(err, "job %d", jobID)
	}
	if parentID == 0 {
		return nil
	}
	it, err := a.rec.ItemGet(ctx, parentID)
	if err == nil && it.JobID != jobID {
		err = store.ErrNotFound
	}
	return notFound(err, "item %d of job %d", parentID, jobID)
}

func (a *API) getItem(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	it, err := a.rec.ItemGet(r.Context(), id)
	if err != nil {
		return notFound(err, "item %d", id)
	}
	out := toItem(it)
	states, err := a.b.Engine().StepStatesOf(r.Context(), it.JobID, []*record.Item{it})
	if err != nil {
		return err
	}
	out.Steps = toSteps(states[it.ID])
	writeJSON(w, http.StatusOK, out)
	return nil
}

// attemptJSON is one run of one of an item's tasks.
type attemptJSON struct {
	TaskID  int64  `json:"task_id"`
	ItemID  int64  `json:"item_id"`
	Step    string `json:"step"`
	Action  string `json:"action"`
	Attempt int    `json:"attempt"`
	// State is how the attempt ended (complete, failed, canceled), or running.
	State record.TaskState `json:"state"`
	// Worker is the lease owner that ran it, when known.
	Worker string `json:"worker,omitempty"`
	// QueuedAt is when the task was made ready: its first attempt waited from then until
	// StartedAt.
	QueuedAt   time.Time  `json:"queued_at"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// DurationSec is how long the attempt ran, FinishedAt less StartedAt; absent while it runs.
	DurationSec *float64 `json:"duration_seconds,omitempty"`
	Error       string   `json:"error,omitempty"`
}

func toAttempt(at engine.Attempt) attemptJSON {
	j := attemptJSON{TaskID: at.TaskID, ItemID: at.ItemID, Step: at.Step, Action: at.Action, Attempt: at.Attempt, State: at.State,
		Worker: at.Worker, QueuedAt: at.QueuedAt, StartedAt: at.StartedAt, Error: at.Error}
	if !at.FinishedAt.IsZero() {
		f := at.FinishedAt
		d := f.Sub(at.StartedAt).Seconds()
		j.FinishedAt, j.DurationSec = &f, &d
	}
	return j
}

// jobHistory is a page of GET /v1/jobs/{id}/history.
type jobHistory struct {
	Attempts []attemptJSON `json:"attempts"`
	// NextCursor is the cursor of the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// jobHistory answers the attempts of a page of the job's tasks (limit counts tasks: a task
// retried twice gives three attempts, one not yet run none).
func (a *API) jobHistory(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	c, limit, err := pageOf(r, 100)
	if err != nil {
		return err
	}
	after, err := cursor.ReadID(cursor.History(id), c)
	if err != nil {
		return badCursor(err)
	}
	if _, err := a.rec.JobGet(r.Context(), id); err != nil {
		return notFound(err, "job %d", id)
	}
	atts, last, err := a.b.Engine().JobHistory(r.Context(), id, after, limit)
	if err != nil {
		return err
	}
	out := jobHistory{Attempts: []attemptJSON{}}
	for _, at := range atts {
		out.Attempts = append(out.Attempts, toAttempt(at))
	}
	if last != 0 {
		out.NextCursor = cursor.MakeID(cursor.History(id), last)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// supersededJSON is an output of the item that a later result replaced.
type supersededJSON struct {
	Kind         string          `json:"kind"`
	Value        json.RawMessage `json:"value"`
	CreatedAt    time.Time       `json:"created_at"`
	SupersededAt time.Time       `json:"superseded_at"`
}

// itemHistory is GET /v1/items/{id}/attempts: nothing in it is ever deleted, a retry included.
type itemHistory struct {
	Attempts   []attemptJSON    `json:"attempts"`
	Superseded []supersededJSON `json:"superseded_outputs"`
}

func (a *API) itemAttempts(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if _, err := a.rec.ItemGet(r.Context(), id); err != nil {
		return notFound(err, "item %d", id)
	}
	atts, err := a.b.Engine().ItemHistory(r.Context(), id)
	if err != nil {
		return err
	}
	outs, err := a.rec.OutputHistoryList(r.Context(), id)
	if err != nil {
		return err
	}
	h := itemHistory{Attempts: []attemptJSON{}, Superseded: []supersededJSON{}}
	for _, at := range atts {
		h.Attempts = append(h.Attempts, toAttempt(at))
	}
	for _, o := range outs {
		h.Superseded = append(h.Superseded, supersededJSON{Kind: o.Kind, Value: rawOr(o.Value), CreatedAt: o.CreatedAt, SupersededAt: o.SupersededAt})
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}

// download serves an item's original bytes, its PDF (its blob when it is a PDF), its text or its
// thumbnail. All of it comes from an untrusted document, so it is served as inert
// ([setDocumentHeaders]): never sniffed, sandboxed, and an original — or any content of a type a
// browser would run, such as HTML or SVG — as an attachment.
func (a *API) download(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	it, err := a.rec.ItemGet(r.Context(), id)
	if err != nil {
		return notFound(err, "item %d", id)
	}
	name := path.Base(it.Name)
	var sha, ct, filename string
	content := r.PathValue("content")
	switch content {
	case "original":
		sha, ct, filename = it.BlobSHA256, it.ContentType, name
	case "pdf":
		if it.ContentType != "application/pdf" {
			return errf(CodeNotFound, "item %d is %s, not a PDF", id, it.ContentType)
		}
		sha, ct, filename = it.BlobSHA256, "application/pdf", name
	case "text":
		if !it.HasText {
			return errf(CodeNotFound, "item %d has no text", id)
		}
		setDocumentHeaders(w.Header(), "text/plain; charset=utf-8", name+".txt", false)
		_, err := io.WriteString(w, it.Text)
		return err
	case "thumbnail":
		sha, ct = it.ThumbnailSHA, it.ThumbnailType
		filename = name + ".thumbnail"
		if exts, _ := mime.ExtensionsByType(it.ThumbnailType); len(exts) > 0 {
			filename += exts[0]
		}
	default:
		return errf(CodeNotFound, "unknown content %q: want original, pdf, text or thumbnail", content)
	}
	if sha == "" {
		return errf(CodeNotFound, "item %d has no %s", id, content)
	}
	rc, err := a.b.Blobs().Open(r.Context(), sha)
	if err != nil {
		return err
	}
	defer rc.Close()
	setDocumentHeaders(w.Header(), ct, filename, content == "original")
	if size, err := a.b.Blobs().Stat(r.Context(), sha); err == nil {
		w.Header().Set("Content-Length", fmt.Sprint(size))
	}
	// The headers are sent: a failed copy can only be logged. A client that went away is not
	// worth a line.
	if _, err := io.Copy(w, rc); err != nil && r.Context().Err() == nil {
		a.log.Warn("send download", "sha256", sha, "error", err)
	}
	return nil
}

// documentCSP sandboxes content from documents: a browser that opens it runs no script, loads
// nothing and gets a unique origin, so an uploaded page cannot act with the API's origin.
const documentCSP = "sandbox; default-src 'none'"

// inlineTypes are the content types a browser may show in place: it renders them without running
// anything of theirs. Everything else is an attachment.
var inlineTypes = map[string]bool{
	"application/pdf": true, "text/plain": true,
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
}

// setDocumentHeaders sets the headers of bytes that come from a document: the content type (an
// unparsable one becomes application/octet-stream), nosniff, the sandboxing CSP, and
// Content-Disposition — attachment when attach is set or the type is not in inlineTypes, with the
// filename in RFC 6266 form (an ASCII fallback and filename* in UTF-8).
func setDocumentHeaders(h http.Header, contentType, filename string, attach bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || contentType == "" {
		mt, params = "application/octet-stream", nil
	}
	ct := mime.FormatMediaType(mt, params)
	if ct == "" {
		ct = mt
	}
	h.Set("Content-Type", ct)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", documentCSP)
	disp := "inline"
	if attach || !inlineTypes[mt] {
		disp = "attachment"
	}
	h.Set("Content-Disposition", contentDisposition(disp, filename))
}

// contentDisposition returns a Content-Disposition header value (RFC 6266) of disposition with
// the filename: control characters become "_", a name outside ASCII gets an ASCII fallback in
// filename and the exact name in filename* (RFC 8187).
func contentDisposition(disposition, filename string) string {
	clean := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '_'
		}
		return r
	}, filename)
	if clean == "" {
		clean = "download"
	}
	fallback := strings.Map(func(r rune) rune {
		if r > 0x7e || r == '%' {
			return '_'
		}
		return r
	}, clean)
	v := mime.FormatMediaType(disposition, map[string]string{"filename": fallback})
	if fallback != clean {
		// FormatMediaType writes a non-ASCII value as filename*=utf-8''…
		v += strings.TrimPrefix(mime.FormatMediaType(disposition, map[string]string{"filename": clean}), disposition)
	}
	return v
}

// outputJSON is one output of an item: a document or an error.
type outputJSON struct {
	ItemID int64           `json:"item_id"`
	Value  json.RawMessage `json:"value"`
}

// outputList is a page of GET /v1/jobs/{id}/documents or /errors.
type outputList struct {
	Outputs []outputJSON `json:"outputs"`
	// NextCursor is the cursor of the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

func (a *API) listOutputs(kind string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id")
		if err != nil {
			return err
		}
		c, limit, err := pageOf(r, 100)
		if err != nil {
			return err
		}
		after, err := cursor.ReadID(cursor.Outputs(id, kind), c)
		if err != nil {
			return badCursor(err)
		}
		outs, err := a.rec.OutputList(r.Context(), store.OutputListParams{JobID: id, Kind: kind, AfterItem: after, Limit: limit})
		if err != nil {
			return err
		}
		if len(outs) == 0 {
			if err := a.parentsExist(r.Context(), id, 0); err != nil {
				return err
			}
		}
		out := outputList{Outputs: []outputJSON{}}
		for _, o := range outs {
			out.Outputs = append(out.Outputs, outputJSON{ItemID: o.ItemID, Value: rawOr(o.Value)})
		}
		if len(outs) == limit && limit > 0 {
			out.NextCursor = cursor.MakeID(cursor.Outputs(id, kind), outs[len(outs)-1].ItemID)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// --- events

type eventRequest struct {
	Event  string `json:"event"`
	ItemID int64  `json:"item_id,omitempty"`
	// Key and Value correlate by metadata: every item of the job whose metadata[key] equals value.
	Key   string `json:"key,omitempty"`
	Value any    `json:"value,omitempty"`
	// Body is the event's payload: alone, it correlates through the workflow's correlate:
	// declarations; with item_id or key, it only carries the metadata they declare.
	Body json.RawMessage `json:"body,omitempty"`
}

// eventResult answers POST /v1/jobs/{id}/events.
type eventResult struct {
	Event string `json:"event"`
	// Items are the items the event was correlated to.
	Items []int64 `json:"items"`
	// Fired counts the items on which the event was new.
	Fired int `json:"fired"`
}

func (a *API) fireEvent(w http.ResponseWriter, r *http.Request) error {
	jobID, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var req eventRequest
	if err := decodeCapped(r.Body, 1<<20, "an event request", &req); err != nil {
		return err
	}
	hasBody := len(req.Body) > 0 && string(req.Body) != "null"
	if req.Event == "" || (req.ItemID != 0 && req.Key != "") || (req.ItemID == 0 && req.Key == "" && !hasBody) {
		return errf(CodeBadRequest, "send event and either item_id, key and value, or a body")
	}
	p := engine.FireParams{JobID: jobID, Event: req.Event, ItemID: req.ItemID, Key: req.Key}
	if hasBody {
		p.Body = req.Body
	}
	if req.Key != "" {
		if p.Value, err = json.Marshal(req.Value); err != nil {
			return errf(CodeBadRequest, "value: %v", err)
		}
	}
	detail := fmt.Sprintf("%s to item %d", req.Event, req.ItemID)
	if req.Key != "" {
		detail = fmt.Sprintf("%s to %s=%v", req.Event, req.Key, req.Value)
	} else if req.ItemID == 0 {
		detail = req.Event + " with a body"
	}
	f, err := a.b.Engine().Fire(a.audited(r, "event", jobID, detail), p)
	if nm, ok := errors.AsType[*engine.NoMatchError](err); ok {
		return errf(CodeNotFound, "%s", nm.Error())
	}
	switch {
	case errors.Is(err, engine.ErrUnknownEvent):
		return errf(CodeUnknownEvent, "%v", err)
	case errors.Is(err, engine.ErrNoCorrelation):
		return errf(CodeBadRequest, "%v", err)
	case errors.Is(err, store.ErrNotFound) && req.ItemID != 0:
		return errf(CodeNotFound, "item %d does not exist in job %d", req.ItemID, jobID)
	case errors.Is(err, store.ErrNotFound):
		return notFound(err, "job %d", jobID)
	case err != nil && req.Key != "" && strings.Contains(err.Error(), "metadata value"):
		return errf(CodeBadRequest, "value: a string, a number or a boolean")
	case err != nil:
		return err
	}
	out := eventResult{Event: req.Event, Items: f.Items, Fired: f.Fired}
	if out.Items == nil {
		out.Items = []int64{}
	}
	// Repeats are acknowledged harmlessly (DESIGN §3).
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// --- workflows

type workflowJSON struct {
	Name       string          `json:"name"`
	Version    int             `json:"version"`
	Digest     string          `json:"digest"`
	CreatedAt  time.Time       `json:"created_at"`
	Definition json.RawMessage `json:"definition,omitempty"`
	Source     string          `json:"source,omitempty"`
}

// workflowList answers GET /v1/workflows.
type workflowList struct {
	Workflows []workflowJSON `json:"workflows"`
}

func (a *API) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	wfs, err := a.rec.WorkflowList(r.Context())
	if err != nil {
		return err
	}
	out := workflowList{Workflows: []workflowJSON{}}
	for _, wf := range wfs {
		out.Workflows = append(out.Workflows, workflowJSON{Name: wf.Name, Version: wf.Version, Digest: wf.Digest, CreatedAt: wf.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	v, err := queryInt(r, "version", 0, 0)
	if err != nil {
		return err
	}
	wf, err := a.rec.WorkflowGet(r.Context(), r.PathValue("name"), int(v))
	if err != nil {
		return notFound(err, "workflow %q", r.PathValue("name"))
	}
	writeJSON(w, http.StatusOK, workflowJSON{Name: wf.Name, Version: wf.Version, Digest: wf.Digest, CreatedAt: wf.CreatedAt,
		Definition: rawOr(wf.Definition), Source: string(wf.Source)})
	return nil
}

type diagnosticsJSON struct {
	Valid    bool                  `json:"valid"`
	Errors   []workflow.Diagnostic `json:"errors"`
	Warnings []workflow.Diagnostic `json:"warnings"`
	Workflow *workflowJSON         `json:"workflow,omitempty"`
}

// diagnose turns a parse or validation error into diagnostics; other errors are returned.
func diagnose(warnings []workflow.Diagnostic, err error) (*diagnosticsJSON, error) {
	out := &diagnosticsJSON{Valid: err == nil, Errors: []workflow.Diagnostic{}, Warnings: warnings}
	if out.Warnings == nil {
		out.Warnings = []workflow.Diagnostic{}
	}
	var ve *workflow.ValidationError
	var pe *workflow.ParseError
	switch {
	case err == nil:
	case errors.As(err, &ve):
		out.Errors = ve.Diagnostics
	case errors.As(err, &pe):
		out.Errors = []workflow.Diagnostic{pe.Diagnostic()}
	default:
		return nil, err
	}
	return out, nil
}

func (a *API) validateWorkflow(w http.ResponseWriter, r *http.Request) error {
	src, err := readCapped(r.Body, workflow.MaxSourceBytes, "a workflow")
	if err != nil {
		return err
	}
	cat := a.b.Engine().Catalog()
	def, err := workflow.Parse(src, "request")
	var warnings []workflow.Diagnostic
	if err == nil {
		warnings, err = workflow.Validate(def, cat.Spec, cat.Names()...)
	}
	out, err := diagnose(warnings, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// invalidWorkflowJSON is the 422 answer of POST /v1/workflows: an error with the diagnostics.
type invalidWorkflowJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	*diagnosticsJSON
}

func (a *API) applyWorkflow(w http.ResponseWriter, r *http.Request) error {
	src, err := readCapped(r.Body, workflow.MaxSourceBytes, "a workflow")
	if err != nil {
		return err
	}
	wf, warnings, err := a.b.Engine().ApplyWorkflow(a.audited(r, "workflow", 0, "saved"), src, "request")
	out, derr := diagnose(warnings, err)
	if derr != nil {
		return derr
	}
	if !out.Valid {
		writeJSON(w, http.StatusUnprocessableEntity, invalidWorkflowJSON{CodeInvalid, err.Error(), out})
		return nil
	}
	out.Workflow = &workflowJSON{Name: wf.Name, Version: wf.Version, Digest: wf.Digest, CreatedAt: wf.CreatedAt}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (a *API) graph(w http.ResponseWriter, r *http.Request) error {
	v, err := queryInt(r, "version", 0, 0)
	if err != nil {
		return err
	}
	e := a.b.Engine()
	if _, err := a.rec.WorkflowGet(r.Context(), r.PathValue("name"), int(v)); err != nil {
		return notFound(err, "workflow %q", r.PathValue("name"))
	}
	def, _, err := e.Definition(r.Context(), r.PathValue("name"), int(v))
	if err != nil {
		return err
	}
	g := workflow.NewGraph(def, e.Catalog().Spec)
	switch f := r.URL.Query().Get("format"); f {
	case "", "svg":
		w.Header().Set("Content-Type", "image/svg+xml")
		// Step names come from whoever stored the workflow: render the SVG inert all the same.
		w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'")
		_, _ = w.Write(g.SVG())
	case "dot":
		w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
		_, _ = io.WriteString(w, g.DOT())
	default:
		return errf(CodeBadRequest, "format %q: want svg or dot", f)
	}
	return nil
}

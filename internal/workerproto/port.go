package workerproto

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// The server side of the task's read port and of the built-in actions' results (extensions:
// docs/worker-protocol-extensions.md). A remote worker running a built-in action reads what the
// action reads beyond its task — the core's records of the task's job, its domain's rows, the
// blob store — through these endpoints of its task URL, which serve [engine.Engine.TaskReads]
// scoped to the task's job: the task id (the credential of task URLs) reaches nothing of another
// job.

// ActionTask is the task as a built-in action gets it ([action.Task]), the answer of
// GET <task url>/task.
type ActionTask struct {
	TaskID  int64          `json:"task_id"`
	JobID   int64          `json:"job_id"`
	Step    string         `json:"step"`
	Action  string         `json:"action"`
	Attempt int            `json:"attempt"`
	With    map[string]any `json:"with"`
	Item    ActionItem     `json:"item"`
}

// ActionItem is the task's item as its action gets it ([action.Item]).
type ActionItem struct {
	ID           int64          `json:"id"`
	JobID        int64          `json:"job_id"`
	ParentID     int64          `json:"parent_id,omitempty"`
	RootID       int64          `json:"root_id"`
	Ordinal      int            `json:"ordinal"`
	Depth        int            `json:"depth"`
	Name         string         `json:"name"`
	ContentType  string         `json:"content_type,omitempty"`
	Size         int64          `json:"size"`
	SHA256       string         `json:"sha256,omitempty"`
	Metadata     map[string]any `json:"metadata"`
	Options      map[string]any `json:"options"`
	HasText      bool           `json:"has_text,omitempty"`
	HasThumbnail bool           `json:"has_thumbnail,omitempty"`
	Error        string         `json:"error,omitempty"`
	NChildren    int            `json:"n_children"`
}

func actionItemOf(it action.Item) ActionItem {
	return ActionItem{ID: it.ID, JobID: it.JobID, ParentID: it.ParentID, RootID: it.RootID, Ordinal: it.Ordinal, Depth: it.Depth,
		Name: it.Name, ContentType: it.ContentType, Size: it.Size, SHA256: it.BlobSHA256, Metadata: it.Metadata, Options: it.Options,
		HasText: it.HasText, HasThumbnail: it.HasThumbnail, Error: it.Error, NChildren: it.NChildren}
}

// item returns the item as an [action.Item].
func (it ActionItem) item() action.Item {
	return action.Item{ID: it.ID, JobID: it.JobID, ParentID: it.ParentID, RootID: it.RootID, Ordinal: it.Ordinal, Depth: it.Depth,
		Name: it.Name, ContentType: it.ContentType, Size: it.Size, BlobSHA256: it.SHA256, Metadata: orEmpty(it.Metadata),
		Options: orEmpty(it.Options), HasText: it.HasText, HasThumbnail: it.HasThumbnail, Error: it.Error, NChildren: it.NChildren}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Core read queries of POST <task url>/core/{query}.
const (
	coreItemSteps    = "item_steps"
	coreJobItems     = "job_items"
	coreStepChildren = "step_children"
	coreBlobSize     = "blob_size"
)

type (
	itemStepsArgs struct {
		ItemID int64 `json:"item_id"`
	}
	jobItemsArgs struct {
		After string `json:"after"`
		Limit int    `json:"limit"`
	}
	stepChildrenArgs struct {
		Parent int64  `json:"parent"`
		Step   string `json:"step"`
	}
	blobSizeArgs struct {
		SHA256 string `json:"sha256"`
	}
	blobPut struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
)

// maxJobItemsRead bounds one job_items read.
const maxJobItemsRead = 5000

// Error codes of the port's endpoints, besides task_gone (404: the task is canceled, finished or
// timed out).
const (
	codeNotFound = "not_found" // 404: the row or blob read does not exist
	codeBadRead  = "bad_read"  // 400: an unknown query, or arguments that do not decode
)

// portSession enters the session of a port request, answering the request itself when it cannot
// go on; leave it with ss.leave(false).
func (s *Server) portSession(w http.ResponseWriter, r *http.Request) *session {
	ss := s.session(r)
	if ss == nil {
		RefuseBody(w)
		notFound(w)
		return nil
	}
	if ok, _ := ss.enter(false); !ok {
		RefuseBody(w)
		notFound(w)
		return nil
	}
	if ss.isFinished() || ss.checkCanceled(r.Context(), false) {
		ss.leave(false)
		RefuseBody(w)
		notFound(w)
		return nil
	}
	return ss
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "could not encode the answer")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// readErr answers a read that failed.
func (s *Server) readErr(w http.ResponseWriter, ss *session, what string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, blob.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, what+": not found")
	case errors.Is(err, engine.ErrBadRead), errors.Is(err, blob.ErrInvalidKey):
		writeError(w, http.StatusBadRequest, codeBadRead, err.Error())
	default:
		s.log.Error("serve a remote read", "action", ss.name, "task_id", ss.task.ID, "read", what, "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "could not read "+what)
	}
}

// readArgs reads the arguments of a read, at most [engine.MaxReadArgs] bytes: a longer body is
// refused unread (400) and the connection closed, as a cut-off one is.
func readArgs(w http.ResponseWriter, r *http.Request) (json.RawMessage, bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, engine.MaxReadArgs+1))
	switch {
	case err != nil:
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusBadRequest, "truncated", "request body ended early")
		return nil, false
	case len(raw) > engine.MaxReadArgs:
		RefuseBody(w)
		writeError(w, http.StatusBadRequest, codeBadRead, fmt.Sprintf("the read's arguments are over %d bytes", engine.MaxReadArgs))
		return nil, false
	}
	return raw, true
}

// handleActionTask answers GET <task url>/task: the task as its action gets it.
func (s *Server) handleActionTask(w http.ResponseWriter, r *http.Request) {
	ss := s.portSession(w, r)
	if ss == nil {
		return
	}
	defer ss.leave(false)
	with := map[string]any{}
	_, st, err := s.stepOf(r.Context(), ss.task)
	if err != nil {
		s.readErr(w, ss, "the task's step", err)
		return
	}
	if st.With != nil {
		with = st.With
	}
	writeJSON(w, ActionTask{TaskID: ss.task.ID, JobID: ss.task.JobID, Step: ss.task.Step, Action: ss.task.Action, Attempt: ss.task.Attempt,
		With: with, Item: actionItemOf(engine.ActionItem(ss.item))})
}

// handleCoreRead answers POST <task url>/core/{query}: a read of the core's records of the
// task's job, or the size of a blob.
func (s *Server) handleCoreRead(w http.ResponseWriter, r *http.Request) {
	ss := s.portSession(w, r)
	if ss == nil {
		return
	}
	defer ss.leave(false)
	raw, ok := readArgs(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	reads := s.b.Engine().TaskReads(ss.task.JobID, s.b.Blobs())
	q := r.PathValue("query")
	decode := func(v any) bool {
		if err := json.Unmarshal(raw, v); err != nil {
			writeError(w, http.StatusBadRequest, codeBadRead, fmt.Sprintf("core read %s: arguments: %v", q, err))
			return false
		}
		return true
	}
	var answer any
	var err error
	switch q {
	case coreItemSteps:
		var a itemStepsArgs
		if !decode(&a) {
			return
		}
		answer, err = reads.ItemSteps(ctx, a.ItemID)
	case coreJobItems:
		var a jobItemsArgs
		if !decode(&a) {
			return
		}
		if a.Limit <= 0 || a.Limit > maxJobItemsRead {
			a.Limit = maxJobItemsRead
		}
		answer, err = reads.JobItems(ctx, a.After, a.Limit)
	case coreStepChildren:
		var a stepChildrenArgs
		if !decode(&a) {
			return
		}
		answer, err = reads.StepChildren(ctx, a.Parent, a.Step)
	case coreBlobSize:
		var a blobSizeArgs
		if !decode(&a) {
			return
		}
		var n int64
		n, err = reads.Blobs().Stat(ctx, a.SHA256)
		answer = blobPut{SHA256: a.SHA256, Size: n}
	default:
		writeError(w, http.StatusBadRequest, codeBadRead, fmt.Sprintf("no core read %q (item_steps, job_items, step_children, blob_size)", q))
		return
	}
	if err != nil {
		s.readErr(w, ss, q, err)
		return
	}
	writeJSON(w, answer)
}

// handleDomainRead answers POST <task url>/read/{domain}/{query}: a domain's read query for the
// task's job.
func (s *Server) handleDomainRead(w http.ResponseWriter, r *http.Request) {
	ss := s.portSession(w, r)
	if ss == nil {
		return
	}
	defer ss.leave(false)
	raw, ok := readArgs(w, r)
	if !ok {
		return
	}
	domain, q := r.PathValue("domain"), r.PathValue("query")
	b, err := s.b.Engine().QueryJSON(r.Context(), ss.task.JobID, domain, q, raw)
	if err != nil {
		s.readErr(w, ss, domain+"."+q, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// handleBlobPut answers POST <task url>/blobs: the body is stored in the blob store, and the
// answer is its SHA-256 and size, for the task's children, thumbnails and domain writes to name.
func (s *Server) handleBlobPut(w http.ResponseWriter, r *http.Request) {
	ss := s.portSession(w, r)
	if ss == nil {
		return
	}
	defer ss.leave(false)
	ctx, stop := ss.watchCancel(r.Context())
	defer stop()
	tr := &trackReader{r: r.Body}
	sha, n, err := s.b.Blobs().Put(ctx, tr)
	if err != nil {
		switch err := ss.bodyErr(ctx, tr, err); {
		case errors.Is(err, errTruncated):
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusBadRequest, "truncated", "request body ended early")
		case errors.Is(err, errCanceled):
			w.Header().Set("Connection", "close")
			notFound(w)
		default:
			s.log.Error("store a remote worker's blob", "action", ss.name, "task_id", ss.task.ID, "error", err)
			writeError(w, http.StatusInternalServerError, "internal", "could not store the blob")
		}
		return
	}
	writeJSON(w, blobPut{SHA256: sha, Size: n})
}

// stepOf returns the workflow name of the task's job and the task's step.
func (s *Server) stepOf(ctx context.Context, task *record.Task) (string, *workflow.Step, error) {
	job, err := s.jobFacts(ctx, task.JobID)
	if err != nil {
		return "", nil, err
	}
	def, _, err := s.b.Engine().Definition(ctx, job.workflow, job.version)
	if err != nil {
		return "", nil, err
	}
	st := def.Step(task.Step)
	if st == nil {
		return "", nil, fmt.Errorf("step %q not in workflow %q", task.Step, def.Name)
	}
	return job.workflow, st, nil
}

// keyed applies the claim and the limit of the task's step before the task is handed out
// ([engine.Engine.TakeKeys]), as an in-process worker does before it runs the action: a task
// parked on another's claim, done with a finished claim's result, or snoozed by its limit is
// settled here (done) and never handed out.
func (s *Server) keyed(ctx context.Context, task *record.Task, it *record.Item, owner string) (done bool, err error) {
	wf, step, err := s.stepOf(ctx, task)
	if err != nil || step.Claim == nil && step.Limit == nil {
		return false, err
	}
	ctx = context.WithoutCancel(ctx)
	res := &engine.Result{Task: task, Owner: owner, Started: s.b.Engine().Now()}
	done, err = s.b.Engine().TakeKeys(ctx, s.b.Do, wf, step, task, it, res)
	switch {
	case errors.Is(err, engine.ErrParked):
		return true, nil
	case !done && err == nil:
		return false, nil
	case !done && !action.IsPermanent(err):
		return false, err // the store failed: the task is released
	}
	res.Err = err
	return true, s.b.Do(ctx, func(t *engine.Tx) error { return t.Apply(res) })
}

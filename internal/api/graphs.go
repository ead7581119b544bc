package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/pathroot"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// graphRoutes are the dependency-graph requests (Cartographer's REST service; docs/graph.md).
func (a *API) graphRoutes() []route {
	return []route{
		{"POST", "/v1/graphs", RoleAdmin, "Start a dependency-graph traversal (roots, type, source, scope, max_depth, overrides, excludes, format); 201 with the job and links", a.createGraph, 201},
		{"GET", "/v1/graphs/{id}", RoleReader, "A graph request's result in its format (?format= node, path, dot, json); 204 with Traverse-State while it runs", a.getGraph, 200},
		{"GET", "/v1/graphs/{id}/result", RoleReader, "A graph request's result in its format (?format=), as GET /v1/graphs/{id}", a.getGraph, 200},
		{"GET", "/v1/graphs/{id}/status", RoleReader, "A graph request's progress: work items resolved, queued, avoided and failed, the depth reached, Traverse-State", a.getGraphStatus, 200},
		{"GET", "/v1/graphs/{id}/logs", RoleReader, "A graph request's log: each work item's route decisions with Cartographer's header names, in tree order, paged", a.getGraphLogs, 200},
		{"DELETE", "/v1/graphs/{id}", RoleAdmin, "Delete a graph request's workspace (canceling it if it runs); the shared graph stays", a.deleteGraph, 204},
	}
}

func (a *API) createGraph(w http.ResponseWriter, r *http.Request) error {
	var req graph.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return errf(CodeBadRequest, "graph request: %v", err)
	}
	// A local source (a directory or file:// URL) is read by the server: only under a path root.
	// The fetcher classifies the source with the same function, so what passes here as an
	// http(s):// URL is never read there as a path.
	if req.Source != "" {
		t, err := a.location("source", req.Source, pathroot.Local, pathroot.HTTP)
		if err != nil {
			return err
		}
		if t.Kind == pathroot.Local && !t.Info.IsDir() {
			return notKind("source", req.Source, t.Info.Mode(), "a directory")
		}
	}
	job, err := graph.Start(r.Context(), a.b.Engine(), req, false)
	var re *graph.RequestError
	if errors.As(err, &re) {
		return errf(CodeBadRequest, "%v", re)
	}
	if err != nil {
		return err
	}
	self := fmt.Sprintf("/v1/graphs/%d", job.ID)
	links := graphLinks{Self: self, Status: self + "/status", Result: self + "/result", Logs: self + "/logs",
		Job: fmt.Sprintf("/v1/jobs/%d", job.ID), Progress: fmt.Sprintf("/v1/jobs/%d/progress", job.ID), Items: fmt.Sprintf("/v1/jobs/%d/items", job.ID)}
	w.Header().Set("Location", self)
	w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="status", <%s>; rel="result", <%s>; rel="logs"`, links.Status, links.Result, links.Logs))
	writeJSON(w, http.StatusCreated, graphCreated{ID: job.ID, Job: toJob(job), Links: links})
	return nil
}

// graphState returns a graph request's Traverse-State.
func (a *API) graphState(r *http.Request, j *record.Job) (string, error) {
	if j.State == record.JobFailed || j.State == record.JobCanceled {
		return "ERROR", nil
	}
	return graph.TraverseState(r.Context(), a.rec, j.ID)
}

func (a *API) getGraphStatus(w http.ResponseWriter, r *http.Request) error {
	j, err := a.graphJob(r)
	if err != nil {
		return err
	}
	st, err := graph.RequestStatus(r.Context(), a.b.Engine(), j.ID)
	if err != nil {
		return err
	}
	if st.State, err = a.graphState(r, j); err != nil {
		return err
	}
	w.Header().Set("Traverse-State", st.State)
	writeJSON(w, http.StatusOK, st)
	return nil
}

// graphLog is a page of a graph request's log.
type graphLog struct {
	Items      []graph.LogEntry `json:"items"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

func (a *API) getGraphLogs(w http.ResponseWriter, r *http.Request) error {
	j, err := a.graphJob(r)
	if err != nil {
		return err
	}
	c, limit, err := pageOf(r, 1000)
	if err != nil {
		return err
	}
	list := cursor.List(fmt.Sprintf("graphs/%d/logs", j.ID))
	after, err := cursor.Read(list, c, 1)
	if err != nil {
		return badCursor(err)
	}
	from := ""
	if after != nil {
		from = after[0]
	}
	entries, next, err := graph.RequestLog(r.Context(), a.b.Engine(), j.ID, from, limit)
	if err != nil {
		return err
	}
	out := graphLog{Items: entries}
	if next != "" {
		out.NextCursor = cursor.Make(list, next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// graphCreated is the answer to POST /v1/graphs: the request's id (its job's), the job, and
// links to the result and to the job's progress and items.
type graphCreated struct {
	ID    int64      `json:"id"`
	Job   *jobJSON   `json:"job"`
	Links graphLinks `json:"links"`
}

// graphLinks are a graph request's URLs: Cartographer's rel links (status, result, logs) and the
// job's.
type graphLinks struct {
	Self     string `json:"self"`
	Status   string `json:"status"`
	Result   string `json:"result"`
	Logs     string `json:"logs"`
	Job      string `json:"job"`
	Progress string `json:"progress"`
	Items    string `json:"items"`
}

// graphJob returns the graph request's job, or not found when it is none (or deleted).
func (a *API) graphJob(r *http.Request) (*record.Job, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	j, err := a.rec.JobGet(r.Context(), id)
	if err != nil {
		return nil, notFound(err, "graph request %d", id)
	}
	ok, err := graph.Open(a.b.Engine()).HasWorkspace(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if j.WorkflowName != "graph" || !ok {
		return nil, errf(CodeNotFound, "graph request %d does not exist", id)
	}
	return j, nil
}

func (a *API) getGraph(w http.ResponseWriter, r *http.Request) error {
	j, err := a.graphJob(r)
	if err != nil {
		return err
	}
	if j.State == record.JobFailed || j.State == record.JobCanceled {
		w.Header().Set("Traverse-State", "ERROR")
		why, err := graph.StopReason(r.Context(), a.b.Engine(), j.ID)
		if err != nil {
			return err
		}
		if why != "" {
			why = ": " + why
		}
		return errf(CodeConflict, "graph request %d %s: %s%s", j.ID, j.State, j.Error, why)
	}
	res, err := graph.LoadResult(r.Context(), a.rec, j.ID)
	if errors.Is(err, store.ErrNotFound) {
		state, err := graph.TraverseState(r.Context(), a.rec, j.ID)
		if err != nil {
			return err
		}
		w.Header().Set("Traverse-State", state)
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	format, tmpl := r.URL.Query().Get("format"), r.URL.Query().Get("template")
	if format == "" || format == "template" && tmpl == "" {
		req, err := graph.Open(a.b.Engine()).Workspace(r.Context(), j.ID)
		if err != nil {
			return err
		}
		if format == "" {
			format = req.Format
		}
		tmpl = req.Template
	}
	var out string
	if format == "template" {
		out, err = graph.RenderTemplate(res, tmpl)
	} else {
		out, err = graph.Render(res, format)
	}
	if err != nil {
		return errf(CodeBadRequest, "%v", err)
	}
	ct := map[string]string{"json": "application/json", "dot": "text/vnd.graphviz; charset=utf-8"}[format]
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Traverse-State", "SUCCESS")
	_, err = w.Write([]byte(out))
	return err
}

func (a *API) deleteGraph(w http.ResponseWriter, r *http.Request) error {
	j, err := a.graphJob(r)
	if err != nil {
		return err
	}
	if j.State == record.JobRunning {
		if err := a.b.Engine().Cancel(r.Context(), j.ID); err != nil {
			return err
		}
	}
	if _, err := graph.Open(a.b.Engine()).DeleteWorkspace(r.Context(), j.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

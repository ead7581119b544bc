package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

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
	w.Header().Set("Location", self)
	writeJSON(w, http.StatusCreated, graphCreated{ID: job.ID, Job: toJob(job), Links: graphLinks{
		Self: self, Job: fmt.Sprintf("/v1/jobs/%d", job.ID), Progress: fmt.Sprintf("/v1/jobs/%d/progress", job.ID),
		Items: fmt.Sprintf("/v1/jobs/%d/items", job.ID)}})
	return nil
}

// graphCreated is the answer to POST /v1/graphs: the request's id (its job's), the job, and
// links to the result and to the job's progress and items.
type graphCreated struct {
	ID    int64      `json:"id"`
	Job   *jobJSON   `json:"job"`
	Links graphLinks `json:"links"`
}

// graphLinks are a graph request's URLs.
type graphLinks struct {
	Self     string `json:"self"`
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
		return errf(CodeConflict, "graph request %d %s: %s", j.ID, j.State, j.Error)
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
	format := r.URL.Query().Get("format")
	if format == "" {
		req, err := graph.Open(a.b.Engine()).Workspace(r.Context(), j.ID)
		if err != nil {
			return err
		}
		format = req.Format
	}
	out, err := graph.Render(res, format)
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

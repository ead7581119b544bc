package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/fileset"
	"github.com/sluice-project/sluice/internal/jsonsize"
	"github.com/sluice-project/sluice/internal/store"
)

// createFilesetsRequest is the body of POST /v1/filesets: dataset requests (Sandcrawler's
// shape), and a key that makes a retried POST find its job.
type createFilesetsRequest struct {
	Key      string            `json:"key,omitempty"`
	Requests []json.RawMessage `json:"requests"`
}

// createFilesets is POST /v1/filesets: a job of the fileset workflow with a root per request.
func (a *API) createFilesets(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	// The body is counted before it is decoded: a 64 MiB list of 0s held 3.1 GB as
	// []json.RawMessage. A dataset request is about 20 values (Sandcrawler's: its URL, link
	// source, ext_ids, edit_extra); MaxRoots of them fit five times over.
	body, err := readCapped(r.Body, 64<<20, "the requests JSON")
	if err != nil {
		return err
	}
	if maxValues := 100 * a.cfg.Limits.MaxRoots; jsonsize.Check(body, maxValues, maxValues) != nil {
		return tooLarge("max-roots", "the requests JSON holds over %d values, more than %d requests (a job's most roots) could need", maxValues, a.cfg.Limits.MaxRoots)
	}
	var req createFilesetsRequest
	if err := decodeCapped(bytes.NewReader(body), 64<<20, "the requests JSON", &req); err != nil {
		return err
	}
	if len(req.Requests) == 0 {
		return errf(CodeBadRequest, "requests: give at least one dataset request")
	}
	if len(req.Requests) > a.cfg.Limits.MaxRoots {
		return tooLarge("max-roots", "a job may be created with at most %d roots, not %d requests", a.cfg.Limits.MaxRoots, len(req.Requests))
	}
	roots := make([]engine.Root, len(req.Requests))
	for i, raw := range req.Requests {
		root, err := fileset.ParseRequest(raw)
		if err != nil {
			return errf(CodeBadRequest, "requests[%d]: %v", i, err)
		}
		root.Ordinal = i
		roots[i] = root
	}
	fs := a.cfg.Fileset
	if fs == nil {
		fs = fileset.New(fileset.Config{})
	}
	version, err := fs.ApplyWorkflow(ctx, a.b.Engine())
	if err != nil {
		return err
	}
	sub, err := a.b.Engine().Submit(ctx, engine.SubmitParams{Workflow: fileset.WorkflowName, Version: version, Key: req.Key})
	if err != nil {
		return err
	}
	return a.submit(w, r, sub, roots)
}

// listFilesets is GET /v1/filesets?status=&cursor=&limit=: the stored results of the requests
// whose platform was identified, by (ingest_type, base_url).
func (a *API) listFilesets(w http.ResponseWriter, r *http.Request) error {
	c, limit, err := pageOf(r, 100)
	if err != nil {
		return err
	}
	p := fileset.ListParams{Status: r.URL.Query().Get("status"), Limit: limit}
	after, err := cursor.Read(cursor.Filesets, c, 2)
	if err != nil {
		return badCursor(err)
	}
	if after != nil {
		p.AfterIngestType, p.AfterBaseURL = after[0], after[1]
	}
	rows, err := fileset.Open(a.b.Engine()).List(r.Context(), p)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errf(CodeNotFound, "no fileset results")
		}
		return err
	}
	out := filesetList{Results: rows}
	if rows == nil {
		out.Results = []fileset.Row{}
	}
	if len(rows) == p.Limit {
		last := rows[len(rows)-1]
		out.NextCursor = cursor.Make(cursor.Filesets, last.IngestType, last.BaseURL)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// filesetList is a page of GET /v1/filesets: the results, and the cursor of the next page
// while there may be one.
type filesetList struct {
	Results    []fileset.Row `json:"results"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

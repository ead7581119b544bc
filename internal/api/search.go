package api

import (
	"net/http"

	"github.com/sluice-project/sluice/internal/docsearch"
)

// searchDocuments is GET /v1/documents/search?q=…: a page of docsearch.Result.
func (a *API) searchDocuments(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	job, err := queryInt(r, "job_id", 0, 0)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 20, 1000)
	if err != nil {
		return err
	}
	res, err := docsearch.Search(r.Context(), a.b.Engine().Store(), docsearch.Request{Query: q.Get("q"), JobID: job,
		ContentType: q.Get("type"), Metadata: q["meta"], Limit: int(limit), Cursor: q.Get("cursor")})
	if docsearch.IsBadRequest(err) {
		// The message is about the request's own query, filters or cursor.
		return errf(CodeBadRequest, "%v", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

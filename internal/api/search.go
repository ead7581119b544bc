package api

import (
	"net/http"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/docsearch"
)

// searchResult is a page of GET /v1/documents/search.
type searchResult struct {
	Hits []docsearch.Hit `json:"hits"`
	// NextCursor is the cursor of the next page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// searchDocuments is GET /v1/documents/search?q=…: a page of hits, best first. Its cursor
// holds the search's own (docsearch's rank and id) as the key.
func (a *API) searchDocuments(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	job, err := queryInt(r, "job_id", 0, 0)
	if err != nil {
		return err
	}
	c, limit, err := pageOf(r, 20)
	if err != nil {
		return err
	}
	after, err := cursor.Read(cursor.Search, c, 1)
	if err != nil {
		return badCursor(err)
	}
	req := docsearch.Request{Query: q.Get("q"), JobID: job, ContentType: q.Get("type"), Metadata: q["meta"], Limit: limit}
	if after != nil {
		req.Cursor = after[0]
	}
	res, err := docsearch.Search(r.Context(), a.rec, req)
	if docsearch.IsBadRequest(err) {
		// The message is about the request's own query, filters or cursor.
		return errf(CodeBadRequest, "%v", err)
	}
	if err != nil {
		return err
	}
	out := searchResult{Hits: res.Hits}
	if out.Hits == nil {
		out.Hits = []docsearch.Hit{}
	}
	if res.Next != "" {
		out.NextCursor = cursor.Make(cursor.Search, res.Next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

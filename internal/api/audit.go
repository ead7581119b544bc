package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// audited returns the request's context carrying its audit entry: the engine writes the entry
// in the transaction of the change ([engine.WithChangeNote]), so a change is never made without
// its entry (nor an entry written for a change that rolled back). The entry names the request's
// token ([Token.Who]).
func (a *API) audited(r *http.Request, action string, jobID int64, detail string) context.Context {
	who := "anonymous" // NoAuth: tests of handlers only
	if a.cfg.Tokens != nil {
		if t, ok := a.cfg.Tokens.Lookup(workerproto.TokenFromRequest(r)); ok {
			who = t.Who()
		}
	}
	return audit.Note(r.Context(), audit.Entry{Who: who, Action: action, JobID: jobID, Detail: detail})
}

// auditList is a page of GET /v1/audit.
type auditList struct {
	Entries []audit.Entry `json:"entries"`
	// NextCursor is the cursor of the next (older) page; absent on the last one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// listAudit answers the audit log, newest first, of one job with job_id.
func (a *API) listAudit(w http.ResponseWriter, r *http.Request) error {
	c, limit, err := pageOf(r, 100)
	if err != nil {
		return err
	}
	before, err := cursor.ReadID(cursor.Audit, c)
	if err != nil {
		return badCursor(err)
	}
	var job int64
	if s := r.URL.Query().Get("job_id"); s != "" {
		if job, err = strconv.ParseInt(s, 10, 64); err != nil || job <= 0 {
			return errf(CodeBadRequest, "job_id must be a positive integer, not %q", s)
		}
	}
	es, err := audit.List(r.Context(), a.rec, audit.ListParams{JobID: job, Before: before, Limit: limit})
	if err != nil {
		return err
	}
	out := auditList{Entries: es}
	if out.Entries == nil {
		out.Entries = []audit.Entry{}
	}
	if len(es) == limit {
		out.NextCursor = cursor.MakeID(cursor.Audit, es[len(es)-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

package web

import (
	"net/http"
	"strconv"

	"github.com/sluice-project/sluice/internal/audit"
	"github.com/sluice-project/sluice/internal/cursor"
)

// auditPerPage is how many entries a page of the audit log shows.
const auditPerPage = 50

// auditPage shows the audit log, newest first, of every job or one (?job=).
func (w *Web) auditPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	before, err := cursor.ReadID(cursor.Audit, r.URL.Query().Get("cursor"))
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	var job int64
	if v := r.URL.Query().Get("job"); v != "" {
		if job, err = strconv.ParseInt(v, 10, 64); err != nil || job <= 0 {
			return errorf(http.StatusBadRequest, "job %q is not a job number", v)
		}
	}
	es, err := audit.List(r.Context(), w.rec, audit.ListParams{JobID: job, Before: before, Limit: auditPerPage})
	if err != nil {
		return err
	}
	data := struct {
		Entries []audit.Entry
		JobID   int64
		Next    string
	}{Entries: es, JobID: job}
	if len(es) == auditPerPage {
		data.Next = cursor.MakeID(cursor.Audit, es[len(es)-1].ID)
	}
	w.render(rw, r, http.StatusOK, "audit", s, pageData{Title: "Audit log", Nav: "audit", Data: data})
	return nil
}

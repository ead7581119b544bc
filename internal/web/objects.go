package web

import (
	"fmt"
	"net/http"

	"github.com/sluice-project/sluice/internal/objects"
)

// outcomeClass is the state class an action's outcome is shown with.
func outcomeClass(outcome string) string {
	switch outcome {
	case objects.OutcomeOK, objects.OutcomeNA:
		return "complete"
	case objects.OutcomeError:
		return "failed"
	case objects.OutcomeStarted:
		return "running"
	}
	return "waiting"
}

// sheetPage shows an ingest sheet (a job of the objects workflow): its status and checks, the
// file's errors, every failed row's errors as Meadow numbers and words them, its progress and
// its works.
func (w *Web) sheetPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	j, err := w.pathJob(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	db := objects.Open(w.b.Engine())
	sh, err := db.GetSheet(ctx, j.ID)
	if err != nil {
		return err
	}
	p, err := db.SheetProgress(ctx, j.ID)
	if err != nil {
		return err
	}
	failed, err := db.ListRows(ctx, j.ID, true)
	if err != nil {
		return err
	}
	works, err := db.ListWorks(ctx, j.ID)
	if err != nil {
		return err
	}
	data := struct {
		Sheet    *objects.Sheet
		Progress *objects.Progress
		Failed   []objects.Row
		Works    []*objects.Work
	}{sh, p, failed, works}
	w.render(rw, r, http.StatusOK, "sheet", s, pageData{Title: fmt.Sprintf("Ingest sheet %d", j.ID), Nav: "jobs", Data: data})
	return nil
}

// objectPage shows a work (its file sets) or a file set: each file set's action states and the
// timeline of its action history.
func (w *Web) objectPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	ctx, id := r.Context(), r.PathValue("id")
	db := objects.Open(w.b.Engine())
	wk, f, err := db.GetObject(ctx, id)
	if err != nil {
		return err
	}
	h, err := db.GetHistory(ctx, id)
	if err != nil {
		return err
	}
	type shown struct {
		*objects.FileSet
		History []objects.HistoryEntry
	}
	var sets []*objects.FileSet
	var title string
	if wk != nil {
		sets, title = wk.FileSets, "Work "+wk.Accession
	} else {
		sets, title = []*objects.FileSet{f}, "File set "+f.Accession
	}
	var list []shown
	for i, fs := range sets {
		sh := shown{FileSet: fs}
		if i < len(h.FileSets) && h.FileSets[i].ID == fs.ID {
			sh.History = h.FileSets[i].History
		}
		list = append(list, sh)
	}
	data := struct {
		Work     *objects.Work
		FileSets []shown
		Title    string
	}{wk, list, title}
	w.render(rw, r, http.StatusOK, "object", s, pageData{Title: title, Nav: "jobs", Data: data})
	return nil
}

package web

import (
	"encoding/json"

	"fmt"
	"net/http"
	"time"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

const documentsPerPage = 60

func (w *Web) documentsPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	j, err := w.pathJob(r)
	if err != nil {
		return err
	}
	ctx, id := r.Context(), j.ID
	list := cursor.Outputs(id, store.OutputDocument)
	after, err := cursor.ReadID(list, r.URL.Query().Get("cursor"))
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	docs, next, err := w.outputs(ctx, id, store.OutputDocument, after, documentsPerPage)
	if err != nil {
		return err
	}
	var errs []outputValue
	if after == 0 {
		if errs, _, err = w.outputs(ctx, id, "error", 0, 500); err != nil {
			return err
		}
	}
	data := struct {
		Job       jobRow
		Documents []outputValue
		Errors    []outputValue
		Next      string
	}{Job: w.jobRow(ctx, j), Documents: docs, Errors: errs}
	if next != 0 {
		data.Next = cursor.MakeID(list, next)
	}
	w.render(rw, r, http.StatusOK, "documents", s, pageData{Title: fmt.Sprintf("Documents of job %d", id), Nav: "jobs", Data: data})
	return nil
}

// maxShownText bounds the text shown beside the PDF; the whole text is a download away.
const maxShownText = 512 << 10

func (w *Web) itemPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	ctx := r.Context()
	it, err := w.rec.ItemGet(ctx, id)
	if err != nil {
		return store.NotFound(err, "item", id)
	}
	text, cut := it.Text, false
	if len(text) > maxShownText {
		text, cut = text[:maxShownText], true
	}
	tasks, err := w.rec.TaskListByItem(ctx, id)
	if err != nil {
		return err
	}
	// The PDF shown beside the text: the item's own, or the PDF a converter made of it (a child).
	// A failed item shows its reason instead: its original is what could not be read, and a
	// browser would only say it failed to load.
	pdfID := int64(0)
	switch {
	case it.Error != "":
	case isPDF(it):
		pdfID = it.ID
	case it.NChildren > 0:
		parent := it.ID
		kids, err := w.rec.ItemList(ctx, store.ItemListParams{JobID: it.JobID, ParentID: &parent, Limit: 5})
		if err != nil {
			return err
		}
		for _, k := range kids {
			if isPDF(k) {
				pdfID = k.ID
				break
			}
		}
	}
	// What happened, retries included: every attempt, and the outputs later results replaced.
	attempts, err := w.b.Engine().ItemHistory(ctx, id)
	if err != nil {
		return err
	}
	superseded, err := w.rec.OutputHistoryList(ctx, id)
	if err != nil {
		return err
	}
	var replaced []supersededError
	for _, o := range superseded {
		if o.Kind != store.OutputError {
			continue
		}
		var v store.ErrorValue
		_ = json.Unmarshal(o.Value, &v)
		replaced = append(replaced, supersededError{Message: v.Message, At: o.SupersededAt})
	}
	data := struct {
		Item     *record.Item
		PDFID    int64
		Text     string
		Cut      bool
		Tasks    []*record.Task
		Attempts []engine.Attempt
		Replaced []supersededError
	}{it, pdfID, text, cut, tasks, attempts, replaced}
	w.render(rw, r, http.StatusOK, "item", s, pageData{Title: it.Name, Nav: "jobs", Data: data})
	return nil
}

// supersededError is an error of the item that a later result replaced.
type supersededError struct {
	Message string
	At      time.Time
}

func isPDF(it *record.Item) bool { return it.ContentType == "application/pdf" && it.BlobSHA256 != "" }

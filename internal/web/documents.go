package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/search"
	"github.com/sluice-project/sluice/internal/store"
)

// documentsPerPage is how many documents a page lists (a variable for the tests).
var documentsPerPage = 60

// docSort is an order the documents pages offer.
type docSort struct {
	Order store.DocumentOrder
	Label string
}

// docSorts are the documents' orders; the tree order only within a job.
var docSorts = []docSort{
	{store.DocumentsInTree, "Order given"},
	{store.DocumentsNewest, "Newest"},
	{store.DocumentsByTitle, "Title"},
	{store.DocumentsBySize, "Largest"},
}

// typeCount is a content type's count as the documents pages link it.
type typeCount struct {
	store.TypeCount
	Href    string
	Current bool
}

// documentsPage lists the documents of every job (GET /documents) or one
// (GET /jobs/{id}/documents, with its errors), filtered by job, content type and metadata
// key=value, counted per content type, sorted and paged with the one cursor convention.
func (w *Web) documentsPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	var job *record.Job
	if r.PathValue("id") != "" {
		j, err := w.pathJob(r)
		if err != nil {
			return err
		}
		job = j
	}
	ctx, q := r.Context(), r.URL.Query()
	p := store.DocumentListParams{ContentType: strings.TrimSpace(q.Get("type")), Limit: documentsPerPage}
	meta := strings.TrimSpace(q.Get("meta"))
	if meta != "" {
		k, v, ok := strings.Cut(meta, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return errorf(http.StatusBadRequest, "metadata %q: want key=value", meta)
		}
		p.Meta = []store.KeyValue{{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)}}
	}
	base, path := url.Values{}, "/documents"
	switch {
	case job != nil:
		p.JobID, path = job.ID, fmt.Sprintf("/jobs/%d/documents", job.ID)
	case q.Get("job") != "":
		id, err := strconv.ParseInt(q.Get("job"), 10, 64)
		if err != nil || id < 1 {
			return errorf(http.StatusBadRequest, "job %q: want a job's number", q.Get("job"))
		}
		p.JobID = id
		base.Set("job", q.Get("job"))
	}
	p.Order = store.DocumentsNewest
	if p.JobID != 0 {
		p.Order = store.DocumentsInTree
	}
	if v := q.Get("sort"); v != "" {
		i := slices.IndexFunc(docSorts, func(d docSort) bool { return string(d.Order) == v })
		if i < 0 || (docSorts[i].Order == store.DocumentsInTree && p.JobID == 0) {
			return errorf(http.StatusBadRequest, "sort %q: want newest, title or size (or tree, within a job)", v)
		}
		p.Order = docSorts[i].Order
		base.Set("sort", v)
	}
	list := cursor.Documents(p.JobID, string(p.Order))
	key, err := cursor.Read(list, q.Get("cursor"), 2)
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	if key != nil {
		if p.AfterItem, err = strconv.ParseInt(key[1], 10, 64); err != nil || p.AfterItem < 1 {
			return errorf(http.StatusBadRequest, "%v", cursor.ErrForeign)
		}
		p.AfterKey = key[0]
		if p.Order == store.DocumentsBySize {
			if p.AfterSize, err = strconv.ParseInt(key[0], 10, 64); err != nil {
				return errorf(http.StatusBadRequest, "%v", cursor.ErrForeign)
			}
		}
	}
	found, err := w.rec.DocumentList(ctx, p)
	if err != nil {
		return err
	}
	// The counts per type keep the other filters, so that each type can be chosen from them.
	all := p
	all.ContentType = ""
	counts, err := w.rec.DocumentCounts(ctx, all)
	if err != nil {
		return err
	}
	data := struct {
		Job              *jobRow
		Path             string
		Type, Meta       string
		JobFilter        int64
		Sort             store.DocumentOrder
		Sorts            []docSort
		Documents        []outputValue
		Errors           []outputValue
		Total, AllTotal  int64
		Types            []typeCount
		Filtered, Paging bool
		Next             string
	}{Path: path, Type: p.ContentType, Meta: meta, Sort: p.Order, Filtered: p.ContentType != "" || meta != "" || base.Get("job") != "", Paging: key != nil}
	if job == nil {
		data.JobFilter = p.JobID
	}
	for _, d := range docSorts {
		if d.Order != store.DocumentsInTree || p.JobID != 0 {
			data.Sorts = append(data.Sorts, d)
		}
	}
	for _, c := range counts {
		data.AllTotal += c.N
		if p.ContentType == "" || c.ContentType == p.ContentType {
			data.Total += c.N
		}
		link := filterValues(base, meta)
		link.Set("type", c.ContentType)
		data.Types = append(data.Types, typeCount{TypeCount: c, Href: path + "?" + link.Encode(), Current: c.ContentType == p.ContentType})
	}
	for _, d := range found {
		data.Documents = append(data.Documents, outputOf(d.Item.ID, d.Value, d.Item))
	}
	if len(found) == p.Limit {
		last := found[len(found)-1].Item
		k := ""
		switch p.Order {
		case store.DocumentsInTree:
			k = last.SortKey
		case store.DocumentsByTitle:
			k = last.Name
		case store.DocumentsBySize:
			k = strconv.FormatInt(last.Size, 10)
		}
		next := filterValues(base, meta)
		if p.ContentType != "" {
			next.Set("type", p.ContentType)
		}
		next.Set("cursor", cursor.Make(list, k, strconv.FormatInt(last.ID, 10)))
		data.Next = path + "?" + next.Encode()
	}
	title := "Documents"
	if job != nil {
		jr := w.jobRow(ctx, job)
		data.Job = &jr
		title = fmt.Sprintf("Documents of job %d", job.ID)
		if key == nil && !data.Filtered {
			if data.Errors, _, err = w.outputs(ctx, job.ID, store.OutputError, 0, 500); err != nil {
				return err
			}
		}
	}
	nav := "documents"
	if job != nil {
		nav = "jobs"
	}
	w.render(rw, r, http.StatusOK, "documents", s, pageData{Title: title, Nav: nav, Data: data})
	return nil
}

// filterValues is base with the metadata filter, if any.
func filterValues(base url.Values, meta string) url.Values {
	out := url.Values{}
	for k, v := range base {
		out[k] = v
	}
	if meta != "" {
		out.Set("meta", meta)
	}
	return out
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
	// Reached from a search (?q=), the text marks the words it matched.
	marked, err := markedText(text, r.URL.Query().Get("q"))
	if err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	// Every step of the workflow with its state on the item, those that have not run included.
	steps, err := w.b.Engine().StepStatesOf(ctx, it.JobID, []*record.Item{it})
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
		Text     []snippetPart
		Marks    int
		Cut      bool
		Steps    []engine.StepState
		Attempts []engine.Attempt
		Replaced []supersededError
	}{it, pdfID, marked, 0, cut, steps[it.ID], attempts, replaced}
	for _, p := range marked {
		if p.Mark {
			data.Marks++
		}
	}
	w.render(rw, r, http.StatusOK, "item", s, pageData{Title: it.Name, Nav: "jobs", Data: data})
	return nil
}

// maxMarks bounds the matches marked in an item's text.
const maxMarks = 1000

// markedText is text in runs, those that match the query q marked (at most [maxMarks] of
// them); without a query, one run. A query that does not parse is an error.
func markedText(text, q string) ([]snippetPart, error) {
	if strings.TrimSpace(q) == "" {
		return []snippetPart{{Text: text}}, nil
	}
	query, err := search.Parse(q)
	if err != nil {
		return nil, fmt.Errorf("q: %w", err)
	}
	var parts []snippetPart
	at := 0
	for _, m := range search.Matches(text, query, maxMarks) {
		if m.Start > at {
			parts = append(parts, snippetPart{Text: text[at:m.Start]})
		}
		parts = append(parts, snippetPart{Text: text[m.Start:m.End], Mark: true})
		at = m.End
	}
	if at < len(text) {
		parts = append(parts, snippetPart{Text: text[at:]})
	}
	return parts, nil
}

// supersededError is an error of the item that a later result replaced.
type supersededError struct {
	Message string
	At      time.Time
}

func isPDF(it *record.Item) bool { return it.ContentType == "application/pdf" && it.BlobSHA256 != "" }

package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
)

// timelineRow is an attempt as the timeline draws it: its wait and its run as bars on the
// job's time axis, in thousandths of the axis (the SVG's viewBox is 1000 wide).
type timelineRow struct {
	engine.Attempt
	Item string // the item's name
	// WaitX, WaitW place the wait of a first attempt (queued to started); WaitW is 0 for a
	// later attempt, whose task was queued before its first.
	WaitX, WaitW int
	RunX, RunW   int
	// Waited and Ran are the wait and the run; Ran is 0 while the attempt runs.
	Waited, Ran time.Duration
}

// timeline is a page of a job's attempts on the job's time axis, from its creation to its end
// (or now, while it runs).
type timeline struct {
	JobID      int64
	Start, End time.Time
	Rows       []timelineRow
	// Next is the cursor of the next page; empty on the last one.
	Next string
}

// timeline returns the page of job j's history after the cursor c (empty: the first), of at
// most limit tasks.
func (w *Web) timeline(ctx context.Context, j *record.Job, c string, limit int) (*timeline, error) {
	after, err := cursor.ReadID(cursor.History(j.ID), c)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	atts, last, err := w.b.Engine().JobHistory(ctx, j.ID, after, limit)
	if err != nil {
		return nil, err
	}
	now := w.b.Engine().Now()
	tl := &timeline{JobID: j.ID, Start: j.CreatedAt, End: j.FinishedAt}
	if tl.End.IsZero() {
		tl.End = now
	}
	ids := make([]int64, 0, len(atts))
	for _, a := range atts {
		ids = append(ids, a.ItemID)
		// Clocks of remote workers may run a little ahead: the axis holds every bar.
		if end := a.FinishedAt; end.After(tl.End) {
			tl.End = end
		}
		if !a.QueuedAt.IsZero() && a.QueuedAt.Before(tl.Start) {
			tl.Start = a.QueuedAt
		}
	}
	names := map[int64]string{}
	if len(ids) > 0 {
		items, err := w.rec.ItemGetMany(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			names[it.ID] = it.Name
		}
	}
	span := tl.End.Sub(tl.Start)
	at := func(t time.Time) int {
		if span <= 0 {
			return 0
		}
		return int(1000 * t.Sub(tl.Start) / span)
	}
	for _, a := range atts {
		r := timelineRow{Attempt: a, Item: names[a.ItemID]}
		end := a.FinishedAt
		if end.IsZero() {
			end = now
		} else {
			r.Ran = a.FinishedAt.Sub(a.StartedAt)
		}
		if a.Attempt == 1 && !a.QueuedAt.IsZero() && a.StartedAt.After(a.QueuedAt) {
			r.Waited = a.StartedAt.Sub(a.QueuedAt)
			r.WaitX, r.WaitW = at(a.QueuedAt), at(a.StartedAt)-at(a.QueuedAt)
		}
		// A bar is at least 2 of 1000 wide, so that a run of a millisecond is seen.
		r.RunX, r.RunW = at(a.StartedAt), max(at(end)-at(a.StartedAt), 2)
		tl.Rows = append(tl.Rows, r)
	}
	if last != 0 {
		tl.Next = cursor.MakeID(cursor.History(j.ID), last)
	}
	return tl, nil
}

// tasksPerTimeline is how many tasks a page of the timeline shows, and timelinePreview how many
// the job page shows of it.
const (
	tasksPerTimeline = 100
	timelinePreview  = 20
)

func (w *Web) historyPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	j, err := w.pathJob(r)
	if err != nil {
		return err
	}
	tl, err := w.timeline(r.Context(), j, r.URL.Query().Get("cursor"), tasksPerTimeline)
	if err != nil {
		return err
	}
	w.render(rw, r, http.StatusOK, "history", s, pageData{Title: fmt.Sprintf("Timeline of job %d", j.ID), Nav: "jobs",
		Data: struct {
			Job      *record.Job
			Timeline *timeline
			Full     bool
		}{j, tl, true}})
	return nil
}

package web

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-project/sluice/internal/api"
	"github.com/sluice-project/sluice/internal/cursor"
	"github.com/sluice-project/sluice/internal/store"
)

// jobsPerPage is how many jobs a page of the jobs list shows.
const jobsPerPage = 50

// maxSortedJobs bounds the jobs a sort other than newest-first orders: the newest this many
// that match the filters. The page says so when more match.
const maxSortedJobs = 1000

// jobSort is a column the jobs list sorts by. Started (newest first) is the store's own order
// and pages through any number of jobs; the others order the newest [maxSortedJobs] matches.
type jobSort struct {
	Name, Label string
	// Desc is the order a first click asks for: the most, the latest or the longest first.
	Desc bool
	// progress says the key needs each job's progress (items and failed tasks).
	progress bool
	key      func(r jobRow, now time.Time) int64
}

var jobSorts = []jobSort{
	{Name: "started", Label: "Started", Desc: true, key: func(r jobRow, _ time.Time) int64 { return r.ID }},
	{Name: "finished", Label: "Finished", Desc: true, key: func(r jobRow, _ time.Time) int64 {
		if r.FinishedAt.IsZero() {
			return 0 // running: after every finished job, latest first
		}
		return r.FinishedAt.UnixMicro()
	}},
	{Name: "duration", Label: "Duration", Desc: true, key: func(r jobRow, now time.Time) int64 { return int64(r.duration(now)) }},
	{Name: "items", Label: "Items", Desc: true, progress: true, key: func(r jobRow, _ time.Time) int64 { return int64(r.Items) }},
	{Name: "errors", Label: "Errors", Desc: true, progress: true, key: func(r jobRow, _ time.Time) int64 { return int64(r.Failed) }},
}

// jobsQuery is what the jobs list was asked for: the filters, the sort and the page.
type jobsQuery struct {
	Values url.Values // the filters as given, for the form and the links
	Params store.JobListParams
	Sort   jobSort
	Asc    bool
	Cursor string
}

func readJobsQuery(q url.Values) (jobsQuery, error) {
	p, err := api.JobFilter(q)
	if err != nil {
		return jobsQuery{}, errorf(http.StatusBadRequest, "%v", err)
	}
	out := jobsQuery{Values: url.Values{}, Params: p, Sort: jobSorts[0], Cursor: q.Get("cursor")}
	for _, k := range []string{"q", "state", "workflow", "created_from", "created_until"} {
		if v := q.Get(k); v != "" {
			out.Values.Set(k, v)
		}
	}
	for _, m := range q["meta"] {
		if m != "" {
			out.Values.Add("meta", m)
		}
	}
	if s := q.Get("sort"); s != "" {
		i := slices.IndexFunc(jobSorts, func(js jobSort) bool { return js.Name == s })
		if i < 0 {
			return jobsQuery{}, errorf(http.StatusBadRequest, "sort %q: want started, finished, duration, items or errors", s)
		}
		out.Sort = jobSorts[i]
	}
	switch q.Get("dir") {
	case "", "desc":
	case "asc":
		out.Asc = true
	default:
		return jobsQuery{}, errorf(http.StatusBadRequest, "dir %q: want asc or desc", q.Get("dir"))
	}
	return out, nil
}

// link is the jobs list's address with the query's filters and the given sort and cursor.
func (jq jobsQuery) link(sort string, asc bool, c string) string {
	v := url.Values{}
	for k, vs := range jq.Values {
		v[k] = vs
	}
	if sort != "" && (sort != "started" || asc) {
		v.Set("sort", sort)
		if asc {
			v.Set("dir", "asc")
		}
	}
	if c != "" {
		v.Set("cursor", c)
	}
	if len(v) == 0 {
		return "/jobs"
	}
	return "/jobs?" + v.Encode()
}

// sortHeader is a column header of the jobs list: a link that sorts by it (reversing the order
// when it is the sort already), and its aria-sort.
type sortHeader struct {
	Label, Href, ARIA string
}

func (jq jobsQuery) headers() map[string]sortHeader {
	out := map[string]sortHeader{}
	for _, s := range jobSorts {
		h := sortHeader{Label: s.Label, ARIA: "none"}
		asc := !s.Desc
		if s.Name == jq.Sort.Name {
			h.ARIA = "descending"
			if jq.Asc {
				h.ARIA = "ascending"
			}
			asc = !jq.Asc
		}
		h.Href = jq.link(s.Name, asc, "")
		out[s.Name] = h
	}
	return out
}

// jobsPage is a page of the jobs list.
type jobsPage struct {
	Jobs []jobRow
	// Next is the address of the next page; empty on the last one.
	Next string
	// Capped says more than [maxSortedJobs] jobs match a sort that orders only that many.
	Capped bool
}

// listJobs reads the page of jobs the query asks for.
func (w *Web) listJobs(ctx context.Context, jq jobsQuery) (*jobsPage, error) {
	if jq.Sort.Name == "started" && !jq.Asc {
		after, err := cursor.ReadID(cursor.Jobs, jq.Cursor)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "%v", err)
		}
		p := jq.Params
		p.AfterID, p.Limit = after, jobsPerPage
		jobs, err := w.rec.JobList(ctx, p)
		if err != nil {
			return nil, err
		}
		out := &jobsPage{}
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, w.jobRow(ctx, j))
		}
		if len(jobs) == jobsPerPage {
			out.Next = jq.link("started", false, cursor.MakeID(cursor.Jobs, jobs[len(jobs)-1].ID))
		}
		return out, nil
	}
	list := cursor.JobsSorted(jq.Sort.Name, jq.Asc)
	key, err := cursor.Read(list, jq.Cursor, 2)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	p := jq.Params
	p.Limit = maxSortedJobs + 1
	jobs, err := w.rec.JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &jobsPage{Capped: len(jobs) > maxSortedJobs}
	jobs = jobs[:min(len(jobs), maxSortedJobs)]
	now := w.b.Engine().Now()
	type keyed struct {
		row jobRow
		k   int64
	}
	rows := make([]keyed, 0, len(jobs))
	for _, j := range jobs {
		r := jobRow{Job: j}
		if jq.Sort.progress {
			r = w.jobRow(ctx, j)
		}
		rows = append(rows, keyed{r, jq.Sort.key(r, now)})
	}
	// Ordered by (key, id), both in the asked direction: a total order, so the cursor's (key,
	// id) of the last row shown says where the next page starts.
	less := func(a keyed, k, id int64) int {
		c := cmp.Or(cmp.Compare(a.k, k), cmp.Compare(a.row.ID, id))
		if !jq.Asc {
			c = -c
		}
		return c
	}
	slices.SortFunc(rows, func(a, b keyed) int { return less(a, b.k, b.row.ID) })
	start := 0
	if key != nil {
		k, err1 := strconv.ParseInt(key[0], 10, 64)
		id, err2 := strconv.ParseInt(key[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, errorf(http.StatusBadRequest, "%v", cursor.ErrForeign)
		}
		start = len(rows)
		for i, r := range rows {
			if less(r, k, id) > 0 {
				start = i
				break
			}
		}
	}
	end := min(start+jobsPerPage, len(rows))
	for _, r := range rows[start:end] {
		row := r.row
		if !jq.Sort.progress {
			row = w.jobRow(ctx, row.Job)
		}
		out.Jobs = append(out.Jobs, row)
	}
	if end < len(rows) {
		last := rows[end-1]
		out.Next = jq.link(jq.Sort.Name, jq.Asc, cursor.Make(list, strconv.FormatInt(last.k, 10), strconv.FormatInt(last.row.ID, 10)))
	}
	return out, nil
}

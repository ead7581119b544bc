package api

import (
	"net/url"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The bounds of a jobs list's filters.
const (
	maxJobMeta      = 8   // meta=KEY=VALUE filters
	maxJobFilterLen = 256 // characters of q, workflow and each meta filter
)

// JobFilter reads the filters of a jobs list from a query — state, workflow, q (free text),
// created_from and created_until (RFC 3339 times, or YYYY-MM-DD dates: from the start of
// created_from's day to the end of created_until's, in UTC), and meta=KEY=VALUE, repeated — into
// the params of [store.Executor.JobList]. The UI's jobs page reads its form with it. A bad filter
// is an [*Error] naming it.
func JobFilter(q url.Values) (store.JobListParams, error) {
	p := store.JobListParams{Workflow: strings.TrimSpace(q.Get("workflow")), Text: strings.TrimSpace(q.Get("q"))}
	if s := q.Get("state"); s != "" {
		st, err := record.ParseJobState(s)
		if err != nil {
			return p, errf(CodeBadRequest, "state: %v", err)
		}
		p.State = st
	}
	if len(p.Text) > maxJobFilterLen || len(p.Workflow) > maxJobFilterLen {
		return p, errf(CodeBadRequest, "q and workflow may be at most %d characters", maxJobFilterLen)
	}
	var err error
	if p.CreatedFrom, err = filterTime(q.Get("created_from"), "created_from", false); err != nil {
		return p, err
	}
	if p.CreatedUntil, err = filterTime(q.Get("created_until"), "created_until", true); err != nil {
		return p, err
	}
	metas := q["meta"]
	if len(metas) > maxJobMeta {
		return p, errf(CodeBadRequest, "at most %d meta filters, not %d", maxJobMeta, len(metas))
	}
	for _, m := range metas {
		if strings.TrimSpace(m) == "" {
			continue // an empty field of a form
		}
		k, v, ok := strings.Cut(m, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || len(m) > maxJobFilterLen {
			return p, errf(CodeBadRequest, "meta %q: write KEY=VALUE, at most %d characters", m, maxJobFilterLen)
		}
		p.Meta = append(p.Meta, store.KeyValue{Key: k, Value: strings.TrimSpace(v)})
	}
	return p, nil
}

// filterTime reads an RFC 3339 time or a YYYY-MM-DD date (UTC); a date that ends a range (end)
// stands for the end of its day.
func filterTime(s, name string, end bool) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, errf(CodeBadRequest, "%s %q: want a date (2026-11-29) or an RFC 3339 time (2026-11-29T10:00:00Z)", name, s)
	}
	if end {
		t = t.AddDate(0, 0, 1)
	}
	return t, nil
}

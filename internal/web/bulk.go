package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// maxBulkJobs bounds the jobs one bulk action names.
const maxBulkJobs = 200

// bulkResult is how a bulk action went for one job.
type bulkResult struct {
	ID      int64
	OK      bool
	Message string
}

// bulkJobs cancels or retries the jobs selected on the jobs list: the first POST asks to
// confirm, listing them; the confirmed one applies the action to each through the API (the
// same rules as one job's buttons: a job that is not running cannot be canceled) and shows how
// each went.
func (w *Web) bulkJobs(rw http.ResponseWriter, r *http.Request, s *session) error {
	action := r.PostFormValue("action")
	verb, past, explain := "", "", ""
	switch action {
	case "cancel":
		verb, past, explain = "Cancel", "canceled", "Their files not yet processed end with the error canceled. Jobs that are not running are left as they are."
	case "retry":
		verb, past, explain = "Retry", "running again", "Their failed and canceled tasks run again. Running jobs, and jobs with nothing to retry, are left as they are."
	default:
		return errorf(http.StatusBadRequest, "action %q: want cancel or retry", action)
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, v := range r.PostForm["id"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return errorf(http.StatusBadRequest, "job id %q is not a positive number", v)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return errorf(http.StatusBadRequest, "select the jobs to %s first", action)
	}
	if len(ids) > maxBulkJobs {
		return errorf(http.StatusBadRequest, "at most %d jobs at once, not %d", maxBulkJobs, len(ids))
	}
	data := struct {
		Action, Verb, Past, Explain string
		IDs                         []int64
		Jobs                        []*record.Job
		Results                     []bulkResult
		Done                        int
	}{Action: action, Verb: verb, Past: past, Explain: explain, IDs: ids}
	if r.PostFormValue("confirm") != "yes" {
		for _, id := range ids {
			j, err := w.rec.JobGet(r.Context(), id)
			if err != nil {
				return store.NotFound(err, "job", id)
			}
			data.Jobs = append(data.Jobs, j)
		}
		w.render(rw, r, http.StatusOK, "bulk", s, pageData{Title: verb + " jobs", Nav: "jobs", Data: data})
		return nil
	}
	for _, id := range ids {
		status, msg, err := w.callAPI(r.Context(), s, http.MethodPost, fmt.Sprintf("/v1/jobs/%d/%s", id, action), nil)
		if err != nil {
			return err
		}
		res := bulkResult{ID: id, OK: status < 400, Message: msg}
		if res.OK {
			data.Done++
		} else if res.Message == "" {
			res.Message = http.StatusText(status)
		}
		data.Results = append(data.Results, res)
	}
	w.render(rw, r, http.StatusOK, "bulk", s, pageData{Title: verb + " jobs", Nav: "jobs", Data: data})
	return nil
}

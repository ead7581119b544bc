package api

import (
	"net/http"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
)

// stepJSON is one step instance of an item (GET /v1/items/{id}'s steps): a step the workflow
// declares, in its order, with the one state it is in on the item.
type stepJSON struct {
	Name   string `json:"name"`
	Action string `json:"action"`
	// State is blocked (waiting for Needs), ready, running, parked (waiting for a claim),
	// complete, failed, skipped (Reason says why) or canceled.
	State record.TaskState `json:"state"`
	// Needs are the events of its needs not yet fired on the item, while it is blocked (or
	// those it never got, when it was skipped).
	Needs []string `json:"needs,omitempty"`
	// External is true when every event it still needs comes from outside (an external event).
	External bool `json:"external,omitempty"`
	// Reason says why a skipped step did not run: its when: condition, its deadline, or that
	// its needs never fired.
	Reason string `json:"reason,omitempty"`
	// TaskID is its task, absent while it has none.
	TaskID      int64      `json:"task_id,omitempty"`
	Attempts    int        `json:"attempts"`
	MaxAttempts int        `json:"max_attempts"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	Error       string     `json:"error,omitempty"`
}

func toSteps(states []engine.StepState) []stepJSON {
	out := make([]stepJSON, len(states))
	for i, s := range states {
		out[i] = stepJSON{Name: s.Step, Action: s.Action, State: s.State, Needs: s.Needs, External: s.External, Reason: s.Reason,
			TaskID: s.TaskID, Attempts: s.Attempts, MaxAttempts: s.MaxAttempts, StartedAt: timeOrNil(s.StartedAt),
			FinishedAt: timeOrNil(s.FinishedAt), Error: s.Error}
	}
	return out
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// waitsJSON is GET /v1/jobs/{id}/waits: what a running job waits on.
type waitsJSON struct {
	JobID int64           `json:"job_id"`
	State record.JobState `json:"state"`
	// Events are the external events blocked steps of open items need, with how many step
	// instances wait for each and which steps.
	Events []eventWaitJSON `json:"events"`
	// Steps are the steps blocked on some open item, with what they need and on how many items.
	Steps []stepWaitJSON `json:"steps"`
	// Items are the blocked step instances, item by item.
	Items []itemWaitJSON `json:"items"`
	// ItemsRead is how many open items were read (at most limit); Truncated is true when the
	// job has more, and the counts cover only those read.
	ItemsRead int  `json:"items_read"`
	Truncated bool `json:"truncated"`
}

type eventWaitJSON struct {
	Event   string   `json:"event"`
	Waiting int      `json:"waiting"`
	Steps   []string `json:"steps"`
}

type stepWaitJSON struct {
	Step     string   `json:"step"`
	Needs    []string `json:"needs"`
	Items    int      `json:"items"`
	External bool     `json:"external"`
}

type itemWaitJSON struct {
	ItemID   int64    `json:"item_id"`
	Name     string   `json:"name"`
	Step     string   `json:"step"`
	Needs    []string `json:"needs"`
	External bool     `json:"external"`
	// Since is when the item was created; Due the deadline of a step that has one.
	Since time.Time  `json:"since"`
	Due   *time.Time `json:"due,omitempty"`
	// Keys are the item's key=value correlation keys an event may be sent by.
	Keys []string `json:"keys"`
}

// jobWaits answers what the job waits on.
func (a *API) jobWaits(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1000, 10000)
	if err != nil {
		return err
	}
	jw, err := a.b.Engine().Waits(r.Context(), id, int(limit))
	if err != nil {
		return notFound(err, "job %d", id)
	}
	out := waitsJSON{JobID: jw.JobID, State: jw.State, Events: []eventWaitJSON{}, Steps: []stepWaitJSON{}, Items: []itemWaitJSON{},
		ItemsRead: jw.ItemsRead, Truncated: jw.Truncated}
	for _, e := range jw.Events {
		out.Events = append(out.Events, eventWaitJSON{Event: e.Event, Waiting: e.Waiting, Steps: e.Steps})
	}
	for _, s := range jw.Steps {
		out.Steps = append(out.Steps, stepWaitJSON{Step: s.Step, Needs: s.Needs, Items: s.Items, External: s.External})
	}
	for _, it := range jw.Items {
		keys := it.Keys
		if keys == nil {
			keys = []string{}
		}
		out.Items = append(out.Items, itemWaitJSON{ItemID: it.ItemID, Name: it.Name, Step: it.Step, Needs: it.Needs, External: it.External,
			Since: it.Since.UTC(), Due: timeOrNil(it.Due), Keys: keys})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

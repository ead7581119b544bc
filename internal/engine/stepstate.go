package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// StepState is one step instance — a step of the workflow on one item — with the one state it
// is in (Banzai's step states): what `sluice job show`, GET /v1/items/{id} and the web item page
// show for every step the workflow declares, run or not.
//
// A step instance that has run, is running or is ready has a task row, and its state is the
// row's. One that has none is derived as it is read, from the workflow and the events fired on
// the item (DESIGN §2): [record.TaskBlocked] while the item is open in a running job and Needs
// lists the events it still waits for, and [record.TaskSkipped] once it can no longer run (the
// item settled, or the job ended) with Reason saying so. Steps whose `when:` did not hold, or
// whose deadline passed, have a skipped row of their own. Blocked rows are not stored up front:
// a row per declared step at each item's creation would multiply the inserts on the hot path of
// every job for a state that the events already determine.
type StepState struct {
	Step   string
	Action string
	State  record.TaskState
	// Needs are the events of the step's needs that have not fired on the item, in the order
	// the workflow lists them: what a blocked step waits for (or a skipped one waited for).
	Needs []string
	// External is true when every event of Needs is an external one: the step waits for the
	// outside (`sluice event fire`), not for another step.
	External bool
	// Reason says why a skipped step did not run: its `when:` condition, its deadline, or that
	// its needs never fired. Empty for other states.
	Reason string
	// TaskID is the step's task, 0 when it has none.
	TaskID int64
	// Attempts is how many attempts the task has started (0 before it first runs), of
	// MaxAttempts.
	Attempts, MaxAttempts int
	// StartedAt and FinishedAt are those of the task's last attempt, zero when it has none or
	// it is not over.
	StartedAt, FinishedAt time.Time
	// Error is the task's error, when it failed.
	Error string
}

// StepStates returns every step of the item's workflow, in the workflow's order, with its state
// on the item (see [StepState]). A missing item is an error wrapping [store.ErrNotFound].
func (e *Engine) StepStates(ctx context.Context, itemID int64) ([]StepState, error) {
	it, err := e.store.ItemGet(ctx, itemID)
	if err != nil {
		return nil, store.NotFound(err, "item", itemID)
	}
	all, err := e.stepStatesOf(ctx, it.JobID, []*record.Item{it})
	if err != nil {
		return nil, err
	}
	return all[it.ID], nil
}

// StepStatesOf is [Engine.StepStates] for many items of one job, by item id, in three
// statements whatever their number: `job show` and the job page read a page of items at once.
func (e *Engine) StepStatesOf(ctx context.Context, jobID int64, items []*record.Item) (map[int64][]StepState, error) {
	return e.stepStatesOf(ctx, jobID, items)
}

func (e *Engine) stepStatesOf(ctx context.Context, jobID int64, items []*record.Item) (map[int64][]StepState, error) {
	out := make(map[int64][]StepState, len(items))
	if len(items) == 0 {
		return out, nil
	}
	job, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return nil, store.NotFound(err, "job", jobID)
	}
	def, _, err := e.Definition(ctx, job.WorkflowName, job.WorkflowVersion)
	if err != nil {
		return nil, fmt.Errorf("steps of job %d: %w", jobID, err)
	}
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	tasks, err := e.store.TaskListByItems(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("steps of job %d: %w", jobID, err)
	}
	byItem := map[int64][]*record.Task{}
	for _, t := range tasks {
		byItem[t.ItemID] = append(byItem[t.ItemID], t)
	}
	fired, err := e.store.EventListByItems(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("steps of job %d: %w", jobID, err)
	}
	for _, it := range items {
		if it.JobID != jobID {
			continue
		}
		out[it.ID] = stepStates(def, job, it, byItem[it.ID], fired[it.ID])
	}
	return out, nil
}

// stepStates derives the item's step states from its workflow, its job, its tasks (in id order)
// and the events fired on it.
func stepStates(def *workflow.Definition, job *record.Job, it *record.Item, tasks []*record.Task, fired []string) []StepState {
	last := make(map[string]*record.Task, len(tasks))
	for _, t := range tasks {
		last[t.Step] = t // in id order: a step's latest row wins
	}
	open := job.State == record.JobRunning && (it.State == record.ItemCreated || it.State == record.ItemWritten)
	out := make([]StepState, len(def.Steps))
	for i, s := range def.Steps {
		st := StepState{Step: s.Name, Action: s.Action, MaxAttempts: s.MaxAttempts()}
		for _, n := range s.Needs {
			if !slices.Contains(fired, n) {
				st.Needs = append(st.Needs, n)
			}
		}
		st.External = len(st.Needs) > 0 && !slices.ContainsFunc(st.Needs, func(n string) bool { return !def.IsExternal(n) })
		t := last[s.Name]
		switch {
		case t != nil:
			st.State, st.TaskID, st.Attempts, st.MaxAttempts = t.State, t.ID, t.Attempt, t.MaxAttempts
			st.StartedAt, st.FinishedAt, st.Error = t.StartedAt, t.FinishedAt, t.Error
			if t.State == record.TaskSkipped {
				st.Reason, st.Error = t.Error, ""
				if st.Reason == "" {
					st.Reason = fmt.Sprintf("when: %s did not hold", s.When)
				}
			}
		case open:
			st.State = record.TaskBlocked
		default:
			st.State = record.TaskSkipped
			st.Reason = "not reached"
			if len(st.Needs) > 0 {
				st.Reason = "not reached: " + strings.Join(st.Needs, ", ") + " never fired"
			}
		}
		if st.State != record.TaskBlocked && st.State != record.TaskSkipped {
			st.Needs, st.External = nil, false
		}
		out[i] = st
	}
	return out
}

// JobWaits is what a job waits on (GET /v1/jobs/{id}/waits): the external events its open items
// still need, and its blocked step instances with what they need, counted and listed.
type JobWaits struct {
	JobID int64
	State record.JobState
	// Events are the external events that blocked steps of open items need, in the workflow's
	// order of declaration, with how many step instances wait for each.
	Events []EventWait
	// Steps are the workflow's steps that are blocked on some open item, in the workflow's
	// order, with the events they need and how many items they are blocked on.
	Steps []StepWait
	// Items are the blocked step instances, by item and in workflow order, up to the limit read.
	Items []ItemWait
	// ItemsRead is how many open items were read; Truncated is set when the job has more than
	// that, and the counts cover only those read.
	ItemsRead int
	Truncated bool
}

// EventWait is an external event open items wait on.
type EventWait struct {
	Event string
	// Waiting is how many step instances need it.
	Waiting int
	// Steps are the steps that need it, in workflow order.
	Steps []string
}

// StepWait is a step blocked on some of the job's open items.
type StepWait struct {
	Step string
	// Needs are the events it still needs on any of them, in the order of its needs.
	Needs []string
	// Items is how many open items it is blocked on.
	Items int
	// External is true when it waits only for external events on every one of them.
	External bool
}

// ItemWait is one blocked step instance of an open item.
type ItemWait struct {
	ItemID int64
	Name   string
	Step   string
	Needs  []string
	// External is true when every event of Needs is external.
	External bool
	// Since is when the item was created: how long it has been waiting at most.
	Since time.Time
	// Due is the deadline of a step with one, recorded once it waits only for the outside;
	// zero otherwise.
	Due time.Time
	// Keys are the item's correlation keys (see [CorrelationKeys]), which an event may be sent by.
	Keys []string
}

// Waits returns what the job waits on, reading up to limit of its open items (1000 when limit
// is 0 or less). A job that is not running waits on nothing. A missing job is an error wrapping
// [store.ErrNotFound].
func (e *Engine) Waits(ctx context.Context, jobID int64, limit int) (*JobWaits, error) {
	if limit <= 0 {
		limit = 1000
	}
	job, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return nil, store.NotFound(err, "job", jobID)
	}
	out := &JobWaits{JobID: job.ID, State: job.State, Events: []EventWait{}, Steps: []StepWait{}, Items: []ItemWait{}}
	if job.State != record.JobRunning {
		return out, nil
	}
	def, _, err := e.Definition(ctx, job.WorkflowName, job.WorkflowVersion)
	if err != nil {
		return nil, fmt.Errorf("waits of job %d: %w", jobID, err)
	}
	items, err := e.store.ItemList(ctx, store.ItemListParams{JobID: jobID, States: []record.ItemState{record.ItemCreated, record.ItemWritten}, Limit: limit + 1})
	if err != nil {
		return nil, fmt.Errorf("waits of job %d: %w", jobID, err)
	}
	if len(items) > limit {
		items, out.Truncated = items[:limit], true
	}
	out.ItemsRead = len(items)
	states, err := e.stepStatesOf(ctx, jobID, items)
	if err != nil {
		return nil, err
	}
	waits, err := e.store.WaitListByJob(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("waits of job %d: %w", jobID, err)
	}
	type itemStep struct {
		item int64
		step string
	}
	due := map[itemStep]time.Time{}
	for _, w := range waits {
		due[itemStep{w.ItemID, w.Step}] = w.Due
	}
	events := map[string]*EventWait{}
	steps := map[string]*StepWait{}
	for _, it := range items {
		for _, st := range states[it.ID] {
			if st.State != record.TaskBlocked {
				continue
			}
			out.Items = append(out.Items, ItemWait{ItemID: it.ID, Name: it.Name, Step: st.Step, Needs: st.Needs, External: st.External,
				Since: it.CreatedAt, Due: due[itemStep{it.ID, st.Step}], Keys: CorrelationKeys(it.Metadata)})
			sw := steps[st.Step]
			if sw == nil {
				sw = &StepWait{Step: st.Step, External: true}
				steps[st.Step] = sw
			}
			sw.Items++
			sw.External = sw.External && st.External
			for _, n := range st.Needs {
				if !slices.Contains(sw.Needs, n) {
					sw.Needs = append(sw.Needs, n)
				}
				if !def.IsExternal(n) {
					continue
				}
				ew := events[n]
				if ew == nil {
					ew = &EventWait{Event: n}
					events[n] = ew
				}
				ew.Waiting++
				if !slices.Contains(ew.Steps, st.Step) {
					ew.Steps = append(ew.Steps, st.Step)
				}
			}
		}
	}
	order := func(a, b string) int {
		return slices.IndexFunc(def.Steps, func(s *workflow.Step) bool { return s.Name == a }) -
			slices.IndexFunc(def.Steps, func(s *workflow.Step) bool { return s.Name == b })
	}
	for _, ev := range def.External {
		if ew := events[ev]; ew != nil {
			slices.SortFunc(ew.Steps, order)
			out.Events = append(out.Events, *ew)
		}
	}
	for _, s := range def.Steps {
		if sw := steps[s.Name]; sw != nil {
			out.Steps = append(out.Steps, *sw)
		}
	}
	return out, nil
}

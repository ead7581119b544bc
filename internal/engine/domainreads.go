package engine

import (
	"context"
	"fmt"

	"github.com/sluice-project/sluice/internal/store"
)

// This file holds what the domains (internal/objects, internal/graph) read of the engine's
// records: narrow reads that their read ports name, so that an action reads the core through
// a port it is given and never through the store.

// DomainSQL returns the statements of the registered domains' own tables, in autocommit
// (outside any task's transaction). A domain wraps it in its typed store; nothing else should
// run SQL through it.
func (e *Engine) DomainSQL() store.DomainSQL { return e.store.DomainSQL() }

// ItemStep is one step of the workflow of an item's job, with the state of the item's task at
// that step.
type ItemStep struct {
	Step   string
	Action string
	// State is the item's task's state at the step (store.TaskSkipped for a step whose `when:`
	// did not hold); empty when the item has no task at the step (yet).
	State string
}

// ItemSteps returns every step of the workflow version of the job, in the workflow's order,
// with the item's task state at each. An item of another job has no task at any step.
func (e *Engine) ItemSteps(ctx context.Context, jobID, itemID int64) ([]ItemStep, error) {
	job, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("steps of item %d: %w", itemID, err)
	}
	def, _, err := e.Definition(ctx, job.WorkflowName, job.WorkflowVersion)
	if err != nil {
		return nil, err
	}
	tasks, err := e.store.TaskListByItem(ctx, itemID)
	if err != nil {
		return nil, fmt.Errorf("steps of item %d: %w", itemID, err)
	}
	state := map[string]string{}
	for _, t := range tasks {
		if t.JobID == jobID {
			state[t.Step] = t.State
		}
	}
	out := make([]ItemStep, len(def.Steps))
	for i, s := range def.Steps {
		out[i] = ItemStep{Step: s.Name, Action: s.Action, State: state[s.Name]}
	}
	return out, nil
}

// JobState returns the state of a job (store.JobRunning, …); a job that does not exist is a
// [*store.NotFoundError].
func (e *Engine) JobState(ctx context.Context, jobID int64) (string, error) {
	j, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return "", store.NotFound(err, "job", jobID)
	}
	return j.State, nil
}

// RunningJobsOf returns the running jobs of a workflow, oldest first.
func (e *Engine) RunningJobsOf(ctx context.Context, workflow string) ([]*store.Job, error) {
	jobs, err := e.store.JobListRunning(ctx)
	if err != nil {
		return nil, err
	}
	out := jobs[:0]
	for _, j := range jobs {
		if j.WorkflowName == workflow {
			out = append(out, j)
		}
	}
	return out, nil
}

// JobItems returns up to limit items of a job in tree order (by sort key), those after the
// sort key after ("" for the first).
func (e *Engine) JobItems(ctx context.Context, jobID int64, after string, limit int) ([]*store.Item, error) {
	items, err := e.store.ItemList(ctx, store.ItemListParams{JobID: jobID, AfterSort: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list items of job %d: %w", jobID, err)
	}
	return items, nil
}

package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The engine's reads: each one statement (or two) outside any transaction, none locking. The
// layers above the engine read through them, or through read interfaces of their own that the
// store satisfies; they never write through the store.

// Job returns the job id as the store holds it now; a missing job is an error wrapping
// [store.ErrNotFound].
func (e *Engine) Job(ctx context.Context, id int64) (*record.Job, error) {
	return e.store.JobGet(ctx, id)
}

// The reads below are what whoever runs a task (a worker, the remote worker protocol) needs of
// the database outside a transaction: the task's item and job, the children an earlier attempt
// of it recorded, and the conversion cache. Each is one statement; none locks.

// TaskItem returns the item task runs on, as committed.
func (e *Engine) TaskItem(ctx context.Context, task *record.Task) (*record.Item, error) {
	return e.store.ItemGet(ctx, task.ItemID)
}

// TaskItems returns the items tasks run on, as committed: items[i] is tasks[i]'s, in one
// statement. A missing item is an error wrapping [store.ErrNotFound].
func (e *Engine) TaskItems(ctx context.Context, tasks []*record.Task) ([]*record.Item, error) {
	ids := make([]int64, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ItemID
	}
	got, err := e.store.ItemGetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*record.Item, len(got))
	for _, it := range got {
		byID[it.ID] = it
	}
	items := make([]*record.Item, len(tasks))
	for i, t := range tasks {
		if items[i] = byID[t.ItemID]; items[i] == nil {
			return nil, store.NotFound(fmt.Errorf("get item %d of task %d", t.ItemID, t.ID), "item", t.ItemID)
		}
	}
	return items, nil
}

// TaskJob returns the job of a task, by its id, as committed: its workflow, creation time (which
// identifies its trace) and state (whether the task's attempt still counts).
func (e *Engine) TaskJob(ctx context.Context, jobID int64) (*record.Job, error) {
	return e.store.JobGet(ctx, jobID)
}

// EarlierChildren returns up to limit children an earlier attempt of task recorded, from
// ordinal from on, in ordinal order: what an attempt that runs again compares its own with.
func (e *Engine) EarlierChildren(ctx context.Context, task *record.Task, from, limit int) ([]*record.Item, error) {
	return e.store.ItemListChildrenFrom(ctx, task.ItemID, task.Step, from, limit)
}

// CachedEffects returns the conversion cache's entry under key; [store.ErrNotFound] when it has
// none.
func (e *Engine) CachedEffects(ctx context.Context, key string) ([]byte, error) {
	return e.store.CacheGet(ctx, key)
}

// The reads below are the dispatcher's: which queues have work, and when a backoff ends.

// Workflows returns every stored workflow version, for the queues their steps use.
func (e *Engine) Workflows(ctx context.Context) ([]*record.Workflow, error) {
	return e.store.WorkflowList(ctx)
}

// NextRunAfter returns the earliest run_after of a ready task that has one (a backoff ends
// then), or the zero time.
func (e *Engine) NextRunAfter(ctx context.Context) (time.Time, error) {
	return e.store.TaskNextRunAfter(ctx)
}

// ReadyQueues returns those of queues that have a ready task due now.
func (e *Engine) ReadyQueues(ctx context.Context, queues []string) ([]string, error) {
	return e.store.TaskReadyQueues(ctx, queues, e.Now())
}

// Items returns the items of ids, in id order; missing ids are left out.
func (e *Engine) Items(ctx context.Context, ids []int64) ([]*record.Item, error) {
	return e.store.ItemGetMany(ctx, ids)
}

// ConcurrentWrites reports whether the store takes writes from several connections at once
// (PostgreSQL); when it does not (SQLite), a process's writes go through its one writer.
func (e *Engine) ConcurrentWrites() bool { return e.store.Capabilities().ConcurrentWrites }

// RenewLeases extends the leases p names that p.Owner still holds, outside the writer (a store
// that takes concurrent writes); it returns how many it extended.
func (e *Engine) RenewLeases(ctx context.Context, p store.TaskRenewLeasesParams) (int64, error) {
	return e.store.TaskRenewLeases(ctx, p)
}

// The reads below are what the domains (internal/objects, internal/graph, internal/fileset)
// read of the engine's records: narrow reads that their read ports name, so that an action
// reads the core through a port it is given and never through the store.

// DomainSQL returns the statements of the registered domains' own tables, in autocommit
// (outside any task's transaction). A domain wraps it in its typed store; nothing else should
// run SQL through it.
func (e *Engine) DomainSQL() store.DomainSQL { return e.store.DomainSQL() }

// ItemStep is one step of the workflow of an item's job, with the state of the item's task at
// that step.
type ItemStep struct {
	Step   string
	Action string
	// State is the item's task's state at the step ([record.TaskSkipped] for a step whose
	// `when:` did not hold); empty when the item has no task at the step (yet).
	State record.TaskState
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
	state := map[string]record.TaskState{}
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

// JobState returns the state of a job; a job that does not exist is a [*store.NotFoundError].
func (e *Engine) JobState(ctx context.Context, jobID int64) (record.JobState, error) {
	j, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return "", store.NotFound(err, "job", jobID)
	}
	return j.State, nil
}

// RunningJobsOf returns the running jobs of a workflow, oldest first.
func (e *Engine) RunningJobsOf(ctx context.Context, workflow string) ([]*record.Job, error) {
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
func (e *Engine) JobItems(ctx context.Context, jobID int64, after string, limit int) ([]*record.Item, error) {
	items, err := e.store.ItemList(ctx, store.ItemListParams{JobID: jobID, AfterSort: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list items of job %d: %w", jobID, err)
	}
	return items, nil
}

// StepChildren returns the children the step named step made of item parent, in ordinal order.
// It is the read of the core a collecting action needs (a dataset request's result reads its
// files' outcomes): a domain's read port declares it, and the engine serves it locally, so that
// the action itself holds no store.
func (e *Engine) StepChildren(ctx context.Context, parent int64, step string) ([]*record.Item, error) {
	return e.store.ItemListChildren(ctx, parent, step)
}

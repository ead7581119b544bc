package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// Errors returned by [Engine.Retry].
var (
	// ErrNotRetryable is returned for a job that is running (wait for it to end) or canceled.
	ErrNotRetryable = errors.New("job cannot be retried")
	// ErrNothingToRetry is returned for a job with no failed tasks.
	ErrNothingToRetry = errors.New("nothing to retry")
)

// Retry re-runs what failed in an ended job, in one transaction, and returns the job, running
// again. It is meant for failures that the operator has since fixed (a converter that was
// missing, a service that was down, a bug in an exec script).
//
// Only tasks in state failed are retried — plus, in a failed job, the tasks its failure canceled
// before they ran. Each goes back to ready with a fresh attempt budget (its step's attempts on
// top of the ones it used, so the attempt history keeps every run). Its item loses its error and
// returns to written, and ancestors that were ingested return to processed, since a child of
// theirs is open again. Completed tasks never run again: that includes a failure path that
// already ran for an item (a step that needs a failure event, such as a notification), and a
// collector that needs children.done and already ran. Events stay fired: they are facts.
//
// A failed job also gets the work its failure left unstarted: steps whose needs were met after
// the job ended become ready, and items that settled while it was ended (without waiting for
// children.done or external events) are settled again.
//
// Retry returns an error wrapping [ErrNotRetryable] for a running or canceled job, one wrapping
// [ErrNothingToRetry] for a failed or complete job with no failed task, and one wrapping
// [store.ErrNotFound] for an unknown job.
//
// Retry runs its own transaction. In a process whose workers are running, use [Tx.Retry] in the
// process's writer (worker.Worker.Do) instead, so that the retry does not contend with the
// workers' transactions for the same item rows (on Postgres, a deadlock).
func (e *Engine) Retry(ctx context.Context, jobID int64) (*store.Job, error) {
	if err := e.Run(ctx, func(t *Tx) error { return t.Retry(jobID) }); err != nil {
		return nil, err
	}
	return e.store.JobGet(ctx, jobID)
}

// ErrorOutputKind is the kind of output that reports an item's error; [Engine.Retry] deletes
// it when it clears the error.
const ErrorOutputKind = "error"

// retryPage is how many failed tasks a retry reads per query.
const retryPage = 10_000

// Retry does what [Engine.Retry] does, inside the transaction.
func (t *Tx) Retry(jobID int64) error { return t.t.retry(jobID) }

func (t *tx) retry(jobID int64) error {
	def, job, err := t.def(jobID)
	if err != nil {
		return fmt.Errorf("retry job %d: %w", jobID, err)
	}
	if job.State != store.JobFailed && job.State != store.JobComplete {
		return fmt.Errorf("%w: job %d is %s; only a failed or complete job can be retried", ErrNotRetryable, jobID, job.State)
	}
	states := []string{store.TaskFailed}
	if job.State == store.JobFailed {
		states = append(states, store.TaskCanceled)
	}
	var tasks []*store.Task
	for _, state := range states {
		var after int64
		for {
			// Large pages: on Postgres each one reads every task of the job (there is no index
			// of tasks by job), and all of them are held here anyway.
			page, err := t.jobTasks(store.TaskListParams{JobID: jobID, State: state, AfterID: after, Limit: retryPage})
			if err != nil {
				return fmt.Errorf("retry job %d: %w", jobID, err)
			}
			tasks = append(tasks, page...)
			if len(page) < retryPage {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	if len(tasks) == 0 {
		return fmt.Errorf("%w: job %d has no failed tasks", ErrNothingToRetry, jobID)
	}
	wasFailed := job.State == store.JobFailed
	ok, err := t.x.JobReopen(t.ctx, jobID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: job %d changed state during the retry", ErrNotRetryable, jobID)
	}
	job.State, job.Error = store.JobRunning, ""
	t.touched[jobID] = true
	for _, task := range tasks {
		budget := task.MaxAttempts
		if s := def.Step(task.Step); s != nil {
			budget = s.MaxAttempts()
		}
		ok, err := t.x.TaskRetry(t.ctx, store.TaskRetryParams{ID: task.ID, MaxAttempts: task.Attempt + budget, Now: t.now})
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		t.readyIn(task.Queue)
		if err := t.reopen(task.ItemID, true); err != nil {
			return err
		}
		// The item has a ready task: it cannot settle in this transaction.
		t.busy[task.ItemID] = true
	}
	if wasFailed {
		return t.resume(def, jobID)
	}
	return nil
}

// reopen moves an item back to written (clearing its error when asked) and its ingested
// ancestors back to processed: their subtree is open again.
func (t *tx) reopen(itemID int64, clearError bool) error {
	it, err := t.item(itemID)
	if err != nil {
		return err
	}
	if it.State != store.ItemWritten || clearError && it.Error != "" {
		t.stale[it.ID] = true
		if _, err := t.x.ItemReopen(t.ctx, store.ItemReopenParams{ID: it.ID, To: store.ItemWritten, ClearError: clearError}); err != nil {
			return err
		}
		it.State, it.Colored = store.ItemWritten, 0
		if clearError {
			// An output of kind "error" tells the item's error (the documents workflow's
			// ingest writes one): it goes with the error, or a retried file that became a
			// document would be listed as both.
			if err := t.x.OutputDelete(t.ctx, store.OutputDeleteParams{ItemID: it.ID, Kind: ErrorOutputKind}); err != nil {
				return err
			}
			it.Error = ""
		}
	}
	for id := it.ParentID; id != 0; {
		p, err := t.item(id)
		if err != nil {
			return err
		}
		if p.State != store.ItemIngested {
			break // an unfinished item's ancestors are unfinished already
		}
		t.stale[p.ID] = true
		if _, err := t.x.ItemReopen(t.ctx, store.ItemReopenParams{ID: p.ID, To: store.ItemProcessed}); err != nil {
			return err
		}
		p.State = store.ItemProcessed
		id = p.ParentID
	}
	return nil
}

// resume finds what a failed job left unstarted: while a job is not running, fired events make no
// task ready and items settle without waiting for children.done or external events. For every
// item it makes ready the steps whose needs have all fired, and reopens for settling the items
// with a step that an event still to come (children.done, external) could unblock.
func (t *tx) resume(def *workflow.Definition, jobID int64) error {
	after := ""
	for {
		items, err := t.x.ItemList(t.ctx, store.ItemListParams{JobID: jobID, AfterSort: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("resume job %d: %w", jobID, err)
		}
		for _, it := range items {
			if err := t.resumeItem(def, it); err != nil {
				return err
			}
		}
		if len(items) < 1000 {
			return nil
		}
		after = items[len(items)-1].SortKey
	}
}

func (t *tx) resumeItem(def *workflow.Definition, listed *store.Item) error {
	// Not through t.itemEvents: caching every item's events would hold the whole job in memory.
	ev, err := t.eventsOnce(listed.ID)
	if err != nil {
		return err
	}
	tasks, err := t.tasksOf(listed.ID)
	if err != nil {
		return err
	}
	has := make(map[string]bool, len(tasks))
	for _, tk := range tasks {
		has[tk.Step] = true
	}
	made, unsettled := false, false
	for _, s := range def.Steps {
		if has[s.Name] {
			continue
		}
		missing, possible := 0, true
		for _, n := range s.Needs {
			if ev[n] {
				continue
			}
			missing++
			if !def.IsExternal(n) && n != workflow.EventChildrenDone {
				possible = false
			}
		}
		switch {
		case missing == 0:
			ins, err := t.x.TaskInsert(t.ctx, store.TaskInsertParams{
				JobID: listed.JobID, ItemID: listed.ID, Step: s.Name, Action: s.Action, Queue: t.e.Queue(def, s),
				MaxAttempts: s.MaxAttempts(), SortKey: listed.SortKey, ProgressWeight: t.e.weight(s), Now: t.now,
			})
			if err != nil {
				return err
			}
			made = made || ins
		case possible:
			unsettled = true
		}
	}
	switch {
	case made:
		t.ready, t.readyAll = true, true
		t.busy[listed.ID] = true
		return t.reopen(listed.ID, false)
	case t.busy[listed.ID]:
		return nil // a retried task is ready
	case listed.State == store.ItemWritten:
		// Left written by the failure (its ready tasks were canceled, and retried above if
		// any): let settle decide.
		t.markDirty(listed)
		return nil
	case unsettled:
		if err := t.reopen(listed.ID, false); err != nil {
			return err
		}
		// Settle fires children.done, or leaves the item waiting for its external event.
		t.markDirty(listed)
	}
	return nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// Errors returned by [Engine.Retry].
var (
	// ErrNotRetryable is returned for a job that is running: wait for it to end.
	ErrNotRetryable = errors.New("job cannot be retried")
	// ErrNothingToRetry is returned for a job with no failed or canceled tasks.
	ErrNothingToRetry = errors.New("nothing to retry")
)

// Retry re-runs what failed or was canceled in an ended job, in one transaction, and returns
// the job, running again. It is meant for failures that the operator has since fixed (a
// converter that was missing, a service that was down, a bug in an exec script), and for the
// files a cancel left unprocessed.
//
// The tasks in state failed are retried — plus, in a failed or canceled job, the tasks its end
// canceled. Each goes back to ready with a fresh attempt budget (its step's attempts on top of
// the ones it used). Its item returns to written, and ancestors that were ingested return to
// processed, since a child of theirs is open again. The item's collectors (its steps that need
// children.done) that ran on the failed result go back to blocked and run again once the
// item's children are done again, so that what the user sees is made from the new result.
// Other completed tasks never run again: that includes a failure path that already ran for an
// item (a step that needs a failure event, such as a notification). Events stay fired: they
// are facts.
//
// Nothing is deleted. Every attempt stays in its task's history ([Engine.ItemHistory]), and an
// item keeps its error, and its error output, until a new result replaces them: when the
// item's retried tasks have ended again, an error that none of them ended with is replaced by
// theirs, or cleared, and its error output is superseded (moved to the item's output history)
// in the same transaction.
//
// A failed or canceled job also gets the work its end left unstarted: steps whose needs were
// met after the job ended become ready, and items that settled while it was ended (without
// waiting for children.done or external events) are settled again.
//
// Retry returns an error wrapping [ErrNotRetryable] for a running job, one wrapping
// [ErrNothingToRetry] for a job with no failed or canceled task, and one wrapping
// [store.ErrNotFound] for an unknown job.
//
// In a process whose workers run, the retry commits in their writer ([Engine.AttachWriter]):
// a transaction of its own would contend with the workers' transactions for the same item rows
// (on Postgres, a deadlock). Otherwise it runs a transaction of its own.
func (e *Engine) Retry(ctx context.Context, jobID int64) (*record.Job, error) {
	if err := e.write(ctx, func(t *Tx) error { return t.Retry(jobID) }); err != nil {
		return nil, err
	}
	return e.store.JobGet(ctx, jobID)
}

// ErrorOutputKind is the kind of output that reports an item's error: the documents workflow's
// ingest writes one, and a cancel writes one for each item it settles. It is superseded, never
// deleted, when a new result of the item replaces the error.
const ErrorOutputKind = store.OutputError

// retryPage is how many failed tasks a retry reads per query.
const retryPage = 10_000

// Retry does what [Engine.Retry] does, inside the transaction.
func (t *Tx) Retry(jobID int64) error { return t.t.retry(jobID) }

func (t *tx) retry(jobID int64) error {
	def, job, err := t.def(jobID)
	if err != nil {
		return fmt.Errorf("retry job %d: %w", jobID, err)
	}
	if job.State == record.JobRunning {
		return fmt.Errorf("%w: job %d is running; wait for it to end", ErrNotRetryable, jobID)
	}
	ended := job.State == record.JobFailed || job.State == record.JobCanceled
	states := []record.TaskState{record.TaskFailed}
	if ended {
		states = append(states, record.TaskCanceled)
	}
	var tasks []*record.Task
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
	nothing := fmt.Errorf("%w: job %d has no failed or canceled tasks", ErrNothingToRetry, jobID)
	if len(tasks) == 0 && !ended {
		return nothing
	}
	ok, err := t.x.JobReopen(t.ctx, jobID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: job %d changed state during the retry", ErrNotRetryable, jobID)
	}
	job.State, job.Error = record.JobRunning, ""
	t.touched[jobID] = true
	// By item, in the order read: an item's collectors wait for its other retried tasks.
	byItem := map[int64][]*record.Task{}
	var items []int64
	for _, task := range tasks {
		if byItem[task.ItemID] == nil {
			items = append(items, task.ItemID)
		}
		byItem[task.ItemID] = append(byItem[task.ItemID], task)
	}
	for _, itemID := range items {
		if err := t.retryItem(def, itemID, byItem[itemID]); err != nil {
			return err
		}
	}
	if !ended {
		return nil
	}
	// A cancel settles items whose next task was not made yet (a child not yet detected, a
	// step whose needs fired as the job ended): such a job has no canceled task, and its
	// unprocessed files are found by resume alone. With nothing found either, the whole
	// transaction, the job's reopening included, is rolled back.
	acted, err := t.resume(def, jobID)
	if err != nil {
		return err
	}
	if len(tasks) == 0 && !acted {
		return nothing
	}
	return nil
}

// retryItem retries the item's failed (or canceled) tasks. When one of them is not a collector,
// the item's collectors (failed, canceled, or complete: they ran on the failed result) go back
// to blocked, to run once the others are done; the rest become ready.
func (t *tx) retryItem(def *workflow.Definition, itemID int64, retried []*record.Task) error {
	collector := func(tk *record.Task) bool {
		s := def.Step(tk.Step)
		return s != nil && slices.Contains(s.Needs, workflow.EventChildrenDone)
	}
	block := map[int64]*record.Task{}
	if slices.ContainsFunc(retried, func(tk *record.Task) bool { return !collector(tk) }) {
		all, err := t.tasksOf(itemID)
		if err != nil {
			return err
		}
		for _, tk := range all {
			if collector(tk) && (tk.State == record.TaskComplete || tk.State == record.TaskFailed || tk.State == record.TaskCanceled) {
				block[tk.ID] = tk
			}
		}
	}
	for _, tk := range retried {
		if block[tk.ID] == nil {
			if err := t.retryTask(def, tk, false); err != nil {
				return err
			}
		}
	}
	for _, tk := range block {
		if err := t.retryTask(def, tk, true); err != nil {
			return err
		}
	}
	delete(t.tasks, itemID)
	if err := t.reopen(itemID); err != nil {
		return err
	}
	// The item has a ready task: it cannot settle in this transaction.
	t.busy[itemID] = true
	return nil
}

// retryTask puts a task back to ready (or blocked) with a fresh attempt budget. Its last attempt
// is recorded first: the task row is about to be reused for the next one, and the history keeps
// every run.
func (t *tx) retryTask(def *workflow.Definition, tk *record.Task, blocked bool) error {
	budget := tk.MaxAttempts
	if s := def.Step(tk.Step); s != nil {
		budget = s.MaxAttempts()
	}
	if tk.Attempt > 0 {
		// A worker's failed or canceled attempt is recorded already (a no-op then); an inline
		// step's failure and a completed attempt live only in the task row until now.
		if err := t.x.AttemptInsert(t.ctx, store.AttemptInsertParams{TaskID: tk.ID, Attempt: tk.Attempt, Owner: tk.LastWorker,
			StartedAt: tk.StartedAt, FinishedAt: tk.FinishedAt, Error: tk.Error}); err != nil {
			return err
		}
	}
	ok, err := t.x.TaskRetry(t.ctx, store.TaskRetryParams{ID: tk.ID, MaxAttempts: tk.Attempt + budget, Now: t.now, Blocked: blocked})
	if err != nil || !ok {
		return err
	}
	if !blocked {
		t.readyIn(tk.Queue)
	}
	return nil
}

// reopen moves an item back to written and its ingested ancestors back to processed: their
// subtree is open again. The item keeps its error until a new result replaces it (see
// [tx.reviseError]).
func (t *tx) reopen(itemID int64) error {
	it, err := t.item(itemID)
	if err != nil {
		return err
	}
	if it.State != record.ItemWritten {
		t.stale[it.ID] = true
		if _, err := t.x.ItemReopen(t.ctx, store.ItemReopenParams{ID: it.ID, To: record.ItemWritten}); err != nil {
			return err
		}
		it.State, it.Colored = record.ItemWritten, 0
	}
	for id := it.ParentID; id != 0; {
		p, err := t.item(id)
		if err != nil {
			return err
		}
		if p.State != record.ItemIngested {
			break // an unfinished item's ancestors are unfinished already
		}
		t.stale[p.ID] = true
		if _, err := t.x.ItemReopen(t.ctx, store.ItemReopenParams{ID: p.ID, To: record.ItemProcessed}); err != nil {
			return err
		}
		p.State = record.ItemProcessed
		id = p.ParentID
	}
	return nil
}

// resume finds what a failed or canceled job left unstarted: while a job is not running, fired events make no
// task ready and items settle without waiting for children.done or external events. For every
// item it makes ready the steps whose needs have all fired, and reopens for settling the items
// with a step that an event still to come (children.done, external) could unblock.
//
// It reports whether it found anything: a task made ready, or an item reopened for settling.
func (t *tx) resume(def *workflow.Definition, jobID int64) (acted bool, err error) {
	after := ""
	for {
		items, err := t.x.ItemList(t.ctx, store.ItemListParams{JobID: jobID, AfterSort: after, Limit: 1000})
		if err != nil {
			return acted, fmt.Errorf("resume job %d: %w", jobID, err)
		}
		for _, it := range items {
			a, err := t.resumeItem(def, it)
			if err != nil {
				return acted, err
			}
			acted = acted || a
		}
		if len(items) < 1000 {
			return acted, nil
		}
		after = items[len(items)-1].SortKey
	}
}

func (t *tx) resumeItem(def *workflow.Definition, listed *record.Item) (bool, error) {
	// Not through t.itemEvents: caching every item's events would hold the whole job in memory.
	ev, err := t.eventsOnce(listed.ID)
	if err != nil {
		return false, err
	}
	tasks, err := t.tasksOf(listed.ID)
	if err != nil {
		return false, err
	}
	has := make(map[string]bool, len(tasks))
	made, unsettled := false, false
	for _, tk := range tasks {
		has[tk.Step] = true
		// A collector blocked by an earlier retry runs once its item settles again.
		unsettled = unsettled || tk.State == record.TaskBlocked
	}
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
				return false, err
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
		return true, t.reopen(listed.ID)
	case t.busy[listed.ID]:
		return false, nil // a retried task is ready
	case listed.State == record.ItemWritten:
		// Left written by the failure (its ready tasks were canceled, and retried above if
		// any): let settle decide.
		t.markDirty(listed)
		return true, nil
	case unsettled:
		if err := t.reopen(listed.ID); err != nil {
			return false, err
		}
		// Settle fires children.done, or leaves the item waiting for its external event.
		t.markDirty(listed)
		return true, nil
	}
	return false, nil
}

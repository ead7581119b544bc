package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Attempt is one run of one of an item's tasks, as [Engine.ItemHistory] returns it.
type Attempt struct {
	TaskID  int64
	ItemID  int64
	Step    string
	Action  string
	Attempt int
	// State is how the attempt ended: complete, failed (a transient error retried, or the
	// last), canceled; or the task's state for its attempt in progress (running).
	State record.TaskState
	// Worker is the lease owner that ran it (a remote worker's name for a remote step), or
	// the engine's own name ([Engine.Owner]) for a step it ran inline.
	Worker string
	// QueuedAt is when the task was made ready (the step's event fired for the item): the
	// first attempt waited from then until StartedAt.
	QueuedAt   time.Time
	StartedAt  time.Time
	FinishedAt time.Time // zero while it runs
	Error      string
}

// ItemHistory returns every attempt of every task of the item, in task then attempt order: the
// ones recorded as they ended (failures, cancels, and the runs a retry reused the task row for)
// and the task row's own last attempt. A retry deletes none of them.
func (e *Engine) ItemHistory(ctx context.Context, itemID int64) ([]Attempt, error) {
	tasks, err := e.store.TaskListByItem(ctx, itemID)
	if err != nil {
		return nil, fmt.Errorf("history of item %d: %w", itemID, err)
	}
	out, err := e.attempts(ctx, tasks)
	if err != nil {
		return nil, fmt.Errorf("history of item %d: %w", itemID, err)
	}
	return out, nil
}

// JobHistory returns the attempts of the job's tasks after the task afterTask (0: from the
// first), at most limit tasks' worth, in task then attempt order, as [Engine.ItemHistory] tells
// them; last is the id of the last task read, 0 when there are no more. A task with no attempt of
// its own yet (ready, blocked, parked, skipped) is left out of the page but counted in it.
func (e *Engine) JobHistory(ctx context.Context, jobID, afterTask int64, limit int) (atts []Attempt, last int64, err error) {
	if limit <= 0 {
		limit = 100
	}
	tasks, err := e.store.TaskListByJob(ctx, store.TaskListParams{JobID: jobID, AfterID: afterTask, Limit: limit})
	if err != nil {
		return nil, 0, fmt.Errorf("history of job %d: %w", jobID, err)
	}
	out, err := e.attempts(ctx, tasks)
	if err != nil {
		return nil, 0, fmt.Errorf("history of job %d: %w", jobID, err)
	}
	if len(tasks) == limit {
		last = tasks[len(tasks)-1].ID
	}
	return out, last, nil
}

// attempts returns every attempt of the tasks, in their order then attempt order.
func (e *Engine) attempts(ctx context.Context, tasks []*record.Task) ([]Attempt, error) {
	var out []Attempt
	for _, tk := range tasks {
		recorded, err := e.store.AttemptList(ctx, tk.ID)
		if err != nil {
			return nil, err
		}
		last := false
		for _, a := range recorded {
			state := record.TaskFailed
			switch a.Error {
			case "":
				state = record.TaskComplete
			case CanceledError, JobFailedError:
				state = record.TaskCanceled
			}
			out = append(out, Attempt{TaskID: tk.ID, ItemID: tk.ItemID, Step: tk.Step, Action: tk.Action, Attempt: a.Attempt, State: state,
				Worker: a.Owner, QueuedAt: tk.CreatedAt, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Error: a.Error})
			last = last || a.Attempt == tk.Attempt
		}
		// The row's attempt, unless recorded: one in progress (its worker holds the lease), one
		// that completed, or an inline step's (its worker kept as the last). A ready, blocked or
		// skipped task has none of its own yet.
		if last || tk.Attempt == 0 || tk.State == record.TaskReady || tk.State == record.TaskBlocked || tk.State == record.TaskParked {
			continue
		}
		worker := tk.LastWorker
		if tk.State == record.TaskRunning {
			worker = tk.LeaseOwner
		}
		out = append(out, Attempt{TaskID: tk.ID, ItemID: tk.ItemID, Step: tk.Step, Action: tk.Action, Attempt: tk.Attempt, State: tk.State,
			Worker: worker, QueuedAt: tk.CreatedAt, StartedAt: tk.StartedAt, FinishedAt: tk.FinishedAt, Error: tk.Error})
	}
	return out, nil
}

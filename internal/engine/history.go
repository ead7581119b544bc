package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/record"
)

// Attempt is one run of one of an item's tasks, as [Engine.ItemHistory] returns it.
type Attempt struct {
	TaskID  int64
	Step    string
	Action  string
	Attempt int
	// State is how the attempt ended: complete, failed (a transient error retried, or the
	// last), canceled; or the task's state for its attempt in progress (running).
	State record.TaskState
	// Worker is the lease owner that ran it (a remote worker's name for a remote step), or
	// the engine's own name ([Engine.Owner]) for a step it ran inline.
	Worker     string
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
	var out []Attempt
	for _, tk := range tasks {
		recorded, err := e.store.AttemptList(ctx, tk.ID)
		if err != nil {
			return nil, fmt.Errorf("history of item %d: %w", itemID, err)
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
			out = append(out, Attempt{TaskID: tk.ID, Step: tk.Step, Action: tk.Action, Attempt: a.Attempt, State: state,
				Worker: a.Owner, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Error: a.Error})
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
		out = append(out, Attempt{TaskID: tk.ID, Step: tk.Step, Action: tk.Action, Attempt: tk.Attempt, State: tk.State,
			Worker: worker, StartedAt: tk.StartedAt, FinishedAt: tk.FinishedAt, Error: tk.Error})
	}
	return out, nil
}

package engine

import (
	"sync"

	"github.com/sluice-project/sluice/internal/record"
)

// liveProgress holds the progress running tasks reported but did not commit: what a remote
// worker's progress fragments say between two children. It lives in memory only (a restart
// forgets it, and the job's fraction falls back to what its rows say); [Engine.Progress] adds it
// to the colored part of the task's job.
type liveProgress struct {
	mu sync.Mutex
	// byTask is the uncommitted colored amount of each running task, with its job.
	byTask map[int64]liveTask
}

type liveTask struct {
	jobID  int64
	amount float64
}

// ReportProgress records that a running task of item it (as it was when the task was handed
// out) reached fraction (0..1) of its work. Only the task's own slice counts — fraction of the
// part of the item's range it colors when it completes (its weight, less what the item's
// steps colored already) — never the part its children will cover: a child starts from
// nothing, and the bar must not move back when a reported fraction turns into children. The
// amount counts in [Engine.Progress] until [Engine.ClearProgress]; it is never more than the
// task's commit colors. Safe for concurrent use.
func (e *Engine) ReportProgress(task *record.Task, it *record.Item, fraction float64) {
	fraction = min(max(fraction, 0), 1)
	w := min(max(task.ProgressWeight, 0), 1)
	amount := fraction * max(0, w*it.RangeLen-it.Colored)
	e.live.mu.Lock()
	defer e.live.mu.Unlock()
	if e.live.byTask == nil {
		e.live.byTask = map[int64]liveTask{}
	}
	if prev, ok := e.live.byTask[task.ID]; ok && prev.amount > amount {
		amount = prev.amount
	}
	e.live.byTask[task.ID] = liveTask{jobID: task.JobID, amount: amount}
}

// ClearProgress forgets the progress [Engine.ReportProgress] recorded for a task: call it when
// the task's result is committed (or given up). Safe for concurrent use.
func (e *Engine) ClearProgress(taskID int64) {
	e.live.mu.Lock()
	defer e.live.mu.Unlock()
	delete(e.live.byTask, taskID)
}

// liveAmount is the uncommitted progress of a job's running tasks.
func (e *Engine) liveAmount(jobID int64) float64 {
	e.live.mu.Lock()
	defer e.live.mu.Unlock()
	var sum float64
	for _, lt := range e.live.byTask {
		if lt.jobID == jobID {
			sum += lt.amount
		}
	}
	return sum
}

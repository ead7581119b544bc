package worker

import (
	"context"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workflow"
)

// errParked ends a task's run without a result: it was parked on another task's claim, in the
// claim's transaction.
var errParked = engine.ErrParked

// keyed applies the step's claim and limit before its action runs ([engine.Engine.TakeKeys]).
// done is true when res is the task's whole result (a claim's result reused) or the task was
// parked (errParked); err may be a snooze (a limit refused it).
func (w *Worker) keyed(ctx context.Context, t *record.Task, step *workflow.Step, it *record.Item, res *engine.Result) (done bool, err error) {
	wfName := ""
	if step.Claim != nil {
		if wfName, _, err = w.jobWorkflow(ctx, t.JobID); err != nil {
			return false, err
		}
	}
	done, err = w.e.TakeKeys(ctx, w.commit.do, wfName, step, t, it, res)
	if done && err == nil {
		w.stats.count(t.Action, true)
	}
	return done, err
}

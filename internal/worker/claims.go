package worker

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/workflow"
)

// errParked ends a task's run without a result: it was parked on another task's claim, in the
// claim's transaction.
var errParked = errors.New("parked on a claim")

// limitRetry is how long a task refused by a limit's concurrency waits before it asks again
// (jittered ±50 %): slots free as tasks end, which nothing announces.
const limitRetry = 200 * time.Millisecond

// keyed applies the step's claim and limit before its action runs. done is true when res is
// the task's whole result (a claim's result reused) or the task was parked (errParked); err
// may be a snooze (a limit refused it).
func (w *Worker) keyed(ctx context.Context, t *record.Task, step *workflow.Step, it *record.Item, res *engine.Result) (done bool, err error) {
	if step.Claim != nil {
		wfName, _, err := w.jobWorkflow(ctx, t.JobID)
		if err != nil {
			return false, err
		}
		key, err := engine.ClaimKey(wfName, step, it)
		if err != nil {
			return false, action.Permanent(err)
		}
		var got engine.ClaimAttempt
		var recorded []byte
		if err := w.commit.do(ctx, func(tx *engine.Tx) error {
			var err error
			got, recorded, err = engine.TakeClaim(tx, t, key)
			return err
		}); err != nil {
			return false, err
		}
		switch got {
		case engine.ClaimParked, engine.ClaimLost:
			return true, errParked
		case engine.ClaimReuse:
			w.stats.count(t.Action, true)
			return true, engine.ReuseClaim(res, recorded, step)
		}
	}
	if step.Limit != nil {
		key, err := engine.LimitKey(step, it)
		if err != nil {
			return false, action.Permanent(err)
		}
		var ok bool
		var wait time.Duration
		if err := w.commit.do(ctx, func(tx *engine.Tx) error {
			var err error
			ok, wait, err = engine.AcquireLimit(tx, t, step, key)
			return err
		}); err != nil {
			return false, err
		}
		if !ok {
			if wait == 0 {
				wait = time.Duration(float64(limitRetry) * (0.5 + rand.Float64()))
			}
			return true, action.Snooze(wait)
		}
	}
	return false, nil
}

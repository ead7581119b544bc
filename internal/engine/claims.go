package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/when"
	"github.com/sluice-project/sluice/internal/workflow"
)

// templates caches parsed key templates by source: workflows are few and immutable.
var templates sync.Map // string → *when.Template

func template(src string) (*when.Template, error) {
	if t, ok := templates.Load(src); ok {
		return t.(*when.Template), nil
	}
	t, err := when.ParseTemplate(src)
	if err != nil {
		return nil, err
	}
	templates.Store(src, t)
	return t, nil
}

func renderKey(src string, it *record.Item) (string, error) {
	tm, err := template(src)
	if err != nil {
		return "", err
	}
	return tm.Render(when.Item{Depth: it.Depth, Name: it.Name, ContentType: it.ContentType,
		Metadata: metadataObject(it.Metadata), Options: jsonObject(it.Options)})
}

// ClaimKey returns the key a task of the step claims on the item, with its scope: tasks of
// one job ("job/12/resolve/left-pad@1.3") or of every job of the workflow's name
// ("installation/graph/resolve/left-pad@1.3"). Steps of different names never share a claim.
// An item that cannot render the key (a metadata value missing) is an error.
func ClaimKey(wfName string, s *workflow.Step, it *record.Item) (string, error) {
	k, err := renderKey(s.Claim.Key, it)
	if err != nil {
		return "", fmt.Errorf("claim key: %w", err)
	}
	if s.Claim.ScopeOrDefault() == workflow.ScopeInstallation {
		return "installation/" + wfName + "/" + s.Name + "/" + k, nil
	}
	return "job/" + strconv.FormatInt(it.JobID, 10) + "/" + s.Name + "/" + k, nil
}

// LimitKey returns the key of the step's limit on the item. Limits are shared by every step
// (of every workflow) whose key renders the same: "{{metadata.host}}" bounds a host whoever
// calls it.
func LimitKey(s *workflow.Step, it *record.Item) (string, error) {
	k, err := renderKey(s.Limit.Key, it)
	if err != nil {
		return "", fmt.Errorf("limit key: %w", err)
	}
	return k, nil
}

// claimResult is what a completed claimer leaves for the tasks that reuse its claim.
type claimResult struct {
	Metadata    map[string]any             `json:"metadata,omitempty"`
	Outputs     map[string]json.RawMessage `json:"outputs,omitempty"`
	Events      []string                   `json:"events,omitempty"`
	ContentType string                     `json:"content_type,omitempty"`
	Task        int64                      `json:"task"`
	Item        int64                      `json:"item"`
}

// ReuseClaim fills res, the result of a task that found its key's claim done, from the
// claim's recorded result, adding the step's reused events. The task completes with it
// without running its action.
func ReuseClaim(res *Result, recorded []byte, s *workflow.Step) error {
	var cr claimResult
	if err := metadata.Unmarshal(recorded, &cr); err != nil {
		return fmt.Errorf("decode the result of claim: %w", err)
	}
	res.Metadata, res.Outputs, res.ContentType = cr.Metadata, cr.Outputs, cr.ContentType
	res.Events = append(slices.Clone(cr.Events), s.Claim.Reused...)
	return nil
}

// finishClaim finishes the claim the task may hold as its attempt ends for good: done with
// its result when it completed, dropped when it failed or was canceled, and readies the tasks
// parked on it (waking workers like any ready task).
func (tt *tx) finishClaim(p pendingFinish) error {
	var data []byte
	if p.finish.State == record.TaskComplete {
		r := p.r
		var err error
		if data, err = json.Marshal(claimResult{Metadata: r.Metadata, Outputs: r.Outputs, Events: r.Events,
			ContentType: r.ContentType, Task: r.Task.ID, Item: r.Task.ItemID}); err != nil {
			return fmt.Errorf("task %d: record its claim's result: %w", r.Task.ID, err)
		}
	}
	queues, err := tt.x.ClaimFinish(tt.ctx, store.ClaimFinishParams{TaskID: p.r.Task.ID, Result: data, Now: tt.now})
	if err != nil {
		return err
	}
	tt.readied(queues)
	return nil
}

// ClaimAttempt is what [Engine.TakeClaim] decided for a task of a claim step.
type ClaimAttempt int

// The outcomes of [Engine.TakeClaim].
const (
	ClaimRun    ClaimAttempt = iota // the task holds the claim: run the action
	ClaimParked                     // another task holds it: the task is parked, nothing more to do
	ClaimReuse                      // the claim is done: complete with its result (ReuseClaim)
	ClaimLost                       // the task is no longer running this attempt
)

// TakeClaim claims key for the running task inside t, or parks the task (in the same
// transaction, so that a claim finished meanwhile is seen), or returns the done claim's result.
func TakeClaim(t *Tx, task *record.Task, key string) (ClaimAttempt, []byte, error) {
	x, ctx := t.t.x, t.t.ctx
	c, err := x.ClaimTake(ctx, store.ClaimTakeParams{Key: key, TaskID: task.ID, Now: t.t.now})
	if err != nil {
		return 0, nil, err
	}
	switch {
	case c.State == store.ClaimDone:
		return ClaimReuse, c.Result, nil
	case c.Holder == task.ID:
		return ClaimRun, nil, nil
	}
	ok, err := x.ClaimPark(ctx, store.ClaimParkParams{Key: key, TaskID: task.ID, Attempt: task.Attempt, Now: t.t.now})
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return ClaimLost, nil, nil
	}
	return ClaimParked, nil, nil
}

// AcquireLimit asks for a slot of the step's limit for the running task inside t. When it is
// refused it returns how long to wait before the task asks again.
func AcquireLimit(t *Tx, task *record.Task, s *workflow.Step, key string) (bool, time.Duration, error) {
	r, err := t.t.x.LimitAcquire(t.t.ctx, store.LimitAcquireParams{Key: key, TaskID: task.ID, Attempt: task.Attempt,
		Concurrency: s.Limit.Concurrency, Interval: s.Limit.Rate.Interval(), Now: t.t.now})
	if err != nil || r.OK {
		return r.OK, 0, err
	}
	if !r.Next.IsZero() {
		return false, max(r.Next.Sub(t.t.now), time.Millisecond), nil
	}
	return false, 0, nil
}

// releaseJobClaims drops the claims of a stopped job's canceled tasks, readying the tasks
// parked on them (in other jobs, for installation claims).
func (tt *tx) releaseJobClaims(ctx context.Context, jobID int64) error {
	queues, err := tt.x.ClaimReleaseJob(ctx, jobID, tt.now)
	if err != nil {
		return err
	}
	tt.readied(queues)
	return nil
}

// ErrParked ends a task's run without a result: [Engine.TakeKeys] parked it on another task's
// claim, in the claim's transaction.
var ErrParked = errors.New("parked on a claim")

// limitRetry is how long a task refused by a limit's concurrency waits before it asks again
// (jittered ±50 %): slots free as tasks end, which nothing announces.
const limitRetry = 200 * time.Millisecond

// TakeKeys applies the claim and the limit of the task's step (of the workflow named wf) before
// its action runs, each in a transaction do runs: whoever runs the action — a worker, or the
// server handing the task to a remote worker — calls it first. done is true when the action must
// not run: err is [ErrParked] (the task was parked), a snooze (the limit refused it for now), or
// nil with res filled with a done claim's result, which the task completes with.
//
// When the limit has a rate, TakeKeys returns once this process's previous start of the key is
// at least the rate's interval past by the wall clock (see [pacer]): the store's grant alone
// dates a start from its transaction's beginning, and a transaction that commits late would let
// two starts through together. It returns ctx's error if ctx ends meanwhile.
func (e *Engine) TakeKeys(ctx context.Context, do func(ctx context.Context, fn func(t *Tx) error) error, wf string, step *workflow.Step,
	task *record.Task, it *record.Item, res *Result) (done bool, err error) {
	if step.Claim != nil {
		key, err := ClaimKey(wf, step, it)
		if err != nil {
			return false, action.Permanent(err)
		}
		var got ClaimAttempt
		var recorded []byte
		if err := do(ctx, func(t *Tx) error {
			var err error
			got, recorded, err = TakeClaim(t, task, key)
			return err
		}); err != nil {
			return false, err
		}
		switch got {
		case ClaimParked, ClaimLost:
			return true, ErrParked
		case ClaimReuse:
			return true, ReuseClaim(res, recorded, step)
		}
	}
	if step.Limit != nil {
		key, err := LimitKey(step, it)
		if err != nil {
			return false, action.Permanent(err)
		}
		var ok bool
		var wait time.Duration
		if err := do(ctx, func(t *Tx) error {
			var err error
			ok, wait, err = AcquireLimit(t, task, step, key)
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
		if err := e.pace.wait(ctx, key, step.Limit.Rate.Interval()); err != nil {
			return false, err
		}
	}
	return false, nil
}

package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Result is the outcome of one attempt of a task, with the effects to commit with it.
type Result struct {
	Task  *record.Task
	Owner string
	// Err is nil on success; see package action for the classes. Panics arrive as errors with Stack set.
	Err      error
	Stack    string
	TimedOut bool
	// Lost marks an attempt whose worker died: retried at once, as the task itself did not fail.
	Lost bool
	// Forgiven, with Lost, is how many of the task's lost attempts (this one included) do not
	// count against its bound: see [Engine.Reclaim].
	Forgiven int
	Started  time.Time
	// Effects are what the attempt did, applied when it completes (its events, and children
	// recorded with it, also when it fails for good).
	Effects
}

// LostAllowance is how many attempts lost to a dead process a task gets beyond its step's bound.
const LostAllowance = 10

// SuspectAllowance bounds how many lost attempts a task is forgiven for having merely been
// running beside others when its process died (see [Engine.Reclaim]); past it, such deaths count
// again, so a task that really kills its process still ends with a bounded, named error. A task
// alone at a death always pays, so a culprit that runs alone is found within its attempts and
// [LostAllowance]; this bounds only a culprit that always runs beside others. It must exceed the
// deaths a healthy task can witness in a crash loop: a conversion longer than the interval between
// kills is running at every one of them, and at 30 LibreOffice conversions failed ("failed 43
// times: worker lost") in the 60-kill corpus loop that CI runs (TestCorpusCrashLoop).
const SuspectAllowance = 100

// forgivenMark ends the error of a lost attempt that does not count; Reclaim counts them.
const forgivenMark = "; not counted: "

// Backoff returns the delay before retry number attempt (1-based): exponential from 1 s, capped at
// 10 minutes, with ±25 % jitter so a burst of failures does not retry in lockstep.
func Backoff(attempt int) time.Duration {
	d := time.Second << min(attempt-1, 10)
	d = min(d, 10*time.Minute)
	jitter := 0.75 + rand.Float64()/2
	return time.Duration(float64(d) * jitter)
}

// UnavailableBackoff is how long a task whose attempt failed because the blob store did not
// answer ([blob.ErrUnavailable]) waits before it runs again, unless [Config.UnavailableBackoff]
// says otherwise; the attempt is not counted.
const UnavailableBackoff = 5 * time.Second

// FullBackoff is how long a task whose attempt failed for a full disk waits before it runs
// again, its attempt given back: the disk is checked that often until there is space.
const FullBackoff = 5 * time.Second

// diskFull reports an error of a full disk: the database's (store.ErrFull) or a file's (ENOSPC,
// a blob or an action's output that could not be written).
func diskFull(err error) bool {
	return errors.Is(err, store.ErrFull) || errors.Is(err, syscall.ENOSPC)
}

// Apply commits a batch of results in one transaction.
func (e *Engine) Apply(ctx context.Context, results []*Result) error {
	return e.Run(ctx, func(t *Tx) error { return t.applyEach(results) })
}

// Apply commits one result inside the transaction. Its writes are made when the transaction's
// callback returns, together with the other results of the transaction: one statement per kind
// of write for the whole batch (TaskSetStateIfRunningMany, ItemLockMany), which on a networked database
// saves a round trip per write. An error in applying it fails the transaction.
func (t *Tx) Apply(r *Result) error {
	if len(r.Children) > 0 {
		if err := t.CreateChildren(r.Children); err != nil {
			return err
		}
	}
	t.t.results = append(t.t.results, r)
	return nil
}

// ApplyAll is Apply for each of rs in order. When their children have distinct parents (one
// result's children each), they are recorded together, after one read of the parents not read
// yet: two statements for the lot instead of two per result, each a round trip on a networked
// database. Results that share a parent are applied one by one, as Apply does.
func (t *Tx) ApplyAll(rs []*Result) error {
	var cs []*NewChild
	var parents []int64
	owner := map[int64]*Result{}
	for _, r := range rs {
		for _, c := range r.Children {
			id := c.Task.ItemID
			o, seen := owner[id]
			if seen && o != r {
				return t.applyEach(rs)
			}
			if !seen {
				owner[id] = r
				parents = append(parents, id)
			}
			cs = append(cs, c)
		}
	}
	if len(cs) > 0 {
		if err := t.t.peekParents(parents); err != nil {
			return err
		}
		if err := t.CreateChildren(cs); err != nil {
			return err
		}
	}
	t.t.results = append(t.t.results, rs...)
	return nil
}

func (t *Tx) applyEach(rs []*Result) error {
	for _, r := range rs {
		if err := t.Apply(r); err != nil {
			return err
		}
	}
	return nil
}

// Release gives back the lease of a task whose worker stopped before its result (the end of a
// stop's drain, or leases taken as the worker stopped), in the transaction. In a running job the
// task is ready again at its attempt, the attempt not spent, for another process or the next
// start. In a job that ended — canceled, or failed by the event fail, from another process whose
// cancel this worker never heard of — it ends canceled as a canceled result does, and its item
// settles with the job's error: a ready task there would be run by no one and leave its item
// written, counted neither as a document nor as an error.
func (t *Tx) Release(task *record.Task, owner string) error {
	job, err := t.t.job(task.JobID)
	if err != nil {
		return err
	}
	if job.State != record.JobRunning {
		return t.Apply(&Result{Task: task, Owner: owner, Err: context.Canceled, Started: task.StartedAt})
	}
	_, err = t.t.x.TaskFinish(t.t.ctx, store.TaskFinishParams{ID: task.ID, Attempt: task.Attempt, State: record.TaskReady, Refund: true, Now: t.t.now})
	return err
}

// pendingFinish is a result with the task write it makes.
type pendingFinish struct {
	r       *Result
	finish  store.TaskFinishParams
	itemErr string
	fire    []string
	// only: the task is its item's only one (a one-step workflow), so after its finish the
	// item's tasks are known without reading them.
	only bool
	// claim: its step claims keys (claim:), so the claim it may hold ends with the attempt.
	claim bool
}

// applyResults applies the queued results: their attempts and task finishes, then the items of the
// tasks whose lease held are locked in one call (in id order, so concurrent processes lock in the
// same order) and get their effects.
func (tt *tx) applyResults() error {
	results := tt.results
	tt.results = nil
	if len(results) == 0 {
		return nil
	}
	pend := make([]pendingFinish, 0, len(results))
	for _, r := range results {
		p, err := tt.prepareFinish(r)
		if err != nil {
			return err
		}
		pend = append(pend, p)
	}
	params := make([]store.TaskFinishParams, len(pend))
	for i, p := range pend {
		params[i] = p.finish
	}
	oks, err := tt.x.TaskSetStateIfRunningMany(tt.ctx, params)
	if err != nil {
		return err
	}
	var lock []int64
	for i, p := range pend {
		// A lost lease (expired and re-leased, or canceled) voids the attempt's effects.
		if oks[i] {
			lock = append(lock, p.r.Task.ItemID)
		}
	}
	for i, p := range pend {
		if oks[i] && p.only {
			// Known before the effects, which forget it if they make a task ready.
			tk := *p.r.Task
			tk.State, tk.Error = p.finish.State, p.finish.Error
			tt.tasks[tk.ItemID] = []*record.Task{&tk}
		}
	}
	if err := tt.lockItems(lock); err != nil {
		return err
	}
	// Whether the events the results fire have fired on their items is read at once: no
	// statement per event, and only those events, not each item's whole set.
	var firing []int64
	var fire [][]string
	for i, p := range pend {
		if oks[i] && len(p.fire) > 0 {
			firing = append(firing, p.r.Task.ItemID)
			fire = append(fire, p.fire)
		}
	}
	if err := tt.readFiring(firing, fire); err != nil {
		return err
	}
	for i, p := range pend {
		if !oks[i] {
			continue
		}
		if p.claim && p.finish.State != record.TaskReady {
			if err := tt.finishClaim(p); err != nil {
				return err
			}
		}
		if err := tt.applyEffects(p); err != nil {
			return err
		}
	}
	return nil
}

// prepareFinish decides how r ends its task and records a failed attempt.
func (tt *tx) prepareFinish(r *Result) (pendingFinish, error) {
	task := r.Task
	def, job, err := tt.def(task.JobID)
	if err != nil {
		return pendingFinish{}, err
	}
	step := def.Step(task.Step)
	if step == nil {
		return pendingFinish{}, fmt.Errorf("task %d: step %q not in workflow %q v%d", task.ID, task.Step, def.Name, job.WorkflowVersion)
	}
	finish := store.TaskFinishParams{ID: task.ID, Attempt: task.Attempt, Now: tt.now, Started: task.StartedAt, Worker: r.Owner}
	var itemErr string
	var fire []string
	switch {
	case r.Err == nil:
		finish.State = record.TaskComplete
		fire = append(append(fire, step.Success...), r.Events...)
	case job.State != record.JobRunning || errors.Is(r.Err, context.Canceled) && job.State != record.JobRunning:
		finish.State = record.TaskCanceled
		finish.Error = endedError(job.State)
		// The item says so: it did not complete, and why.
		itemErr = finish.Error
		if err := tt.x.AttemptInsert(tt.ctx, store.AttemptInsertParams{TaskID: task.ID, Attempt: task.Attempt, Owner: r.Owner,
			StartedAt: r.Started, FinishedAt: tt.now, Error: finish.Error}); err != nil {
			return pendingFinish{}, err
		}
	default:
		if d, ok := action.AsSnooze(r.Err); ok {
			finish.State, finish.RunAfter, finish.Refund = record.TaskReady, tt.now.Add(d), true
			break
		}
		msg := cleanError(r.Err.Error())
		if diskFull(r.Err) {
			// A full disk says nothing about the input: the attempt is given back, and the
			// task waits for space instead of spending its attempts into an item error.
			finish.State, finish.Error, finish.RunAfter, finish.Refund = record.TaskReady, msg, tt.now.Add(FullBackoff), true
			break
		}
		if errors.Is(r.Err, blob.ErrUnavailable) && !r.TimedOut {
			// Nor does a blob store that does not answer (an S3 outage): the attempt is given
			// back and the task tries again after UnavailableBackoff, for as long as the outage
			// lasts, instead of spending its attempts into an item error.
			finish.State, finish.Error, finish.RunAfter, finish.Refund = record.TaskReady, msg, tt.now.Add(tt.e.cfg.UnavailableBackoff), true
			break
		}
		if r.TimedOut {
			msg = "timed out: " + msg
		}
		permanent := action.IsPermanent(r.Err) || errors.Is(r.Err, ErrNondeterministic)
		// An attempt lost because its process died (kill -9, power loss, a redeploy) says
		// nothing about the input; it gets LostAllowance more attempts on top of the step's, so
		// a crash-looping host does not turn healthy files into errors, while an input that
		// really kills its process still ends with a specific error.
		limit := task.MaxAttempts
		if r.Lost {
			limit += LostAllowance + r.Forgiven
		}
		if !permanent && task.Attempt < limit {
			finish.State, finish.Error, finish.RunAfter = record.TaskReady, msg, tt.now.Add(Backoff(task.Attempt))
			if r.Lost {
				finish.RunAfter = tt.now
			}
		} else {
			finish.State, finish.Error = record.TaskFailed, msg
			if !permanent {
				itemErr = fmt.Sprintf("%s failed %d times: %s", task.Action, task.Attempt, msg)
			} else {
				itemErr = msg
			}
			finish.Error = itemErr
			fire = append(fire, step.Failure...)
			if permanent {
				// Outcomes the action emitted before it failed for good name the failure's
				// cause (an http status mapped to a failure outcome): they fire with the
				// failure path. A transient error's events say nothing for sure.
				fire = append(fire, r.Events...)
			}
		}
		if err := tt.x.AttemptInsert(tt.ctx, store.AttemptInsertParams{TaskID: task.ID, Attempt: task.Attempt, Owner: r.Owner,
			StartedAt: r.Started, FinishedAt: tt.now, Error: msg, Stack: r.Stack}); err != nil {
			return pendingFinish{}, err
		}
	}
	return pendingFinish{r: r, finish: finish, itemErr: itemErr, fire: fire, only: len(def.Steps) == 1, claim: step.Claim != nil}, nil
}

// applyEffects writes a finished task's effects on its item.
func (tt *tx) applyEffects(p pendingFinish) error {
	r, task, finish, itemErr, fire := p.r, p.r.Task, p.finish, p.itemErr, p.fire
	it, err := tt.item(task.ItemID)
	if err != nil {
		return err
	}
	tt.markDirty(it)
	if finish.State == record.TaskReady {
		tt.readyIn(task.Queue)
		return nil
	}
	up := store.ItemUpdateParams{ID: it.ID, Error: itemErr}
	if finish.State == record.TaskComplete {
		r.Effects.sanitize()
		up.Text, up.ThumbnailSHA, up.ThumbnailType, up.ContentType = r.Text, r.ThumbnailSHA, r.ThumbnailType, r.ContentType
		if up.ContentType == it.ContentType {
			up.ContentType = "" // detect confirming a type the item was created with: nothing to write
		}
		// Progress is colored in memory and written once at the end of the transaction, unless
		// the item is ingested by then (which colors all of it anyway).
		it.Colored = min(it.Share, it.Colored+task.ProgressWeight*it.RangeLen)
		tt.colored[it.ID] = true
		if len(r.Metadata) > 0 {
			if up.Metadata, err = json.Marshal(r.Metadata); err != nil {
				return fmt.Errorf("task %d metadata: %w", task.ID, err)
			}
		}
	}
	if finish.State == record.TaskComplete || finish.State == record.TaskFailed {
		if err := tt.publishTask(it, task, finish.State, itemErr, r); err != nil {
			return err
		}
	}
	if up.Text != nil || up.ThumbnailSHA != "" || up.Metadata != nil || up.ContentType != "" || up.Error != "" {
		if err := tt.x.ItemUpdate(tt.ctx, up); err != nil {
			return err
		}
		tt.stale[it.ID] = true
		if it.Error == "" {
			it.Error = up.Error
		}
		if up.ContentType != "" {
			it.ContentType = up.ContentType
		}
		if up.Text != nil {
			it.HasText = true
		}
	}
	if finish.State == record.TaskComplete {
		// Followed at the end of the transaction (followOutputs), after the item's update.
		for kind, v := range r.Outputs {
			o := store.OutputPutParams{ItemID: it.ID, JobID: it.JobID, Kind: kind, Value: v, Now: tt.now}
			if err := tt.x.OutputPut(tt.ctx, o); err != nil {
				return err
			}
			tt.recorded = append(tt.recorded, o)
		}
		if len(r.Writes) > 0 {
			if err := tt.applyWrites(task, r.Writes); err != nil {
				return err
			}
		}
	}
	for _, ev := range fire {
		if err := tt.fire(it, ev); err != nil {
			return err
		}
	}
	return nil
}

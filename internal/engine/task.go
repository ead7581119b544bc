package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// Result is the outcome of one attempt of a leased task, with the effects to commit with it.
type Result struct {
	Task  *store.Task
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

	Text          *string
	ThumbnailSHA  string
	ThumbnailType string
	Metadata      map[string]any
	ContentType   string
	Events        []string
	Outputs       map[string]json.RawMessage
	// Writes are the task's domain writes (see [Domain]), applied when it completes.
	Writes []DomainWrite
	// Children are recorded by [Tx.Apply], in the result's transaction: the children whose blobs
	// became durable only after the action returned, so that they and the result commit together.
	Children []*NewChild
}

// LostAllowance is how many attempts lost to a dead process a task gets beyond its step's bound.
const LostAllowance = 10

// SuspectAllowance bounds how many lost attempts a task is forgiven for having merely been
// running beside others when its process died (see [Engine.Reclaim]); past it, such deaths count
// again, so a task that really kills its process still ends with a bounded, named error.
const SuspectAllowance = 30

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

// Apply commits a batch of results in one transaction.
func (e *Engine) Apply(ctx context.Context, results []*Result) error {
	return e.Run(ctx, func(t *Tx) error {
		for _, r := range results {
			if err := t.Apply(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// Apply commits one result inside the transaction. Its writes are made when the transaction's
// callback returns, together with the other results of the transaction: one statement per kind
// of write for the whole batch (TaskFinishMany, ItemLockMany), which on a networked database
// saves a round trip per write. An error in applying it fails the transaction.
func (t *Tx) Apply(r *Result) error {
	for _, c := range r.Children {
		if err := t.CreateChild(c); err != nil {
			return err
		}
	}
	t.t.results = append(t.t.results, r)
	return nil
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
	oks, err := tt.x.TaskFinishMany(tt.ctx, params)
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
			tk.State = p.finish.State
			tt.tasks[tk.ItemID] = []*store.Task{&tk}
		}
	}
	if err := tt.lockItems(lock); err != nil {
		return err
	}
	for i, p := range pend {
		if !oks[i] {
			continue
		}
		if p.claim && p.finish.State != store.TaskReady {
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
	finish := store.TaskFinishParams{ID: task.ID, Attempt: task.Attempt, Now: tt.now, Held: task.Held, Started: task.StartedAt}
	var itemErr string
	var fire []string
	switch {
	case r.Err == nil:
		finish.State = store.TaskComplete
		fire = append(append(fire, step.Success...), r.Events...)
	case job.State != store.JobRunning || errors.Is(r.Err, context.Canceled) && job.State != store.JobRunning:
		finish.State = store.TaskCanceled
		finish.Error = "canceled"
		// The item says so: it did not complete (a canceled item used to end ingested with no
		// error, as if its work were done).
		itemErr = "canceled"
	default:
		if d, ok := action.AsSnooze(r.Err); ok {
			finish.State, finish.RunAfter, finish.Refund = store.TaskReady, tt.now.Add(d), true
			break
		}
		msg := r.Err.Error()
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
			finish.State, finish.Error, finish.RunAfter = store.TaskReady, msg, tt.now.Add(Backoff(task.Attempt))
			if r.Lost {
				finish.RunAfter = tt.now
			}
		} else {
			finish.State, finish.Error = store.TaskFailed, msg
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
	if finish.State == store.TaskReady {
		tt.ready = true
		tt.readyQueues[task.Queue] = true
		return nil
	}
	up := store.ItemUpdateParams{ID: it.ID, Error: itemErr}
	if finish.State == store.TaskComplete {
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
	if finish.State == store.TaskComplete || finish.State == store.TaskFailed {
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
	if finish.State == store.TaskComplete {
		// After the item's update: a document output indexes the item's text as it now is.
		for kind, v := range r.Outputs {
			if err := tt.x.OutputPut(tt.ctx, store.OutputPutParams{ItemID: it.ID, JobID: it.JobID, Kind: kind, Value: v, Now: tt.now}); err != nil {
				return err
			}
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

// NewChild is a child to record for a running task; its blob is already durable.
type NewChild struct {
	Task    *store.Task
	Ordinal int
	// KeepExisting keeps a child that exists at the same ordinal as it is, whatever this one
	// holds, instead of failing the task as nondeterministic: the worker protocol's rule for a
	// replay (an unmodified converter's output may differ between runs, a PDF's dates say).
	KeepExisting  bool
	Name          string
	ContentType   string
	BlobSHA256    string
	Size          int64
	Metadata      map[string]any
	Options       map[string]any
	Text          *string
	ThumbnailSHA  string
	ThumbnailType string
	// ProgressFrom and ProgressTo are the task's reported progress before the previous child and
	// before this one: the child gets that slice of the part of the parent not colored by the task.
	ProgressFrom, ProgressTo float64
}

// CreateChild records a child of the task's item and fires start on it. The child inherits the
// parent's metadata and options; its own keys win. A child that exists at
// the same (parent, step, ordinal) is left alone when it matches and is an [ErrNondeterministic]
// error when it differs.
func (t *Tx) CreateChild(c *NewChild) error {
	tt := t.t
	parent, err := tt.item(c.Task.ItemID)
	if err != nil {
		return err
	}
	if parent.NChildren <= c.Ordinal { // not a replay of a child that exists
		if err := tt.e.checkChild(parent.JobID, parent.Depth+1); err != nil {
			return err
		}
	}
	var pmd, popts map[string]any
	if err := unmarshalObjects(parent.Metadata, &pmd, parent.Options, &popts); err != nil {
		return fmt.Errorf("item %d: %w", parent.ID, err)
	}
	md, err := json.Marshal(merge(pmd, c.Metadata))
	if err != nil {
		return fmt.Errorf("child %q metadata: %w", c.Name, err)
	}
	opts, err := json.Marshal(merge(popts, c.Options))
	if err != nil {
		return fmt.Errorf("child %q options: %w", c.Name, err)
	}
	w := c.Task.ProgressWeight
	rest := parent.RangeLen * (1 - w)
	lo := parent.RangeLo + parent.RangeLen*w + rest*c.ProgressFrom
	length := max(0, rest*(c.ProgressTo-c.ProgressFrom))
	it, inserted, err := tt.x.ItemInsert(tt.ctx, store.ItemInsertParams{
		JobID: parent.JobID, ParentID: parent.ID, RootID: parent.RootID, Step: c.Task.Step, Ordinal: c.Ordinal,
		Depth: parent.Depth + 1, SortKey: fmt.Sprintf("%s%08x", parent.SortKey, c.Ordinal), Name: c.Name,
		ContentType: c.ContentType, BlobSHA256: c.BlobSHA256, Size: c.Size, Metadata: md, Options: opts,
		Text: c.Text, ThumbnailSHA: c.ThumbnailSHA, ThumbnailType: c.ThumbnailType, RangeLo: lo, RangeLen: length, Now: tt.now,
	})
	if err != nil {
		return err
	}
	if !inserted {
		if c.KeepExisting {
			return nil
		}
		// The content type is not compared: detect may have refined it since.
		if it.Name != c.Name || it.BlobSHA256 != c.BlobSHA256 {
			return fmt.Errorf("%w: child %d of %q was %q (sha256 %.12s), replay made %q (sha256 %.12s)",
				ErrNondeterministic, c.Ordinal, parent.Name, it.Name, it.BlobSHA256, c.Name, c.BlobSHA256)
		}
		return nil
	}
	tt.addChild(parent.ID, length)
	parent.NChildren++
	parent.Share = max(0, parent.Share-length)
	tt.items[it.ID] = it
	tt.events[it.ID] = map[string]bool{}
	tt.fresh[it.ID] = nil
	tt.kids[parent.ID] = append(tt.kids[parent.ID], it)
	return tt.fire(it, workflow.EventStart)
}

// forgive decides whether a task's lost attempt counts against its bound. It does not when the
// attempt made durable progress (it committed children: an unpack resumes after them, so a task
// longer than the interval between crashes still finishes), nor when the task was only a suspect
// (others ran beside it when the process died) and has been forgiven that fewer than
// [SuspectAllowance] times. It returns the note for the attempt's error and how many lost
// attempts of the task, this one included, are forgiven.
func (tt *tx) forgive(task *store.Task, suspect bool, running int) (string, int, error) {
	atts, err := tt.x.AttemptList(tt.ctx, task.ID)
	if err != nil {
		return "", 0, err
	}
	forgiven, suspected := 0, 0
	for _, a := range atts {
		if i := strings.Index(a.Error, forgivenMark); i >= 0 {
			forgiven++
			if strings.Contains(a.Error[i:], "a suspect") {
				suspected++
			}
		}
	}
	kids, err := tt.x.ItemListChildren(tt.ctx, task.ItemID, task.Step)
	if err != nil {
		return "", 0, err
	}
	made := 0
	for _, k := range kids {
		if !k.CreatedAt.Before(task.StartedAt) {
			made++
		}
	}
	switch {
	case made > 0:
		return fmt.Sprintf("%sit committed %d children first", forgivenMark, made), forgiven + 1, nil
	case suspect && suspected < SuspectAllowance:
		return fmt.Sprintf("%s%d tasks were running when the process died, so it is a suspect", forgivenMark, running), forgiven + 1, nil
	}
	return "", forgiven, nil
}

// ReclaimParams configures [Engine.Reclaim].
type ReclaimParams struct {
	// All reclaims every running task, not only expired ones: used by the embedded engine at
	// start, when the data-dir lock proves no other process runs them.
	All   bool
	Limit int
}

// Reclaim puts running tasks whose lease expired back to ready (their worker is gone), or fails
// them with a specific error once their attempts are spent (DESIGN §4.4). It returns how many
// tasks it reclaimed.
func (e *Engine) Reclaim(ctx context.Context, p ReclaimParams) (int, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	now := e.Now()
	cutoff := now
	if p.All {
		cutoff = time.Unix(1<<40, 0) // every running task
	}
	n := 0
	err := e.Run(ctx, func(t *Tx) error {
		// Held leases whose process died first become expired leases, reclaimed below.
		if _, err := t.t.x.HeldLeaseExpire(t.t.ctx, cutoff); err != nil {
			return err
		}
		tasks, err := t.t.x.TaskListExpired(t.t.ctx, cutoff, p.Limit)
		if err != nil {
			return err
		}
		n = len(tasks)
		// The embedded engine's restart reclaims everything its dead process ran: each of those
		// tasks is a suspect, not the culprit, when others ran beside it.
		suspects := p.All && len(tasks) > 1
		for _, task := range tasks {
			r := &Result{Task: task, Owner: task.LeaseOwner, Started: task.StartedAt, Lost: true}
			why, forgiven, err := t.t.forgive(task, suspects, len(tasks))
			if err != nil {
				return err
			}
			r.Forgiven = forgiven
			r.Err = fmt.Errorf("worker lost (lease of %s expired)%s", task.LeaseOwner, why)
			if err := t.Apply(r); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/tracing"
	"github.com/sluice-project/sluice/internal/workflow"
)

// run runs one leased task (it is the task's item when already read) and queues its result.
func (w *Worker) run(ctx context.Context, t *record.Task, it *record.Item, pf *prefetch) {
	defer w.done(t)
	res := &engine.Result{Task: t, Owner: w.cfg.Owner, Started: w.e.Now()}
	ctx, span := w.traceAttempt(ctx, t)
	defer func() { tracing.End(span, res.Err) }()
	var fin finishing
	begin := time.Now()
	err := w.execute(ctx, t, it, res, &fin, pf)
	if errors.Is(err, errParked) || errors.Is(err, errStopping) {
		fin.closeBacklog() // nothing of the attempt commits
	}
	if errors.Is(err, errParked) {
		w.disown(t.ID) // parked in the claim's transaction: no lease, nothing to commit
		return
	}
	if errors.Is(err, errStopping) {
		if !w.running.isAbandoned(t.ID) { // else released when it was abandoned
			w.release(t)
			w.drained(t, "released", nil)
		}
		if fin.flight != "" {
			w.cache.land(fin.flight)
		}
		return
	}
	setErr(res, err)
	w.observe(t, res, begin)
	if err != nil && ctx.Err() == nil {
		w.log.Debug("task attempt failed", "task_id", t.ID, "job_id", t.JobID, "item_id", t.ItemID, "action", t.Action, "attempt", t.Attempt, "error", err)
	}
	apply := w.applyResult(ctx, res, &fin)
	if w.running.isDraining() {
		// Its lease may be released (abandoned) before it commits: another process may run it by now.
		apply.skip = func() bool { return w.running.isAbandoned(t.ID) }
	}
	// The result commits after the task's slot is free: the slot is the action's, and what is
	// left is the commit's. Waiters for the same conversion read the cache once the flight
	// lands: it lands after the commit.
	ended := func(err error) {
		fin.closeBacklog()
		w.committed(ctx, res, err)
		if fin.flight != "" {
			w.cache.land(fin.flight)
		}
	}
	if err := w.commit.submitResult(context.WithoutCancel(ctx), apply, ended); err != nil {
		ended(err)
	}
}

// committed ends the worker's part in a result whose transaction ended with err. A result that
// could not be committed (its effects failed to apply: metadata that is not JSON, a
// nondeterministic child; or the batch failed) becomes the task's outcome in a transaction of
// its own: failed with the reason, none of its effects. If even that fails the lease is no
// longer renewed, so the maintenance leader reclaims the task as a lost attempt.
func (w *Worker) committed(ctx context.Context, res *engine.Result, err error) {
	defer w.disown(res.Task.ID)
	t := res.Task
	if errors.Is(err, ErrStopped) {
		// Not committed, and nothing is any more: the task is released (abandoned) or its
		// lease expires and the maintenance leader reclaims it.
		if !w.running.isAbandoned(t.ID) {
			w.taskLog(t).Warn("result not committed: the worker stopped first; the task runs again when its lease expires")
		}
		return
	}
	w.drained(t, "finished", res.Err)
	if err == nil {
		return
	}
	fail := engine.FailedCommit(res, err)
	log := w.log.With("job_id", t.JobID, "item_id", t.ItemID, "task_id", t.ID, "action", t.Action, "attempt", t.Attempt)
	log.Error("commit result; the task fails", "error", err)
	if ferr := w.commit.alone(context.WithoutCancel(ctx), func(tx *engine.Tx) error { return tx.Apply(fail) }); ferr != nil {
		log.Error("commit the failure of a result that could not be committed; its lease will expire", "error", ferr)
	}
}

// observe records an attempt of t that began at begin: how long the task waited, from becoming
// ready (or the end of its retry backoff) to its lease, and how long it ran.
func (w *Worker) observe(t *record.Task, res *engine.Result, begin time.Time) {
	if w.cfg.Metrics == nil {
		return
	}
	ready := t.RunAfter
	if ready.IsZero() {
		ready = t.CreatedAt
	}
	w.cfg.Metrics.TaskAttempt(t.Action, res.Started.Sub(ready), time.Since(begin), res.Err != nil)
}

// setErr records the attempt's error in its result, with the stack of a panic.
func setErr(res *engine.Result, err error) {
	res.Err = err
	var pe *action.PanicError
	if errors.As(err, &pe) {
		res.Stack = pe.Stack
	}
}

// applyResult returns the op that commits a task's result: its cache entry, when it made one,
// ahead of it in the same transaction.
func (w *Worker) applyResult(ctx context.Context, res *engine.Result, fin *finishing) *resultOp {
	r := &resultOp{res: res}
	if fin.cacheValue != nil {
		r.before = func(tx *engine.Tx) error {
			return tx.Executor().CachePut(context.WithoutCancel(ctx), store.CachePutParams{Key: fin.flight, Value: fin.cacheValue, Now: tx.Now()})
		}
	}
	return r
}

// resultOp is the op that commits a task's result. The committer applies the results of the
// result ops that follow one another in its batch together (engine.Tx.ApplyAll).
type resultOp struct {
	res *engine.Result
	// before, if set, writes ahead of the result in its transaction (its cache entry).
	before func(tx *engine.Tx) error
	// skip, if set, tells at commit time that the result must not be applied: its lease was
	// released (abandoned) while it waited.
	skip func() bool
}

// skipped reports whether the result is not to be applied (see skip).
func (r *resultOp) skipped() bool { return r.skip != nil && r.skip() }

// apply commits the result alone in tx.
func (r *resultOp) apply(tx *engine.Tx) error {
	if r.skipped() {
		return nil
	}
	if r.before != nil {
		if err := r.before(tx); err != nil {
			return err
		}
	}
	return tx.Apply(r.res)
}

// finishing is what a task's result commits with, filled in by execute.
type finishing struct {
	// flight is the conversion cache key whose flight this task owns, landed after the commit;
	// cacheValue, when set, is the entry cached under it.
	flight     string
	cacheValue []byte
	// backlog is the attempt's hold on its job's backlog bound, closed once the result has
	// committed (or will not be): the children that went with the result count as in flight
	// until then, else a count between the attempt's end and its commit would not see them.
	backlog *engine.Backlog
}

// closeBacklog gives up the attempt's backlog hold, if it has one.
func (fin *finishing) closeBacklog() {
	if fin.backlog != nil {
		fin.backlog.Close()
	}
}

var errStopping = errors.New("worker stopping")

func (w *Worker) execute(ctx context.Context, t *record.Task, it *record.Item, res *engine.Result, fin *finishing, pf *prefetch) (err error) {
	act, step, err := w.stepOf(ctx, t)
	if err != nil {
		return err
	}
	if it == nil {
		if it, err = w.e.TaskItem(ctx, t); err != nil {
			return err
		}
	}
	if step.Claim != nil || step.Limit != nil {
		if done, err := w.keyed(ctx, t, step, it, res); done || err != nil {
			return err
		}
	}
	spec, policy := act.Spec(), w.e.Catalog().Policy(t.Action)
	timeout := time.Duration(step.Timeout)
	if timeout <= 0 {
		timeout = spec.Timeout
	}
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if policy.Brief {
		// A brief batch keeps its tasks' rows locked while each runs: a brief action that
		// hangs gives up within a lease, not the default ten minutes.
		timeout = min(timeout, w.cfg.LeaseDuration)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.running.add(t)
	defer w.running.remove(t.ID)
	var expired atomic.Bool
	deadline := time.AfterFunc(timeout, func() {
		expired.Store(true)
		cancel()
	})
	defer deadline.Stop()
	if w.slots.run(t.ID, cancel) {
		// Its job's cancel came between its lease and now, and found no run to cancel: the
		// job's state tells whether it was this attempt's (a retry may have run it again since).
		if job, err := w.e.TaskJob(ctx, t.JobID); err == nil && job.State != record.JobRunning {
			cancel()
		}
	}

	at := &action.Task{ID: t.ID, JobID: t.JobID, Step: t.Step, Action: t.Action, Attempt: t.Attempt, With: step.With,
		Item: engine.ActionItem(it)}
	if at.With == nil {
		at.With = map[string]any{}
	}
	var tmp string
	at.OpenBlob = func(ctx context.Context) (io.ReadCloser, error) {
		if it.BlobSHA256 == "" {
			return nil, action.Permanentf("item %q has no content", it.Name)
		}
		return w.cfg.Blobs.Open(ctx, it.BlobSHA256)
	}
	at.BlobPath = func(ctx context.Context) (string, error) { return w.blobPath(ctx, it, &tmp) }
	mkTemp := func() (string, error) {
		if tmp == "" {
			d, err := os.MkdirTemp(w.cfg.TempDir, "sluice-task-")
			if err != nil {
				return "", err
			}
			tmp = d
		}
		return tmp, nil
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	if !policy.NoTempDir {
		if at.TempDir, err = mkTemp(); err != nil {
			return fmt.Errorf("temp dir: %w", err)
		}
	}
	out := &output{w: w, task: t, spec: spec, brief: policy.Brief, ctx: tctx, result: res, itemName: it.Name,
		staged: make(chan struct{}, maxStaged), unrecorded: make(chan struct{}, maxUnrecorded)}
	if !policy.Brief {
		out.backlog = w.e.Backlog(t, it)
		fin.backlog = out.backlog
		// While the attempt waits for its job's backlog to drain, it holds no slot (the tasks
		// that drain it must run) and its timeout does not run: the wait is not the action's.
		out.pause = func(waiting bool) error {
			if waiting {
				deadline.Stop()
			} else if !expired.Load() {
				deadline.Reset(timeout)
			}
			w.slots.wait(t.Queue, waiting)
			w.kick()
			return nil
		}
	}
	if policy.IdleTimeout && !policy.Brief {
		// The timeout starts again with each step of progress (see action.Policy.IdleTimeout).
		out.advanced = func() {
			if !expired.Load() {
				deadline.Reset(timeout)
			}
		}
	}
	if it.NChildren > 0 {
		out.existing = &earlier{lo: 0, hi: 0, load: func(ctx context.Context, from, limit int) ([]*record.Item, error) {
			return w.e.EarlierChildren(ctx, t, from, limit)
		}}
	}
	key := ""
	if policy.Cacheable && it.BlobSHA256 != "" {
		key = cacheKey(spec, step, it)
		if hit, err := w.cache.get(tctx, key, out, t.Attempt <= 1, pf); hit || err != nil {
			if hit {
				w.stats.count(t.Action, true)
			}
			if err == nil {
				out.pending.Wait()
				err = out.failed()
			}
			if err != nil && ctx.Err() != nil {
				// The stop canceled it, most often while it waited on another task's flight:
				// released like a running task, no attempt spent.
				return errStopping
			}
			return err
		}
		fin.flight = key // landed by run, after the result commits
		out.record = &effects{Parent: it.Name}
	}
	w.stats.count(t.Action, false)
	// The action reads beyond its task through its read port, scoped to the task's job.
	err = w.safeRun(engine.WithReads(tctx, w.e.TaskReads(t.JobID, w.cfg.Blobs)), act, at, out)
	out.mu.Lock()
	out.returned = true
	out.mu.Unlock()
	out.pending.Wait()
	res.SortChildren()
	if cerr := out.failed(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil && tctx.Err() != nil && ctx.Err() == nil && expired.Load() {
		res.TimedOut = true
		if out.advanced != nil {
			err = fmt.Errorf("%s timed out: no progress for %s", t.Action, timeout)
		} else {
			err = fmt.Errorf("%s timed out after %s", t.Action, timeout)
		}
	}
	if err != nil && ctx.Err() != nil {
		return errStopping
	}
	if err != nil && tmp != "" {
		// Checked before the deferred removal frees the space: a tool that filled the temp
		// dir failed for the disk, not for its input, whatever it said.
		err = tempDirFull(tmp, err)
	}
	if key != "" && (err == nil || action.IsPermanent(err)) {
		fin.cacheValue = w.cache.entry(out, err)
	}
	return err
}

// jobWorkflow returns the job's workflow name and version (immutable, so cached).
func (w *Worker) jobWorkflow(ctx context.Context, jobID int64) (string, int, error) {
	w.jobs.mu.Lock()
	jw, ok := w.jobs.m[jobID]
	w.jobs.mu.Unlock()
	if ok {
		return jw.name, jw.version, nil
	}
	job, err := w.e.TaskJob(ctx, jobID)
	if err != nil {
		return "", 0, err
	}
	w.jobs.mu.Lock()
	if len(w.jobs.m) > 10000 {
		clear(w.jobs.m)
	}
	w.jobs.m[jobID] = jobWF{job.WorkflowName, job.WorkflowVersion, job.CreatedAt}
	w.jobs.mu.Unlock()
	return job.WorkflowName, job.WorkflowVersion, nil
}

// stepOf returns the task's action and its step in the job's workflow.
func (w *Worker) stepOf(ctx context.Context, t *record.Task) (action.Action, *workflow.Step, error) {
	act, ok := w.e.Catalog().Lookup(t.Action)
	if !ok {
		return nil, nil, action.Permanentf("unknown action %q", t.Action)
	}
	wfName, wfVersion, err := w.jobWorkflow(ctx, t.JobID)
	if err != nil {
		return nil, nil, err
	}
	def, _, err := w.e.Definition(ctx, wfName, wfVersion)
	if err != nil {
		return nil, nil, err
	}
	step := def.Step(t.Step)
	if step == nil {
		return nil, nil, action.Permanentf("step %q not in workflow %q", t.Step, def.Name)
	}
	return act, step, nil
}

type jobWF struct {
	name    string
	version int
	created time.Time // identifies the job's trace (package tracing)
}

// jobWorkflows caches jobs' workflow name and version (immutable), bounded by clearing it.
type jobWorkflows struct {
	mu sync.Mutex
	m  map[int64]jobWF
}

func (w *Worker) safeRun(ctx context.Context, act action.Action, t *action.Task, out *output) error {
	return action.Safe(func() error { return act.Run(ctx, t, out) })
}

func (w *Worker) blobPath(ctx context.Context, it *record.Item, tmp *string) (string, error) {
	if it.BlobSHA256 == "" {
		return "", action.Permanentf("item %q has no content", it.Name)
	}
	if lp, ok := w.cfg.Blobs.(blob.LocalPather); ok {
		return lp.LocalPath(it.BlobSHA256)
	}
	if *tmp == "" {
		d, err := os.MkdirTemp(w.cfg.TempDir, "sluice-task-")
		if err != nil {
			return "", err
		}
		*tmp = d
	}
	f, err := os.CreateTemp(*tmp, "input-*.blob")
	if err != nil {
		return "", err
	}
	defer f.Close()
	r, err := w.cfg.Blobs.Open(ctx, it.BlobSHA256)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if _, err := io.Copy(f, r); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

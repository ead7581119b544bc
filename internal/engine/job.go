package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/metadata"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// CreateJobParams starts a job of a stored workflow.
type CreateJobParams struct {
	Workflow string
	Version  int // 0: the latest
	// Key makes creation idempotent: a second call with the same key returns the existing job.
	Key      string
	Metadata map[string]any
	Options  map[string]any
	// Open creates the job unsealed: it cannot complete until [Engine.Seal], so roots may be
	// added in several batches while workers run. Without it, the job may complete as soon as
	// the roots added so far are done.
	Open bool
}

// CreateJob creates a running job with no items; add them with [Engine.AddRoots].
func (e *Engine) CreateJob(ctx context.Context, p CreateJobParams) (*record.Job, bool, error) {
	if p.Key != "" {
		if j, err := e.store.JobGetByKey(ctx, p.Key); err == nil {
			return j, false, nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, false, err
		}
	}
	_, version, err := e.Definition(ctx, p.Workflow, p.Version)
	if err != nil {
		return nil, false, err
	}
	md, err := json.Marshal(orEmpty(p.Metadata))
	if err != nil {
		return nil, false, fmt.Errorf("job metadata: %w", err)
	}
	opts, err := json.Marshal(orEmpty(p.Options))
	if err != nil {
		return nil, false, fmt.Errorf("job options: %w", err)
	}
	j, err := e.store.JobInsert(ctx, store.JobInsertParams{Open: p.Open, Key: p.Key, WorkflowName: p.Workflow, WorkflowVersion: version, Metadata: md, Options: opts, Now: e.Now()})
	if p.Key != "" && errors.Is(err, store.ErrConflict) {
		// Another process created the job between the look-up and the insert (two watchers of
		// one folder, two consumers of one message): it is this call's job too.
		if j, gerr := e.store.JobGetByKey(ctx, p.Key); gerr == nil {
			return j, false, nil
		}
	}
	if err != nil {
		return nil, false, err
	}
	return j, true, nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Root is one user-supplied input of a job.
type Root struct {
	Ordinal     int // its index among the job's roots; keys it, so adding it twice is a no-op
	Name        string
	ContentType string
	BlobSHA256  string
	Size        int64
	Metadata    map[string]any // merged over the job's metadata
	Options     map[string]any // merged over the job's options
}

// AddRoots inserts root items (idempotently, by ordinal) and fires start on the new ones. Large
// batches are split into transactions of 500.
func (e *Engine) AddRoots(ctx context.Context, job *record.Job, roots []Root) error {
	var jobMD, jobOpts map[string]any
	if err := unmarshalObjects(job.Metadata, &jobMD, job.Options, &jobOpts); err != nil {
		return fmt.Errorf("job %d: %w", job.ID, err)
	}
	for start := 0; start < len(roots); start += 500 {
		batch := roots[start:min(start+500, len(roots))]
		ps := make([]store.ItemInsertParams, len(batch))
		for i, r := range batch {
			md, _ := json.Marshal(merge(jobMD, r.Metadata))
			opts, _ := json.Marshal(merge(jobOpts, r.Options))
			ps[i] = store.ItemInsertParams{
				JobID: job.ID, Ordinal: r.Ordinal, SortKey: fmt.Sprintf("%08x", r.Ordinal), Name: r.Name,
				ContentType: r.ContentType, BlobSHA256: r.BlobSHA256, Size: r.Size, Metadata: md, Options: opts,
				RangeLo: float64(r.Ordinal), RangeLen: math.Max(float64(r.Size), 1),
			}
		}
		if err := e.addRoots(ctx, job, ps); err != nil {
			return fmt.Errorf("add roots to job %d: %w", job.ID, err)
		}
	}
	return nil
}

// addRoots adds a batch of roots in one transaction; a replayed root (its key exists) is left
// out. The transaction may run twice (see [store.Executor.ItemInsertRoots]).
func (e *Engine) addRoots(ctx context.Context, job *record.Job, ps []store.ItemInsertParams) error {
	return e.Run(ctx, func(t *Tx) error {
		for i := range ps {
			ps[i].Now = t.t.now
		}
		items, asGiven, err := t.t.x.ItemInsertRoots(t.t.ctx, job, ps)
		if err != nil {
			return err
		}
		if asGiven {
			j := *job // the store checks it is so before the commit
			t.t.jobs[job.ID] = &j
		}
		var added float64
		for _, it := range items {
			added += it.RangeLen
			t.t.created(it)
			if err := t.t.fire(it, workflow.EventStart); err != nil {
				return err
			}
		}
		if added > 0 {
			return t.t.x.JobAddTotal(t.t.ctx, job.ID, added)
		}
		return nil
	})
}

// Seal tells the engine that every root of the job has been added: from now on it completes
// once nothing is open (at once when all its items are done, or it has none).
func (e *Engine) Seal(ctx context.Context, jobID int64) error {
	return e.Run(ctx, func(t *Tx) error {
		if _, err := t.t.x.JobSeal(t.t.ctx, jobID); err != nil {
			return err
		}
		if j, ok := t.t.jobs[jobID]; ok {
			j.Sealed = true
		}
		t.t.mayClose(jobID)
		return nil
	})
}

// merge returns base with over's keys: a key in both gets over's value. An item inherits its
// parent's (or job's) metadata and options, and its own keys win.
func merge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// CanceledError is the error of an item that a cancel settled, and of its canceled tasks.
const CanceledError = "canceled"

// JobFailedError is the error of an item that a job's failure (the event fail) settled before
// it was processed — not started, running, or waiting — and of the tasks the failure canceled.
// Like a cancel's, it is an ordinary result: an error output counted in the job's summary, and
// [Engine.Retry] runs the item's canceled tasks again.
const JobFailedError = "not processed: the job failed"

// endedError is the error that settles the unprocessed items, and the canceled tasks, of a job
// that ended in state without completing: "" for a job that is running or complete.
func endedError(state record.JobState) string {
	switch state {
	case record.JobCanceled:
		return CanceledError
	case record.JobFailed:
		return JobFailedError
	}
	return ""
}

// Cancel cancels a running job. It is an ordinary transition: every item not yet processed is
// settled with the error [CanceledError] (unless it failed already) and gets an error output as
// the documents workflow's ingest would write, running actions see their context canceled, and
// their items settle the same way as their results come in; completed outputs stay (DESIGN §5).
// The job ends canceled, and [Engine.Retry] runs its canceled tasks again.
func (e *Engine) Cancel(ctx context.Context, jobID int64) error {
	return e.Run(ctx, func(t *Tx) error {
		job, err := t.t.job(jobID)
		if err != nil {
			return err
		}
		if job.State != record.JobRunning {
			return fmt.Errorf("job %d is %s, not running", jobID, job.State)
		}
		return t.t.endJob(job, record.JobCanceled, CanceledError)
	})
}

// ErrUnknownEvent is returned by [Engine.FireExternal] for an event the workflow does not declare.
var ErrUnknownEvent = errors.New("event not declared external by the workflow")

// FireExternal fires a declared external event on an item. Repeats are harmless (false).
func (e *Engine) FireExternal(ctx context.Context, itemID int64, event string) (bool, error) {
	it, err := e.store.ItemGet(ctx, itemID)
	if err != nil {
		return false, err
	}
	f, err := e.Fire(ctx, FireParams{JobID: it.JobID, ItemID: itemID, Event: event})
	if err != nil {
		return false, err
	}
	return f.Fired > 0, nil
}

// Progress is a job's progress derived from the database.
type Progress struct {
	JobID int64
	State record.JobState
	// Fraction is the part of the job done, 0..1 (Overview's weighted progress): 1 only once
	// the job is complete; a canceled or failed job shows the work it really did. While the job
	// runs, the Fraction one engine reports never goes down (see [Engine.Progress]).
	Fraction float64
	Items    map[record.ItemState]int
	Tasks    map[record.TaskState]int
	Counts   []record.TaskCount // by state, step, action and queue, with retries: what Tasks sums
	Elapsed  time.Duration
	// ETA is the estimated time left; 0 when unknown: before any progress, once the job
	// ended, and while Waiting.
	ETA time.Duration
	// Waiting is set while an item of the running job waits for an external event (an
	// approval, an outside system's answer): when it comes is not the engine's to know, so
	// there is no ETA.
	Waiting bool
	// Downstream is set while a step of the running job that creates children waits for the
	// items it made to be processed: the job's backlog is at [Config.MaxBacklog] (see
	// [Backlog]). Its ETA still counts.
	Downstream bool
}

// maxRunningFraction is the most a running job's Fraction shows: 1 means done, and a running
// job's rows (or its tasks' live progress) can add up to all of it a moment before it ends.
const maxRunningFraction = 0.999

// Progress computes a job's weighted progress and ETA from its rows, plus what running tasks
// reported (see [Engine.ReportProgress]); it is correct after a restart, which forgets only
// the latter. While the job runs, the fraction returned never decreases from one call to the
// next: a task's reported progress is cleared just after its commit, and retries and lost
// attempts take back what was reported. Safe for concurrent use.
func (e *Engine) Progress(ctx context.Context, jobID int64) (*Progress, error) {
	job, err := e.store.JobGet(ctx, jobID)
	if err != nil {
		return nil, err
	}
	jp, err := e.store.JobProgress(ctx, jobID)
	if err != nil {
		return nil, err
	}
	counts, err := e.store.TaskCounts(ctx, jobID)
	if err != nil {
		return nil, err
	}
	p := &Progress{JobID: jobID, State: job.State, Items: jp.Items, Tasks: map[record.TaskState]int{}, Counts: counts}
	for _, c := range counts {
		p.Tasks[c.State] += c.Tasks
	}
	if jp.Total > 0 {
		p.Fraction = min(max((jp.Colored+e.liveAmount(jobID))/jp.Total, 0), 1)
	}
	end := e.Now()
	switch job.State {
	case record.JobRunning:
		p.Fraction = e.shown.raise(jobID, min(p.Fraction, maxRunningFraction))
		if p.Waiting, err = e.waiting(ctx, job, p); err != nil {
			return nil, err
		}
		if p.Downstream, err = e.waitingForDownstream(ctx, jobID); err != nil {
			return nil, err
		}
	case record.JobComplete:
		p.Fraction = 1
		e.shown.forget(jobID)
	default:
		e.shown.forget(jobID)
	}
	if !job.FinishedAt.IsZero() {
		end = job.FinishedAt
	}
	p.Elapsed = end.Sub(job.CreatedAt)
	if job.State == record.JobRunning && !p.Waiting && p.Fraction > 0.001 {
		p.ETA = time.Duration(float64(p.Elapsed) * (1 - p.Fraction) / p.Fraction)
	}
	return p, nil
}

// waiting reports whether an item of the running job waits for an external event: a wait with
// a deadline is recorded, or its workflow declares external events and an unfinished item has no
// task to run (it waits for an event to come).
func (e *Engine) waiting(ctx context.Context, job *record.Job, p *Progress) (bool, error) {
	waits, err := e.store.WaitListByJob(ctx, job.ID)
	if err != nil {
		return false, err
	}
	if len(waits) > 0 {
		return true, nil
	}
	def, _, err := e.Definition(ctx, job.WorkflowName, job.WorkflowVersion)
	if err != nil {
		return false, err
	}
	if len(def.External) == 0 {
		return false, nil
	}
	active := p.Tasks[record.TaskReady] + p.Tasks[record.TaskRunning] + p.Tasks[record.TaskParked] + p.Tasks[record.TaskBlocked]
	return p.Items[record.ItemCreated]+p.Items[record.ItemWritten] > active, nil
}

// unmarshalObjects decodes a row's stored metadata and options, which children and roots inherit:
// a row that does not decode is reported, not inherited as nothing.
func unmarshalObjects(raw []byte, md *map[string]any, options []byte, opts *map[string]any) error {
	// Numbers stay json.Number: what is inherited is encoded again, and must come out as it went in.
	if len(raw) > 0 {
		if err := metadata.Unmarshal(raw, md); err != nil {
			return fmt.Errorf("decode metadata: %w", err)
		}
	}
	if len(options) > 0 {
		if err := metadata.Unmarshal(options, opts); err != nil {
			return fmt.Errorf("decode options: %w", err)
		}
	}
	return nil
}

// shownFractions is the fraction [Engine.Progress] last returned for each running job, which
// the next may not go below. Safe for concurrent use.
type shownFractions struct {
	mu sync.Mutex
	m  map[int64]float64
}

// raise returns the larger of f and the job's last fraction, and records it.
func (s *shownFractions) raise(jobID int64, f float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) > 100_000 { // jobs that ended unseen: forget them all
		s.m = map[int64]float64{}
	}
	if prev := s.m[jobID]; prev > f {
		f = prev
	}
	s.m[jobID] = f
	return f
}

// forget drops a job that is no longer running.
func (s *shownFractions) forget(jobID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, jobID)
}

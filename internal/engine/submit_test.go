package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestSubmission checks the one way a job is submitted, on both drivers: roots are committed a
// batch at a time and the job stays running, unsealed, until Seal; a submission interrupted
// after some batches is taken up by its key — the roots recorded are known (Has) and left out,
// the others added — and once sealed the job completes with every root exactly once; the same
// key then finds a job that takes no roots, and a sealed submission refuses more.
func TestSubmission(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		ctx := t.Context()
		k := enginetest.Start(t, open, enginetest.Func("noop", func(context.Context, *action.Task, action.Output) error { return nil }))
		k.ApplyWorkflow(t, "name: submitted\nsteps:\n  a: {action: noop, needs: [start]}\n")
		const n = 1_200 // two full batches and part of a third
		roots := make([]engine.Root, n)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%04d", i)}
		}
		p := engine.SubmitParams{Workflow: "submitted", Key: "submission-test"}
		rootCount := func(jobID int64) int {
			var zero int64
			items, err := k.Store.ItemList(ctx, store.ItemListParams{JobID: jobID, ParentID: &zero, Limit: 2 * n})
			if err != nil {
				t.Fatal(err)
			}
			return len(items)
		}

		first, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !first.Created() || !first.Open() {
			t.Fatalf("first submission: created %v, open %v; want both", first.Created(), first.Open())
		}
		if err := first.Add(ctx, roots...); err != nil {
			t.Fatal(err)
		}
		// Interrupted here: the full batches are committed, the rest is lost with the submission.
		job := first.Job()
		if got := rootCount(job.ID); got != 1_000 {
			t.Fatalf("after Add without Seal: %d roots recorded, want the two full batches (1000)", got)
		}

		again, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if again.Created() || !again.Open() || again.Job().ID != job.ID {
			t.Fatalf("submission by the same key: job %d, created %v, open %v; want job %d, found, open",
				again.Job().ID, again.Created(), again.Open(), job.ID)
		}
		for ord, want := range map[int]bool{0: true, 999: true, 1_000: false, n - 1: false} {
			if has, err := again.Has(ctx, ord); err != nil || has != want {
				t.Errorf("Has(%d) = %v, %v; want %v", ord, has, err, want)
			}
		}
		if st, err := k.Engine.JobState(ctx, job.ID); err != nil || st != record.JobRunning {
			t.Fatalf("unsealed job is %q (%v), want running until sealed", st, err)
		}
		if err := again.Add(ctx, roots...); err != nil {
			t.Fatal(err)
		}
		if err := again.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if final := k.WaitJob(t, job.ID, 2*time.Minute); final.State != record.JobComplete {
			t.Fatalf("sealed job ended %s (%s), want complete", final.State, final.Error)
		}
		if got := rootCount(job.ID); got != n {
			t.Errorf("%d roots recorded, want %d (each once)", got, n)
		}
		if err := again.Add(ctx, engine.Root{Ordinal: n, Name: "late"}); err == nil {
			t.Error("Add after Seal succeeded, want an error")
		}

		done, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if done.Created() || done.Open() {
			t.Fatalf("submission of a completed job: created %v, open %v; want found and closed", done.Created(), done.Open())
		}
		if err := done.Add(ctx, engine.Root{Ordinal: n, Name: "late"}); err != nil {
			t.Fatal(err)
		}
		if err := done.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rootCount(job.ID); got != n {
			t.Errorf("a closed submission added roots: %d recorded, want %d", got, n)
		}
	})
}

// TestSubmissionThroughOutage: a submission whose connection breaks (a failover, a restart)
// goes on once the database answers again, each step run anew — the job's creation, the read of
// its roots, each batch and the seal — whether the broken step's commit was lost or went
// through unseen, and records nothing twice: one job for the key, every root once, the job's
// total counted once. A keyless submission is not run again: its job would be created twice.
func TestSubmissionThroughOutage(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		k := enginetest.Start(t, func(tb testing.TB) store.Store { return &outageStore{Store: open(tb)} },
			enginetest.Func("noop", func(context.Context, *action.Task, action.Output) error { return nil }))
		k.ApplyWorkflow(t, "name: submitted\nsteps:\n  a: {action: noop, needs: [start]}\n")
		const n = 1_200
		roots := make([]engine.Root, n)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%04d", i)}
		}
		p := engine.SubmitParams{Workflow: "submitted", Key: "outage-test"}

		// The job's creation commits unseen: the submission finds the job by its key.
		o := &outage{plan: map[string][]bool{"JobInsert": {true}}}
		first, err := k.Engine.Submit(o.in(t.Context()), p)
		if err != nil {
			t.Fatalf("submit through a broken creation: %v", err)
		}
		if first.Created() {
			t.Error("the job whose creation was unseen was created again, want it found by its key")
		}
		// The first batch commits, the submission is interrupted.
		if err := first.Add(t.Context(), roots[:submitBatchForTest]...); err != nil {
			t.Fatal(err)
		}
		o.check(t)

		// Taken up by its key through an outage: the read of its roots breaks, then each batch's
		// and the seal's transactions, lost or committed unseen.
		o = &outage{plan: map[string][]bool{"ItemList": {false}, "InTx": {true, false, false, true, true}}}
		ctx := o.in(t.Context())
		again, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if again.Created() || again.Job().ID != first.Job().ID {
			t.Fatalf("submission by the key made job %d (created %v), want job %d", again.Job().ID, again.Created(), first.Job().ID)
		}
		if err := again.Add(ctx, roots...); err != nil {
			t.Fatalf("add through the outage: %v", err)
		}
		if err := again.Seal(ctx); err != nil {
			t.Fatalf("seal through the outage: %v", err)
		}
		o.check(t)
		job := k.WaitJob(t, first.Job().ID, 2*time.Minute)
		if job.State != record.JobComplete {
			t.Fatalf("job ended %s (%s), want complete", job.State, job.Error)
		}
		var zero int64
		items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, ParentID: &zero, Limit: 2 * n})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]int{}
		for _, it := range items {
			seen[it.Ordinal]++
		}
		if len(items) != n || len(seen) != n {
			t.Errorf("%d roots recorded with %d distinct ordinals, want %d, each once", len(items), len(seen), n)
		}
		if job.TotalBytes != n {
			t.Errorf("job total %v, want %d (each root counted once)", job.TotalBytes, n)
		}
		jobs, err := k.Store.JobList(t.Context(), store.JobListParams{Workflow: "submitted", Limit: 10})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("%d jobs (%v), want the one job of the key", len(jobs), err)
		}

		// Without a key, a creation that commits unseen is the caller's to judge: Submit fails.
		o = &outage{plan: map[string][]bool{"JobInsert": {true}}}
		if _, err := k.Engine.Submit(o.in(t.Context()), engine.SubmitParams{Workflow: "submitted"}); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("keyless submit through a broken creation: %v, want it to fail as unavailable", err)
		}
		o.check(t)
		if jobs, err := k.Store.JobList(t.Context(), store.JobListParams{Workflow: "submitted", Limit: 10}); err != nil || len(jobs) != 2 {
			t.Fatalf("%d jobs (%v) after a keyless submission, want 2: it was created once, not again", len(jobs), err)
		}
	})
}

// submitBatchForTest is the submission's batch size ([engine.Submission] commits 500 roots at
// a time): Add of that many commits them.
const submitBatchForTest = 500

// outageStore is a store whose connection breaks, as a failover breaks it, on the calls an
// [outage] in their context is planned for.
type outageStore struct{ store.Store }

func (s *outageStore) InTx(ctx context.Context, fn func(store.Executor) error) error {
	return outageOf(ctx).call("InTx", func() error { return s.Store.InTx(ctx, fn) })
}

func (s *outageStore) JobInsert(ctx context.Context, p store.JobInsertParams) (j *record.Job, err error) {
	err = outageOf(ctx).call("JobInsert", func() (err error) {
		j, err = s.Store.JobInsert(ctx, p)
		return err
	})
	return j, err
}

func (s *outageStore) ItemList(ctx context.Context, p store.ItemListParams) (items []*record.Item, err error) {
	err = outageOf(ctx).call("ItemList", func() (err error) {
		items, err = s.Store.ItemList(ctx, p)
		return err
	})
	return items, err
}

// outage plans, for each method, how its next calls break: each fails with
// store.ErrUnavailable, its writes lost (false) or committed before the answer was (true).
// Safe for concurrent use.
type outage struct {
	mu   sync.Mutex
	plan map[string][]bool
}

type outageKey struct{}

func (o *outage) in(ctx context.Context) context.Context {
	return context.WithValue(ctx, outageKey{}, o)
}

func outageOf(ctx context.Context) *outage {
	o, _ := ctx.Value(outageKey{}).(*outage)
	return o
}

// call runs fn, or breaks it as planned.
func (o *outage) call(method string, fn func() error) error {
	if o == nil {
		return fn()
	}
	o.mu.Lock()
	plan := o.plan[method]
	if len(plan) == 0 {
		o.mu.Unlock()
		return fn()
	}
	committed := plan[0]
	o.plan[method] = plan[1:]
	o.mu.Unlock()
	if committed {
		if err := fn(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w: %w: read tcp: connection reset by peer", method, store.ErrRetry, store.ErrUnavailable)
}

// check fails the test unless every planned break happened.
func (o *outage) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for m, plan := range o.plan {
		if len(plan) > 0 {
			t.Errorf("%d planned breaks of %s did not happen", len(plan), m)
		}
	}
}

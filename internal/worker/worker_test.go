package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// fn is an in-memory action for tests.
type fn struct {
	spec   action.Spec
	policy action.Policy
	run    func(ctx context.Context, t *action.Task, out action.Output) error
}

func (f *fn) Spec() action.Spec     { return f.spec }
func (f *fn) Policy() action.Policy { return f.policy }
func (f *fn) Run(ctx context.Context, t *action.Task, out action.Output) error {
	return f.run(ctx, t, out)
}

type bundle struct {
	e     *engine.Engine
	w     *worker.Worker
	db    store.Store
	blobs *blob.Dir
}

func setup(t *testing.T, open drivertest.Open, actions ...action.Action) *bundle {
	t.Helper()
	return setupWith(t, open, nil, actions...)
}

// setupWith is setup with the worker's configuration changed by tweak.
func setupWith(t *testing.T, open drivertest.Open, tweak func(*worker.Config), actions ...action.Action) *bundle {
	t.Helper()
	k := enginetest.StartWith(t, open, enginetest.Config{Worker: tweak}, actions...)
	return &bundle{e: k.Engine, w: k.Worker, db: k.Store, blobs: k.Blobs}
}

// startJob applies the workflow called name, creates a job of it and adds the roots.
func (b *bundle) startJob(t *testing.T, name, wf string, roots ...engine.Root) *record.Job {
	t.Helper()
	if _, _, err := b.e.ApplyWorkflow(t.Context(), []byte(wf), name+".yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := b.e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.AddRoots(t.Context(), job, roots); err != nil {
		t.Fatal(err)
	}
	return job
}

// TestFanOutFanIn runs 10,000 children through two steps each and a collector on the root, on
// every store driver.
func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testFanOutFanIn(t, open)
	})
}

func testFanOutFanIn(t *testing.T, open drivertest.Open) {
	db := open(t)
	n := 10000
	if db.Capabilities().MultiProcess {
		// Over a network connection every engine statement is a round trip: 10,000 children
		// take minutes on a loaded machine (see the logged time). 2,500 still outnumber a
		// fan's children in flight (maxUnrecorded) and its groups; -short runs 1,000.
		n = 2500
		if testing.Short() {
			n = 1000
		}
	}
	// No step uses a temp dir: making and removing 30,000 of them was a quarter of the test's
	// CPU (150 µs each on a test VM's disk), on what the test is not about.
	noTemp := action.Policy{NoTempDir: true}
	var collected, aRuns, bRuns atomic.Int64
	var collectorSawOpen atomic.Bool
	var b *bundle
	// Every child runs split too, as a no-op: a low limit would pass all 10,000 through one
	// queue a few at a time, a lease and a commit each, which on Postgres takes minutes.
	split := &fn{spec: action.Spec{Name: "split", Concurrency: 50}, policy: noTemp, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		if t.Item.ParentID != 0 {
			return nil
		}
		for i := 0; i < n; i++ {
			out.Progress(float64(i) / float64(n))
			if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%05d", t.Item.Name, i)}); err != nil {
				return err
			}
		}
		return nil
	}}
	stepA := &fn{spec: action.Spec{Name: "a", Concurrency: 50}, policy: noTemp, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		aRuns.Add(1)
		return nil
	}}
	stepB := &fn{spec: action.Spec{Name: "b", Concurrency: 50}, policy: noTemp, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		bRuns.Add(1)
		return nil
	}}
	collect := &fn{spec: action.Spec{Name: "collect"}, policy: noTemp, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		if t.Item.ParentID != 0 {
			return nil
		}
		collected.Add(1)
		open, err := b.db.ItemHasChildInState(ctx, t.Item.ID, []record.ItemState{record.ItemCreated, record.ItemWritten})
		if err != nil {
			return err
		}
		collectorSawOpen.Store(open)
		return nil
	}}
	b = setup(t, func(testing.TB) store.Store { return db }, split, stepA, stepB, collect)
	wf := `name: fan
steps:
  split: {action: split, needs: [start], success: [split.done]}
  a: {action: a, needs: [split.done], success: [a.done]}
  b: {action: b, needs: [a.done]}
  collect: {action: collect, needs: [children.done]}
`
	sha, size, _ := b.blobs.Put(t.Context(), strings.NewReader("root"))
	job := b.startJob(t, "fan", wf, engine.Root{Name: "root", BlobSHA256: sha, Size: size})
	start := time.Now()
	j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Minute)
	t.Logf("%d children fanned out and in: %s", n, time.Since(start).Round(time.Millisecond))
	if j.State != record.JobComplete {
		t.Fatalf("job state %s: %s", j.State, j.Error)
	}
	// The root runs split, a, b and collect too; children run split (a no-op for them), a, b, collect.
	if got := aRuns.Load(); got != int64(n+1) {
		t.Errorf("a ran %d times, want %d", got, n+1)
	}
	if got := bRuns.Load(); got != int64(n+1) {
		t.Errorf("b ran %d times, want %d", got, n+1)
	}
	if got := collected.Load(); got != 1 {
		t.Errorf("root collector ran %d times, want 1", got)
	}
	if collectorSawOpen.Load() {
		t.Error("collector ran while children were still open")
	}
	p, err := b.e.Progress(t.Context(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Items[record.ItemIngested] != n+1 || p.Fraction != 1 {
		t.Errorf("progress %+v", p)
	}
	st, _ := store.TaskStats(t.Context(), b.db, job.ID)
	if st[record.TaskComplete] != 4*(n+1) {
		t.Errorf("task stats %v, want %d complete", st, 4*(n+1))
	}
}

// TestJobOpenUntilSealed: roots arrive in batches while workers run; the job must not complete
// between batches, and completes once sealed.
func TestJobOpenUntilSealed(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testJobOpenUntilSealed(t, open)
	})
}

func testJobOpenUntilSealed(t *testing.T, open drivertest.Open) {
	var runs atomic.Int64
	count := &fn{spec: action.Spec{Name: "count"}, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		runs.Add(1)
		return nil
	}}
	b := setup(t, open, count)
	if _, _, err := b.e.ApplyWorkflow(t.Context(), []byte("name: one\nsteps:\n  c: {action: count, needs: [start]}\n"), "one.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := b.e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "one", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.AddRoots(t.Context(), job, []engine.Root{{Ordinal: 0, Name: "first"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the first item", func() (bool, string) {
		p, err := b.e.Progress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.Items[record.ItemIngested] == 1, fmt.Sprintf("%+v", p)
	})
	if j, _ := b.db.JobGet(t.Context(), job.ID); j.State != record.JobRunning {
		t.Fatalf("unsealed job is %s after its first batch; more roots are coming", j.State)
	}
	if err := b.e.AddRoots(t.Context(), job, []engine.Root{{Ordinal: 1, Name: "second"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.e.Seal(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	j := enginetest.WaitJob(t, b.e, job.ID, 30*time.Second)
	if j.State != record.JobComplete || runs.Load() != 2 {
		t.Fatalf("job %s after %d runs, want complete after 2", j.State, runs.Load())
	}
}

// TestCommitRunsAbortedAgain checks that a transaction the database aborted (store.ErrRetry: a
// deadlock) is run again rather than failed, so a task's result is not lost to it, and that an
// ordinary error still fails.
func TestCommitRunsAbortedAgain(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		b := setup(t, open)
		var calls atomic.Int64
		err := b.w.Do(t.Context(), func(tx *engine.Tx) error {
			if calls.Add(1) < 3 {
				return fmt.Errorf("lock item 1: %w", store.ErrRetry)
			}
			return nil
		})
		if err != nil || calls.Load() != 3 {
			t.Errorf("Do after two aborts = %v with %d runs, want nil after 3", err, calls.Load())
		}
		calls.Store(0)
		err = b.w.Do(t.Context(), func(tx *engine.Tx) error {
			calls.Add(1)
			return fmt.Errorf("bad input")
		})
		if err == nil || calls.Load() != 1 {
			t.Errorf("Do with an ordinary error = %v with %d runs, want the error after 1", err, calls.Load())
		}
	})
}

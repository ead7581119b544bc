package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// docsWorkflow is the documents workflow in small: conv converts a file (its text), and ingest
// turns each item into a document or an error once its children are done.
const docsWorkflow = "name: docs\nsteps:\n  conv: {action: conv, needs: [start]}\n  collect: {action: ingest, needs: [children.done]}\n"

// records reads what a job shows the user: its current outputs, an item by name, an item's
// attempts and superseded outputs.
type records struct {
	t   *testing.T
	k   *enginetest.Kit
	job int64
}

func (r records) outputs(kind string) map[string]string {
	r.t.Helper()
	outs, err := r.k.Store.OutputList(r.t.Context(), store.OutputListParams{JobID: r.job, Kind: kind})
	if err != nil {
		r.t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range outs {
		it, err := r.k.Store.ItemGet(r.t.Context(), o.ItemID)
		if err != nil {
			r.t.Fatal(err)
		}
		var v store.ErrorValue
		_ = json.Unmarshal(o.Value, &v)
		got[it.Name] = v.Message
	}
	return got
}

func (r records) item(name string) *record.Item {
	r.t.Helper()
	items, err := r.k.Store.ItemList(r.t.Context(), store.ItemListParams{JobID: r.job, Limit: 1000})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, it := range items {
		if it.Name == name {
			return it
		}
	}
	r.t.Fatalf("job %d has no item %q", r.job, name)
	return nil
}

// history returns the item's attempts as "step attempt state error".
func (r records) history(name string) []string {
	r.t.Helper()
	atts, err := r.k.Engine.ItemHistory(r.t.Context(), r.item(name).ID)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		if a.StartedAt.IsZero() || a.FinishedAt.Before(a.StartedAt) {
			r.t.Errorf("%s: attempt %+v has no start, or ends before it", name, a)
		}
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %d %s %s", a.Step, a.Attempt, a.State, a.Error)))
	}
	return out
}

func (r records) superseded(name string) []string {
	r.t.Helper()
	outs, err := r.k.Store.OutputHistoryList(r.t.Context(), r.item(name).ID)
	if err != nil {
		r.t.Fatal(err)
	}
	var got []string
	for _, o := range outs {
		var v store.ErrorValue
		_ = json.Unmarshal(o.Value, &v)
		got = append(got, o.Kind+": "+v.Message)
	}
	return got
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := fmt.Sprintf("%q", got), fmt.Sprintf("%q", want); g != w {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}

// TestRetryKeepsRecords: a retry deletes no record. An item that fails again keeps an error
// output (the new one; the old is in its output history) and both failed attempts; an item
// that succeeds gets its document and loses its current error, while its failed attempt and
// its old error output stay in its history.
func TestRetryKeepsRecords(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		var mu sync.Mutex
		runs := map[string]int{}
		var fixed atomic.Bool // fixes good.pdf only
		conv := enginetest.Func("conv", func(ctx context.Context, task *action.Task, out action.Output) error {
			mu.Lock()
			runs[task.Item.Name]++
			n := runs[task.Item.Name]
			mu.Unlock()
			if task.Item.Name == "good.pdf" && fixed.Load() {
				return out.SetText(ctx, "text")
			}
			return action.Permanentf("broken (run %d)", n)
		})
		k := enginetest.StartWith(t, open, enginetest.Config{}, conv, ingest.New())
		job := k.StartJob(t, docsWorkflow, engine.Root{Name: "bad.pdf"}, engine.Root{Name: "good.pdf"})
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		r := records{t: t, k: k, job: job.ID}
		equal(t, "errors before the retry", r.outputs(ingest.KindError), map[string]string{"bad.pdf": "broken (run 1)", "good.pdf": "broken (run 1)"})

		fixed.Store(true)
		if _, err := k.Engine.Retry(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job after the retry %s: %s", j.State, j.Error)
		}
		equal(t, "errors after the retry", r.outputs(ingest.KindError), map[string]string{"bad.pdf": "broken (run 2)"})
		equal(t, "documents after the retry", len(r.outputs(ingest.KindDocument)), 1)
		if _, ok := r.outputs(ingest.KindDocument)["good.pdf"]; !ok {
			t.Error("good.pdf has no document after the retry")
		}
		equal(t, "bad.pdf's error", r.item("bad.pdf").Error, "broken (run 2)")
		equal(t, "good.pdf's error", r.item("good.pdf").Error, "")
		// The collector ran on the first result and again on the new one.
		equal(t, "bad.pdf's history", r.history("bad.pdf"), []string{"conv 1 failed broken (run 1)", "conv 2 failed broken (run 2)",
			"collect 1 complete", "collect 2 complete"})
		equal(t, "good.pdf's history", r.history("good.pdf"), []string{"conv 1 failed broken (run 1)", "conv 2 complete",
			"collect 1 complete", "collect 2 complete"})
		equal(t, "bad.pdf's superseded outputs", r.superseded("bad.pdf"), []string{"error: broken (run 1)"})
		equal(t, "good.pdf's superseded outputs", r.superseded("good.pdf"), []string{"error: broken (run 1)"})
	})
}

// TestCancelSettlesEveryItem: a cancel is an ordinary transition. Every item not yet processed
// — running, ready or not started — ends with the error "canceled" and an error output; the job
// is canceled with the fraction actually done; and a retry runs exactly the canceled files to
// completion, superseding their "canceled" errors.
func TestCancelSettlesEveryItem(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		var mu sync.Mutex
		runs := map[string]int{}
		started := make(chan string, 16)
		var resumed atomic.Bool
		conv := enginetest.Func("conv", func(ctx context.Context, task *action.Task, out action.Output) error {
			mu.Lock()
			runs[task.Item.Name]++
			mu.Unlock()
			if strings.HasPrefix(task.Item.Name, "slow") && !resumed.Load() {
				started <- task.Item.Name
				<-ctx.Done() // until the cancel
				return ctx.Err()
			}
			return out.SetText(ctx, "text")
		}).WithSpec(func(s *action.Spec) { s.Concurrency = 2 })
		k := enginetest.StartWith(t, open, enginetest.Config{}, conv, ingest.New())
		var roots []engine.Root
		for _, n := range []string{"fast-0", "fast-1", "slow-2", "slow-3", "slow-4", "slow-5"} {
			roots = append(roots, engine.Root{Name: n, Size: 100})
		}
		job := k.StartJob(t, docsWorkflow, roots...)
		r := records{t: t, k: k, job: job.ID}
		for range 2 { // both slots held by slow files: the fast ones are done, two slow ones are ready
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("the slow files never started")
			}
		}
		poll.Until(t, 30*time.Second, "the fast files' documents", func() (bool, string) {
			docs := r.outputs(ingest.KindDocument)
			return len(docs) == 2, fmt.Sprint(docs)
		})
		if err := k.Engine.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, "every item settled", func() (bool, string) {
			p, err := k.Engine.Progress(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return p.Items[record.ItemWritten] == 0 && p.Tasks[record.TaskRunning] == 0, fmt.Sprint(p.Items, p.Tasks)
		})
		j, err := k.Store.JobGet(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "job state", j.State, record.JobCanceled)
		canceled := map[string]string{"slow-2": "canceled", "slow-3": "canceled", "slow-4": "canceled", "slow-5": "canceled"}
		equal(t, "errors after the cancel", r.outputs(ingest.KindError), canceled)
		equal(t, "documents after the cancel", len(r.outputs(ingest.KindDocument)), 2)
		for name := range canceled {
			if it := r.item(name); it.Error != "canceled" || it.State != record.ItemIngested {
				t.Errorf("%s after the cancel: %s %q, want ingested with the error canceled", name, it.State, it.Error)
			}
		}
		equal(t, "a running file's history", r.history("slow-2"), []string{"conv 1 canceled canceled"})
		equal(t, "a ready file's history", r.history("slow-4"), []string(nil))
		p, err := k.Engine.Progress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Fraction >= 0.5 || p.Fraction <= 0 {
			t.Errorf("canceled job's fraction = %v, want the third done (two files of six)", p.Fraction)
		}

		resumed.Store(true)
		r.retryToCompletion()
		equal(t, "documents after the retry", len(r.outputs(ingest.KindDocument)), 6)
		mu.Lock()
		equal(t, "conv runs", runs, map[string]int{"fast-0": 1, "fast-1": 1, "slow-2": 2, "slow-3": 2, "slow-4": 1, "slow-5": 1})
		mu.Unlock()
		equal(t, "a running file's history after the retry", r.history("slow-2"), []string{"conv 1 canceled canceled", "conv 2 complete", "collect 1 complete"})
		equal(t, "a canceled file's superseded outputs", r.superseded("slow-4"), []string{"error: canceled"})
	})
}

// TestFailSettlesEveryItem: a job that the event fail ends settles, as a cancel does, every item
// not yet processed — running, ready, or not started — with the error "not processed: the job
// failed" and an error output, so that documents and errors account for every file; and a retry
// runs exactly those items, and the one that failed, to completion.
func TestFailSettlesEveryItem(t *testing.T) {
	t.Parallel()
	const wf = "name: docs\nsteps:\n  conv: {action: conv, needs: [start], failure: [fail]}\n  collect: {action: ingest, needs: [children.done]}\n"
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		var mu sync.Mutex
		runs := map[string]int{}
		started := make(chan struct{})
		var once sync.Once
		var fixed atomic.Bool
		failed := make(chan struct{})
		conv := enginetest.Func("conv", func(ctx context.Context, task *action.Task, out action.Output) error {
			mu.Lock()
			runs[task.Item.Name]++
			mu.Unlock()
			switch {
			case fixed.Load() || strings.HasPrefix(task.Item.Name, "fast"):
				return out.SetText(ctx, "text")
			case task.Item.Name == "bad-3":
				select { // fails the job once slow-2 runs
				case <-started:
				case <-ctx.Done():
				}
				return action.Permanentf("broken")
			case task.Item.Name == "slow-2":
				once.Do(func() { close(started) })
				<-ctx.Done() // until the job fails
				return ctx.Err()
			}
			// A wait file, leased should a slot free before the failure commits: its result
			// comes in after the failure, whether or not the cancel reached it first.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-failed:
				return out.SetText(ctx, "text")
			}
		}).WithSpec(func(s *action.Spec) { s.Concurrency = 2 })
		k := enginetest.StartWith(t, open, enginetest.Config{}, conv, ingest.New())
		var roots []engine.Root
		for _, n := range []string{"fast-0", "fast-1", "slow-2", "bad-3", "wait-4", "wait-5"} {
			roots = append(roots, engine.Root{Name: n, Size: 100})
		}
		job := k.StartJob(t, wf, roots...)
		r := records{t: t, k: k, job: job.ID}
		poll.Until(t, 30*time.Second, "the job's end", func() (bool, string) {
			j, err := k.Store.JobGet(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State != record.JobRunning, string(j.State)
		})
		close(failed)
		poll.Until(t, 30*time.Second, "every item settled", func() (bool, string) {
			p, err := k.Engine.Progress(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return p.Items[record.ItemWritten] == 0 && p.Tasks[record.TaskRunning] == 0, fmt.Sprint(p.Items, p.Tasks)
		})
		j, err := k.Store.JobGet(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "job state", j.State, record.JobFailed)
		notRun := engine.JobFailedError
		equal(t, "errors after the failure", r.outputs(ingest.KindError), map[string]string{"slow-2": notRun, "bad-3": "broken", "wait-4": notRun, "wait-5": notRun})
		equal(t, "documents after the failure", len(r.outputs(ingest.KindDocument)), 2)
		for _, name := range []string{"slow-2", "wait-4", "wait-5"} {
			if it := r.item(name); it.Error != notRun || it.State != record.ItemIngested {
				t.Errorf("%s after the failure: %s %q, want ingested with the error %q", name, it.State, it.Error, notRun)
			}
		}
		equal(t, "a running file's history", r.history("slow-2"), []string{"conv 1 canceled " + notRun})

		fixed.Store(true)
		r.retryToCompletion()
		equal(t, "documents after the retry", len(r.outputs(ingest.KindDocument)), 6)
		mu.Lock()
		for name, n := range map[string]int{"fast-0": 1, "fast-1": 1, "slow-2": 2, "bad-3": 2} {
			equal(t, name+"'s runs", runs[name], n)
		}
		mu.Unlock()
		equal(t, "a not-started file's superseded outputs", r.superseded("wait-4"), []string{"error: " + notRun})
	})
}

// TestRetryCanceledJobWithoutCanceledTask: a task that completes as the cancel lands leaves
// its child without a task and its own collector unmade, and the cancel settles both with the
// error canceled — a canceled job with no canceled task. Its retry still re-runs those files:
// it finds the unstarted work as a resume does, and the job completes with every document.
func TestRetryCanceledJobWithoutCanceledTask(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		started, release := make(chan struct{}), make(chan struct{})
		var resumed atomic.Bool
		conv := enginetest.Func("conv", func(ctx context.Context, task *action.Task, out action.Output) error {
			ctx = context.WithoutCancel(ctx) // finishes what it started, cancel or not
			if task.Item.Name == "parent" && !resumed.Load() {
				close(started)
				<-release
			}
			if task.Item.ParentID == 0 {
				if err := out.CreateChild(ctx, action.Child{Name: "child", Blob: strings.NewReader("child")}); err != nil {
					return err
				}
			}
			return out.SetText(ctx, "text")
		})
		k := enginetest.StartWith(t, open, enginetest.Config{}, conv, ingest.New())
		job := k.StartJob(t, docsWorkflow, engine.Root{Name: "parent", Size: 100})
		r := records{t: t, k: k, job: job.ID}
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the parent's conversion never started")
		}
		if err := k.Engine.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		close(release)
		poll.Until(t, 30*time.Second, "every item settled", func() (bool, string) {
			p, err := k.Engine.Progress(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return p.Items[record.ItemWritten] == 0 && p.Items[record.ItemProcessed] == 0 && p.Tasks[record.TaskRunning] == 0, fmt.Sprint(p.Items, p.Tasks)
		})
		if j, err := k.Store.JobGet(t.Context(), job.ID); err != nil || j.State != record.JobCanceled {
			t.Fatalf("job after the cancel: %v %v", j, err)
		}
		equal(t, "errors after the cancel", r.outputs(ingest.KindError), map[string]string{"parent": "canceled", "child": "canceled"})
		equal(t, "the child's history after the cancel", r.history("child"), []string(nil))
		resumed.Store(true)
		r.retryToCompletion()
		equal(t, "documents after the retry", r.outputs(ingest.KindDocument), map[string]string{"child": ""}) // a container is no document
		equal(t, "the child's history", r.history("child"), []string{"conv 1 complete", "collect 1 complete"})
		equal(t, "the child's superseded outputs", r.superseded("child"), []string{"error: canceled"})
	})
}

// retryToCompletion retries the job and waits for it to complete with no error output left.
func (r records) retryToCompletion() {
	r.t.Helper()
	if _, err := r.k.Engine.Retry(r.t.Context(), r.job); err != nil {
		r.t.Fatal(err)
	}
	if j := r.k.WaitJob(r.t, r.job, 30*time.Second); j.State != record.JobComplete {
		r.t.Fatalf("job after the retry %s: %s", j.State, j.Error)
	}
	equal(r.t, "errors after the retry", r.outputs(ingest.KindError), map[string]string{})
}

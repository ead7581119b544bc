package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/store/drivertest"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
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

// runs counts what the test actions did, by "step item-name outcome".
type runs struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runs) add(step string, t *action.Task, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[step+" "+t.Item.Name+" "+outcome]++
}

func (r *runs) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.n))
	for k, v := range r.n {
		out[k] = v
	}
	return out
}

type bundle struct {
	e     *engine.Engine
	w     *worker.Worker
	db    store.Store
	blobs *blob.Dir
	runs  *runs
	// failOn names the item that step b fails on, permanently, until fixed is set.
	failOn atomic.Pointer[string]
	fixed  atomic.Bool
}

// openStore returns a fresh store of the driver (see drivertest), closed when t ends.
func openStore(t *testing.T, driver string) store.Store {
	t.Helper()
	if driver == "sqlite" {
		return drivertest.OpenSQLite(t)
	}
	return drivertest.OpenPostgres(t)
}

// setup starts an engine and a worker on a fresh store of the driver with the actions of
// retryWorkflow; step b fails on failOn (an item name). cache["b"] makes b's results cacheable
// (Policy.Cacheable).
func setup(t *testing.T, driver, failOn string, cache map[string]bool) *bundle {
	t.Helper()
	dir := t.TempDir()
	db := openStore(t, driver)
	blobs, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{db: db, blobs: blobs, runs: &runs{n: map[string]int{}}}
	b.failOn.Store(&failOn)
	ok := func(step string) *fn {
		return &fn{spec: action.Spec{Name: step}, run: func(ctx context.Context, t *action.Task, out action.Output) error {
			b.runs.add(step, t, "ok")
			return nil
		}}
	}
	split := &fn{spec: action.Spec{Name: "split"}, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		if t.Item.ParentID == 0 {
			for i := range 3 {
				if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%d", t.Item.Name, i)}); err != nil {
					return err
				}
			}
		}
		b.runs.add("split", t, "ok")
		return nil
	}}
	flaky := &fn{spec: action.Spec{Name: "b"}, policy: action.Policy{Cacheable: cache["b"]}, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		if t.Item.Name == *b.failOn.Load() && !b.fixed.Load() {
			b.runs.add("b", t, "failed")
			return action.Permanentf("converter missing")
		}
		b.runs.add("b", t, "ok")
		return nil
	}}
	cat := &action.Catalog{}
	cat.Register(split, ok("a"), flaky, ok("c"), ok("collect"), ok("note"))
	var w *worker.Worker
	b.e = engine.New(engine.Config{Store: db, Catalog: cat,
		OnReady:  func(qs []string) { w.Ready(qs) },
		OnCancel: func(ids []int64) { w.CancelTasks(ids) }})
	w = worker.New(worker.Config{Engine: b.e, Blobs: blobs, TempDir: dir, PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	b.w = w
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		w.Stop(sctx)
		cancel()
		db.Close()
	})
	return b
}

// retryWorkflow splits a root into three children that each run a, b and c in turn; the root
// collects once its children are done. failure is b's failure events.
func retryWorkflow(failure string) string {
	return `name: retry
steps:
  split: {action: split, needs: [start], success: [split.done]}
  a: {action: a, needs: [split.done], success: [a.done]}
  b: {action: b, needs: [a.done], success: [b.done], failure: [` + failure + `]}
  c: {action: c, needs: [b.done]}
  collect: {action: collect, needs: [children.done]}
`
}

// start applies the workflow and runs a job with one root "r", returning it once it has ended.
func (b *bundle) start(t *testing.T, wf string) *record.Job {
	t.Helper()
	if _, _, err := b.e.ApplyWorkflow(t.Context(), []byte(wf), "retry.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := b.e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "retry"})
	if err != nil {
		t.Fatal(err)
	}
	sha, size, err := b.blobs.Put(t.Context(), strings.NewReader("root"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.AddRoots(t.Context(), job, []engine.Root{{Name: "r", BlobSHA256: sha, Size: size}}); err != nil {
		t.Fatal(err)
	}
	return enginetest.WaitJob(t, b.e, job.ID, time.Minute)
}

// retry retries the job as a server does: in the worker's writer, where it does not contend with
// the transactions of tasks still finishing after the job failed.
func (b *bundle) retry(t *testing.T, id int64) {
	t.Helper()
	if err := b.w.Do(t.Context(), func(tx *engine.Tx) error { return tx.Retry(id) }); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) item(t *testing.T, jobID int64, name string) *record.Item {
	t.Helper()
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: jobID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("job %d has no item %q", jobID, name)
	return nil
}

func TestRetry(t *testing.T) {
	t.Parallel()
	// Each step succeeds once per item in the end (split creates children of the root only);
	// b fails on r/1 until fixed.
	done := map[string]int{}
	for _, name := range []string{"r", "r/0", "r/1", "r/2"} {
		for _, step := range []string{"split", "a", "b", "c", "collect"} {
			done[step+" "+name+" ok"] = 1
		}
	}
	for _, driver := range []string{"sqlite", "postgres"} {
		for _, tc := range []struct {
			name string
			// failure is b's failure event: "fail" fails the job; "noted" only records an item error.
			failure string
			// ended is the job's state after b failed.
			ended record.JobState
			// fix makes b succeed before the retry; without it the retry ends like the first run.
			fix bool
		}{
			{name: "failed job", failure: "fail", ended: record.JobFailed, fix: true},
			{name: "complete job with an item error", failure: "noted", ended: record.JobComplete, fix: true},
			{name: "failed job failing again", failure: "fail", ended: record.JobFailed},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, driver, "r/1", nil)
				wf := retryWorkflow(tc.failure)
				if tc.failure == "noted" {
					wf += "  note: {action: note, needs: [noted]}\n"
				}
				j := b.start(t, wf)
				if j.State != tc.ended {
					t.Fatalf("job %s (%q) after b failed, want %s", j.State, j.Error, tc.ended)
				}
				if it := b.item(t, j.ID, "r/1"); it.Error != "converter missing" {
					t.Fatalf("r/1 error = %q, want %q", it.Error, "converter missing")
				}
				before := b.runs.snapshot()
				if before["b r/1 failed"] != 1 {
					t.Fatalf("b failed on r/1 %d times, want 1: %v", before["b r/1 failed"], before)
				}

				b.fixed.Store(tc.fix)
				b.retry(t, j.ID)
				j = enginetest.WaitJob(t, b.e, j.ID, time.Minute)
				after := b.runs.snapshot()
				it := b.item(t, j.ID, "r/1")
				if !tc.fix {
					if j.State != record.JobFailed || it.Error != "converter missing" || after["b r/1 failed"] != 2 {
						t.Errorf("retry without a fix: job %s, r/1 error %q, b failed %d times; want failed, the error again, 2",
							j.State, it.Error, after["b r/1 failed"])
					}
					return
				}
				if j.State != record.JobComplete || j.Error != "" {
					t.Errorf("job after retry = %s %q, want complete with no error", j.State, j.Error)
				}
				if it.Error != "" || it.State != record.ItemIngested {
					t.Errorf("r/1 after retry = %s %q, want ingested with no error", it.State, it.Error)
				}
				want := map[string]int{"b r/1 failed": 1}
				for k, v := range done {
					want[k] = v
				}
				if tc.failure == "noted" {
					want["note r/1 ok"] = 1 // the failure path ran on the first failure and is not run again
					// The collector ran on the failed result, and runs again on the new one.
					want["collect r/1 ok"] = 2
				}
				if diff := diffCounts(after, want); diff != "" {
					t.Errorf("runs after retry (want every step to succeed exactly once per item):\n%s", diff)
				}
			})
		}
	}
}

func diffCounts(got, want map[string]int) string {
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	var lines []string
	for k := range keys {
		if got[k] != want[k] {
			lines = append(lines, fmt.Sprintf("  %s: got %d, want %d", k, got[k], want[k]))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestRetryRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", "r/1", nil)
	b.fixed.Store(true)
	complete := b.start(t, retryWorkflow("fail"))
	if complete.State != record.JobComplete {
		t.Fatalf("job %s, want complete", complete.State)
	}
	running, _, err := b.e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "retry", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	canceled, _, err := b.e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "retry", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.Cancel(t.Context(), canceled.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		id   int64
		want error
		msg  string
	}{
		{"complete with no failed task", complete.ID, engine.ErrNothingToRetry, fmt.Sprintf("job %d has no failed or canceled tasks", complete.ID)},
		{"running", running.ID, engine.ErrNotRetryable, fmt.Sprintf("job %d is running", running.ID)},
		{"canceled with nothing canceled", canceled.ID, engine.ErrNothingToRetry, fmt.Sprintf("job %d has no failed or canceled tasks", canceled.ID)},
		{"unknown", 1 << 40, store.ErrNotFound, "does not exist"},
	} {
		_, err := b.e.Retry(t.Context(), tc.id)
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("%s: Retry error = %v, want %v mentioning %q", tc.name, err, tc.want, tc.msg)
		}
	}
	if j, err := b.db.JobGet(t.Context(), complete.ID); err != nil || j.State != record.JobComplete {
		t.Errorf("complete job after a refused retry = %+v, %v", j, err)
	}
}

// TestRetryCachedError: a permanent error of an action whose results are cached by content is not
// replayed from the cache to the retried task: the action runs again.
func TestRetryCachedError(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", "r", map[string]bool{"b": true}) // only the root has a blob, so a cache key
	j := b.start(t, retryWorkflow("noted")+"  note: {action: note, needs: [noted]}\n")
	if it := b.item(t, j.ID, "r"); j.State != record.JobComplete || it.Error != "converter missing" {
		t.Fatalf("job %s, r error %q; want complete with the error on r", j.State, it.Error)
	}
	b.fixed.Store(true)
	b.retry(t, j.ID)
	j = enginetest.WaitJob(t, b.e, j.ID, time.Minute)
	if it := b.item(t, j.ID, "r"); j.State != record.JobComplete || it.Error != "" {
		t.Errorf("after retry: job %s, r error %q; want complete with no error", j.State, it.Error)
	}
	if got := b.runs.snapshot(); got["b r failed"] != 1 || got["b r ok"] != 1 {
		t.Errorf("b on r: failed %d, ok %d; want 1 and 1 (run again, not replayed from the cache)", got["b r failed"], got["b r ok"])
	}
}

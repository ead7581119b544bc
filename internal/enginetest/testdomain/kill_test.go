package testdomain_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/enginetest/testdomain"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// childEnv carries the child's store ("sqlite PATH" or "postgres SCHEMA URL") and blob dir.
const childEnv = "SLUICE_TESTDOMAIN_CHILD"

const (
	killItems = 300
	killKeys  = 4 // writes per item
	killJob   = "testdomain-kill"
)

// TestDomainWritesSurviveKill runs a job whose action writes to the test domain in a child
// process (this test binary), SIGKILLs it three times while tasks run and commit, and runs it
// to the end, on every driver: every item has its writes exactly once, each written by the
// attempt that completed its task — none lost, none duplicated, none from an attempt that died.
func TestDomainWritesSurviveKill(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		where, reopen := enginetest.ChildStore(t)
		run := func(killAfter int) bool {
			return enginetest.RunChild(t, childEnv+"="+where, killAfter, 2*time.Minute)
		}
		for i, after := range []int{20, 60, 100} {
			if run(after) {
				t.Fatalf("the job ended before kill %d", i+1)
			}
		}
		if !run(0) {
			t.Fatal("the last run ended without its job")
		}

		db := reopen()
		ctx := t.Context()
		job, err := db.JobGetByKey(ctx, killJob)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != record.JobComplete {
			t.Fatalf("job = %s (%s), want complete", job.State, job.Error)
		}
		tasks, err := db.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 10 * killItems})
		if err != nil {
			t.Fatal(err)
		}
		byItem := map[int64]*record.Task{}
		retried := 0
		for _, tk := range tasks {
			if tk.State != record.TaskComplete {
				t.Errorf("task %d = %s (%s), want complete", tk.ID, tk.State, tk.Error)
			}
			if tk.Attempt > 1 {
				retried++
			}
			byItem[tk.ItemID] = tk
		}
		if len(byItem) != killItems {
			t.Fatalf("%d tasks, want %d", len(byItem), killItems)
		}
		if retried == 0 {
			t.Error("no task ran twice: the kills interrupted no attempt")
		}
		rows, err := testdomain.Rows(ctx, db, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != killItems*killKeys {
			t.Errorf("%d rows, want %d (%d items × %d keys)", len(rows), killItems*killKeys, killItems, killKeys)
		}
		perItem := map[int64]int{}
		for _, r := range rows {
			perItem[r.ItemID]++
			tk := byItem[r.ItemID]
			if tk == nil || r.TaskID != tk.ID || r.Attempt != tk.Attempt {
				t.Errorf("row %+v: want written by the completing attempt of its task %+v", r, tk)
			}
		}
		for id, n := range perItem {
			if n != killKeys {
				t.Errorf("item %d has %d rows, want %d", id, n, killKeys)
			}
		}
		t.Logf("%d of %d tasks ran more than once", retried, killItems)
	})
}

// runChild is the child process: it opens the store, starts an engine with the test domain and
// a worker, creates (or finds) the job and waits for it to end.
func runChild() int {
	ctx := context.Background()
	db, err := enginetest.OpenChildStore(ctx, os.Getenv(childEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer db.Close()
	if err := child(ctx, db); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

func child(ctx context.Context, db store.Store) error {
	dir, err := os.MkdirTemp("", "testdomain-child-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	blobs, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	w := &killAction{started: func(id int64) { _ = out.Encode(id) }}
	cat := &action.Catalog{}
	cat.Register(w)
	ended := make(chan struct{}, 1)
	var wk *worker.Worker
	e := engine.New(engine.Config{Store: db, Catalog: cat,
		OnReady:  func(qs []string) { wk.Ready(qs) },
		OnJobEnd: func(int64, record.JobState) { ended <- struct{}{} }})
	if err := testdomain.Register(ctx, e); err != nil {
		return err
	}
	wk = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 20 * time.Millisecond})
	// The previous process is dead (the parent killed and waited for it): its running tasks
	// go back to ready now, as the embedded engine's start does.
	if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wk.Start(wctx)
	defer wk.Stop(context.Background())
	if _, _, err := e.ApplyWorkflow(ctx, []byte("name: kill\nsteps:\n  w: {action: w, needs: [start]}\n"), "kill.yaml"); err != nil {
		return err
	}
	job, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: "kill", Key: killJob, Open: true})
	if err != nil {
		return err
	}
	roots := make([]engine.Root, killItems)
	for i := range roots {
		roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%03d", i)}
	}
	if err := e.AddRoots(ctx, job, roots); err != nil {
		return err
	}
	if err := e.Seal(ctx, job.ID); err != nil {
		return err
	}
	return enginetest.AwaitJobEnd(ctx, db, job.ID, ended)
}

// killAction writes killKeys rows per item after a little work (a few hashes), so that a kill
// finds some tasks running and some results committing.
type killAction struct{ started func(taskID int64) }

func (a *killAction) Spec() action.Spec {
	return action.Spec{Name: "w", Concurrency: 8}
}

func (a *killAction) Policy() action.Policy { return action.Policy{NoTempDir: true} }

func (a *killAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	a.started(t.ID)
	sum := sha256.Sum256([]byte(t.Item.Name))
	for range 2000 {
		sum = sha256.Sum256(sum[:])
	}
	for k := range killKeys {
		if err := out.Write(action.DomainWrite{Domain: testdomain.Name, Key: fmt.Sprintf("k%d", k),
			Payload: map[string]any{"item": t.Item.Name, "sum": fmt.Sprintf("%x", sum[:4])}}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestHeldLeaseLost checks that a brief batch that never commits, whose lease then expires, is
// reclaimed as a lost attempt, so that a brief task that kills its process every time still
// ends, failed, after the step's attempts and the lost allowance. (The drivers' own tests cover
// a batch whose process dies before its transaction ends; here it rolls back, which leaves the
// tasks leased to the dead owner.)
func TestHeldLeaseLost(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			testHeldLeaseLost(t, driver)
		})
	}
}

func testHeldLeaseLost(t *testing.T, driver string) {
	ctx := t.Context()
	db := openStore(t, driver)
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "b"}, policy: action.Policy{Brief: true}}, "one", "name: one\nsteps:\n  b: {action: b, needs: [start], attempts: 2}\n", false)
	errDied := errors.New("process died")
	limit := 2 + engine.LostAllowance
	for attempt := 1; attempt <= limit; attempt++ {
		// A worker takes the task as a brief batch and dies before its results.
		err := db.InTx(ctx, func(x store.Executor) error {
			now := e.Now()
			held, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"b"}, Max: []int{10}, Owner: "dead", Now: now,
				LeaseUntil: now.Add(-time.Millisecond), Brief: true})
			if err != nil {
				return err
			}
			if len(held) != 1 || held[0].Attempt != attempt {
				return fmt.Errorf("held %+v, want the task at attempt %d", held, attempt)
			}
			if _, err := x.ItemLockMany(ctx, []int64{held[0].ItemID}); err != nil {
				return err
			}
			return errDied
		})
		if !errors.Is(err, errDied) {
			t.Fatal(err)
		}
		n, err := e.Reclaim(ctx, engine.ReclaimParams{})
		if err != nil || n != 1 {
			t.Fatalf("attempt %d: reclaimed %d, %v; want 1", attempt, n, err)
		}
	}
	tasks, err := db.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks = %v, %v", tasks, err)
	}
	tk := tasks[0]
	if tk.State != record.TaskFailed || tk.Attempt != limit || !strings.Contains(tk.Error, fmt.Sprintf("b failed %d times: worker lost (lease of dead expired)", limit)) {
		t.Fatalf("task after %d lost attempts = %+v, want failed with the lost attempts named", limit, tk)
	}
	if j, err := db.JobGet(ctx, job.ID); err != nil || j.State != record.JobComplete {
		t.Fatalf("job = %+v, %v; want complete (an item error does not fail it)", j, err)
	}
}

// oneRootJob makes an engine on db whose catalog holds one action (spec, succeeding at once),
// applies the workflow called name and starts a job of it (left open when open) with one root.
func oneRootJob(t *testing.T, db store.Store, a *fn, name, wf string, open bool) (*engine.Engine, *record.Job) {
	t.Helper()
	ctx := t.Context()
	cat := &action.Catalog{}
	a.run = func(context.Context, *action.Task, action.Output) error { return nil }
	cat.Register(a)
	e := engine.New(engine.Config{Store: db, Catalog: cat})
	if _, _, err := e.ApplyWorkflow(ctx, []byte(wf), name+".yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: name, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddRoots(ctx, job, []engine.Root{{Ordinal: 0, Name: "r"}}); err != nil {
		t.Fatal(err)
	}
	return e, job
}

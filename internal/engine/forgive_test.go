package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestSuspectsAreForgiven: when the embedded process dies with several tasks running, each is a
// suspect, not the culprit: up to SuspectAllowance such deaths do not count against a task, so a
// crash loop does not turn healthy files into errors; past it they count again, so a task that
// really kills its process still ends with a bounded, named error. A task alone at a death pays.
func TestSuspectsAreForgiven(t *testing.T) { onBothDrivers(t, suspectsAreForgiven) }

func suspectsAreForgiven(t *testing.T, driver string) {
	ctx := t.Context()
	db := openStore(t, driver)
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "b"}}, "two", "name: two\nsteps:\n  b: {action: b, needs: [start], attempts: 2}\n", true)
	if err := e.AddRoots(ctx, job, []engine.Root{{Ordinal: 1, Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	die := func() int {
		t.Helper()
		got := leaseB(t, db, 10, e.Now())
		if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	deaths := 0
	for die() == 2 {
		deaths++
		if deaths > engine.SuspectAllowance+engine.LostAllowance+10 {
			t.Fatal("the tasks never failed: a task that kills its process must end")
		}
	}
	// Both were forgiven SuspectAllowance times, then charged MaxAttempts + LostAllowance.
	if want := engine.SuspectAllowance + 2 + engine.LostAllowance; deaths != want {
		t.Errorf("the tasks failed after %d deaths, want %d", deaths, want)
	}
	tasks, err := db.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.State != record.TaskFailed || !strings.Contains(tk.Error, "worker lost") {
			t.Errorf("task %+v, want failed naming the lost worker", tk)
		}
	}
	atts, err := db.AttemptList(ctx, tasks[0].ID)
	if err != nil || !strings.Contains(atts[0].Error, "2 tasks were running when the process died, so it is a suspect") {
		t.Errorf("first attempt %+v, %v: want it forgiven as a suspect", atts[0], err)
	}
}

// TestLoneTaskPays: a task alone in a dead process is charged each time.
func TestLoneTaskPays(t *testing.T) { onBothDrivers(t, loneTaskPays) }

func loneTaskPays(t *testing.T, driver string) {
	ctx := t.Context()
	db := openStore(t, driver)
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "b"}}, "one", "name: one\nsteps:\n  b: {action: b, needs: [start], attempts: 2}\n", false)
	for i := 0; i < 2+engine.LostAllowance; i++ {
		leaseB(t, db, 10, e.Now())
		if _, err := e.Reclaim(context.Background(), engine.ReclaimParams{All: true}); err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := db.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(tasks) != 1 || tasks[0].State != record.TaskFailed {
		t.Fatalf("tasks %+v, %v: want failed after %d lone deaths", tasks, err, 2+engine.LostAllowance)
	}
}

// TestProgressIsNotALostAttempt: an attempt that committed children before its process died is
// not charged, even alone (an unpack resumes after its committed children, so one longer than
// the interval between crashes still finishes); one that committed nothing is.
func TestProgressIsNotALostAttempt(t *testing.T) { onBothDrivers(t, progressIsNotALostAttempt) }

func progressIsNotALostAttempt(t *testing.T, driver string) {
	ctx := t.Context()
	db := openStore(t, driver)
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "b"}}, "one", "name: one\nsteps:\n  b: {action: b, needs: [start], attempts: 2}\n", false)
	// The children get tasks of step b too; one lease at a time takes the root's first (it sorts
	// first), alone in its process.
	var rootTask int64
	lease := func() *record.Task {
		t.Helper()
		got := leaseB(t, db, 1, e.Now())
		if len(got) != 1 || (rootTask != 0 && got[0].ID != rootTask) {
			t.Fatalf("leased %+v, want the root's task %d alone", got, rootTask)
		}
		rootTask = got[0].ID
		return got[0]
	}
	rootState := func() *record.Task {
		t.Helper()
		tasks, err := db.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if tk.ID == rootTask {
				return tk
			}
		}
		t.Fatalf("the root's task %d is gone", rootTask)
		return nil
	}
	die := func() {
		t.Helper()
		if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
			t.Fatal(err)
		}
	}
	// Far more deaths than the task's bound (2 + LostAllowance), each after one more child.
	deaths := 2 + engine.LostAllowance + 5
	for i := 0; i < deaths; i++ {
		tk := lease()
		if err := e.Run(ctx, func(tx *engine.Tx) error {
			return tx.CreateChild(engine.ChildOf(tk, i, engine.Child{Name: fmt.Sprintf("r/%d", i)}, 0, 0))
		}); err != nil {
			t.Fatal(err)
		}
		die()
	}
	if tk := rootState(); tk.State != record.TaskReady {
		t.Fatalf("after %d deaths that each committed a child the task is %s (%s), want ready", deaths, tk.State, tk.Error)
	}
	atts, err := db.AttemptList(ctx, rootTask)
	if err != nil || len(atts) != deaths {
		t.Fatalf("%d attempts, %v; want %d", len(atts), err, deaths)
	}
	for _, a := range atts {
		if !strings.Contains(a.Error, "it committed 1 children first") {
			t.Errorf("attempt %q, want it forgiven for its committed child", a.Error)
		}
	}
	// Deaths without progress are charged: the task fails within its bound.
	for i := 0; i < 2+engine.LostAllowance; i++ {
		lease()
		die()
	}
	if tk := rootState(); tk.State != record.TaskFailed || !strings.Contains(tk.Error, "worker lost") {
		t.Fatalf("task %+v: want failed naming the lost worker after %d deaths without progress", tk, 2+engine.LostAllowance)
	}
}

// leaseB leases up to limit ready tasks of queue b at now, for an hour, for the owner "dead".
func leaseB(t *testing.T, db store.Store, limit int, now time.Time) []*record.Task {
	t.Helper()
	var got []*record.Task
	if err := db.InTx(t.Context(), func(x store.Executor) error {
		var err error
		got, err = x.TaskGetAvailable(t.Context(), store.TaskGetAvailableParams{Queues: []string{"b"}, Max: []int{limit}, Owner: "dead", Now: now, LeaseUntil: now.Add(time.Hour)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// onBothDrivers runs test on a SQLite and a PostgreSQL store, in parallel.
func onBothDrivers(t *testing.T, test func(t *testing.T, driver string)) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			test(t, driver)
		})
	}
}

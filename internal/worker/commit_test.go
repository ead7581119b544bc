package worker_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// TestResultThatCannotCommit runs an action whose result cannot be committed (a NaN metadata
// value: not JSON), leased and in a brief batch: the task ends failed at its first attempt
// with an error naming the reason, none of its effects applied, and the job ends — it does not
// stay running for as long as the worker lives, its lease renewed with every other.
func TestResultThatCannotCommit(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		for _, brief := range []bool{false, true} {
			t.Run(fmt.Sprintf("brief=%v", brief), func(t *testing.T) {
				t.Parallel()
				testResultThatCannotCommit(t, open, brief)
			})
		}
	})
}

func testResultThatCannotCommit(t *testing.T, open drivertest.Open, brief bool) {
	nan := &fn{spec: action.Spec{Name: "nan"}, policy: action.Policy{Brief: brief, NoTempDir: true}, run: func(ctx context.Context, tk *action.Task, out action.Output) error {
		if tk.Item.Ordinal == 0 {
			out.SetMetadata(map[string]any{"score": math.NaN()})
			if err := out.SetOutput(ctx, "doc", []byte(`{"x":1}`)); err != nil {
				return err
			}
		}
		return nil
	}}
	b := setupWith(t, open, func(c *worker.Config) { c.LeaseDuration = 600 * time.Millisecond }, nan)
	job := b.startJob(t, "nan", "name: nan\nsteps:\n  nan: {action: nan, needs: [start]}\n",
		engine.Root{Name: "bad"}, engine.Root{Ordinal: 1, Name: "good"})
	j := enginetest.WaitJob(t, b.e, job.ID, 30*time.Second)
	if j.State != record.JobComplete {
		t.Errorf("job = %s (%s), want complete (an item error does not fail it)", j.State, j.Error)
	}
	tasks, err := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("tasks = %v, %v; want 2", tasks, err)
	}
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]*record.Item{}
	for _, it := range items {
		byID[it.ID] = it
	}
	for _, tk := range tasks {
		it := byID[tk.ItemID]
		switch it.Name {
		case "bad":
			if tk.State != record.TaskFailed || tk.Attempt != 1 || !strings.Contains(tk.Error, "commit the result of nan") || !strings.Contains(tk.Error, "NaN") {
				t.Errorf("task of the NaN result = %s at attempt %d (%q), want failed at 1 naming the commit and NaN", tk.State, tk.Attempt, tk.Error)
			}
			if it.Error != tk.Error || string(it.Metadata) != "{}" {
				t.Errorf("item of the NaN result: error %q, metadata %s; want the task's error and no metadata", it.Error, it.Metadata)
			}
		default:
			if tk.State != record.TaskComplete {
				t.Errorf("task of the good item = %s (%q), want complete", tk.State, tk.Error)
			}
		}
	}
	outs, err := b.db.OutputList(t.Context(), store.OutputListParams{JobID: job.ID, Kind: "doc"})
	if err != nil || len(outs) != 0 {
		t.Errorf("outputs = %v, %v; want none (the failed result's effects are not applied)", outs, err)
	}
}

// TestRenewOnlyRunningTasks checks that a worker renews the leases of the tasks it runs and of
// no other task leased under its owner name: one it does not run is left to expire.
func TestRenewOnlyRunningTasks(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		started, release := make(chan int64, 1), make(chan struct{})
		block := &fn{spec: action.Spec{Name: "block"}, run: func(ctx context.Context, tk *action.Task, _ action.Output) error {
			started <- tk.ID
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
		const lease = 600 * time.Millisecond
		b := setupWith(t, open, func(c *worker.Config) { c.LeaseDuration = lease; c.Queues = []string{"block"} }, block)
		defer close(release)
		job := b.startJob(t, "block", "name: block\nsteps:\n  block: {action: block, needs: [start]}\n", engine.Root{Name: "r"})
		var running int64
		select {
		case running = <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the block task did not start")
		}
		// A task leased under the worker's owner name that the worker does not run (its result
		// was lost, say): here leased by hand from a queue the worker does not serve.
		ctx := t.Context()
		tk, err := b.db.TaskGet(ctx, running)
		if err != nil {
			t.Fatal(err)
		}
		now := b.e.Now()
		if _, err := b.db.TaskInsert(ctx, store.TaskInsertParams{JobID: job.ID, ItemID: tk.ItemID, Step: "stray", Action: "block", Queue: "stray",
			MaxAttempts: 1, Now: now}); err != nil {
			t.Fatal(err)
		}
		stray, err := b.db.TaskLease(ctx, store.TaskLeaseParams{Queue: "stray", Limit: 1, Owner: b.w.Owner(), Now: now, LeaseUntil: now.Add(lease)})
		if err != nil || len(stray) != 1 {
			t.Fatalf("lease the stray task = %v, %v", stray, err)
		}
		strayUntil := stray[0].LeaseExpires
		// Wait for two renewals of the running task past the stray lease's end.
		poll.Until(t, 30*time.Second, "the running task's lease renewed past the stray one's end", func() (bool, string) {
			got, err := b.db.TaskGet(ctx, running)
			if err != nil {
				t.Fatal(err)
			}
			return got.LeaseExpires.After(strayUntil.Add(lease / 3)), fmt.Sprintf("lease until %v, stray until %v", got.LeaseExpires, strayUntil)
		})
		got, err := b.db.TaskGet(ctx, stray[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != record.TaskRunning || !got.LeaseExpires.Equal(strayUntil) {
			t.Errorf("stray task = %s, lease until %v; want running with its lease unchanged at %v (not renewed)", got.State, got.LeaseExpires, strayUntil)
		}
	})
}

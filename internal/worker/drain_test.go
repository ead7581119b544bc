package worker_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

const drainWF = `
name: drain
steps:
  slow: {action: slow, needs: [start]}
`

// drainSetup starts a worker whose action "slow" signals started and then runs body; its log
// goes to the returned buffer. Leases last an hour: a task taken again in the test was
// released, not reclaimed after its lease expired.
func drainSetup(t *testing.T, open drivertest.Open, body func(ctx context.Context) error) (*bundle, *poll.Buffer, chan int64) {
	t.Helper()
	logs := &poll.Buffer{}
	started := make(chan int64, 16)
	slow := &fn{spec: action.Spec{Name: "slow"}, run: func(ctx context.Context, at *action.Task, _ action.Output) error {
		started <- at.ID
		return body(ctx)
	}}
	b := setupWith(t, open, func(c *worker.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
		c.LeaseDuration = time.Hour
	}, slow)
	return b, logs, started
}

// stopWithin stops b's worker with a drain of drain and fails t unless Stop returns within
// limit.
func stopWithin(t *testing.T, w *worker.Worker, drain, limit time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drain)
		defer cancel()
		w.Stop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(limit):
		t.Fatalf("Stop with a drain of %s still running after %s", drain, limit)
	}
	return time.Since(begin)
}

func taskOf(t *testing.T, db store.Store, id int64) *record.Task {
	t.Helper()
	tk, err := db.TaskGet(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestStopDrainsRunningTasks: a task that finishes within the drain has its result committed,
// and the log says so.
func TestStopDrainsRunningTasks(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		finish := make(chan struct{})
		b, logs, started := drainSetup(t, open, func(ctx context.Context) error { <-finish; return nil })
		job := b.startJob(t, "drain", drainWF, engine.Root{Name: "a"})
		id := <-started
		go func() {
			poll.Until(t, 10*time.Second, "the stop begun", func() (bool, string) {
				return strings.Contains(logs.String(), "running tasks may finish"), logs.String()
			})
			close(finish)
		}()
		stopWithin(t, b.w, time.Minute, 30*time.Second)
		if tk := taskOf(t, b.db, id); tk.State != record.TaskComplete {
			t.Errorf("task %s after the drain, want complete", tk.State)
		}
		if j, _ := b.db.JobGet(t.Context(), job.ID); j.State != record.JobComplete {
			t.Errorf("job %s, want complete", j.State)
		}
		if !strings.Contains(logs.String(), "task finished while draining") {
			t.Errorf("log says nothing of the task:\n%s", logs.String())
		}
	})
}

// TestStopReleasesAtDrainDeadline: a task still running when the drain ends is canceled and
// its lease released at its attempt: another worker takes it at once (its lease lasts an hour),
// without spending an attempt.
func TestStopReleasesAtDrainDeadline(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		var again atomic.Bool
		b, logs, started := drainSetup(t, open, func(ctx context.Context) error {
			if !again.Swap(true) { // only the first worker's attempt blocks
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		b.startJob(t, "drain", drainWF, engine.Root{Name: "a"})
		id := <-started
		took := stopWithin(t, b.w, 200*time.Millisecond, 10*time.Second)
		tk := taskOf(t, b.db, id)
		if tk.State != record.TaskReady || tk.LeaseOwner != "" || tk.Attempt != 0 {
			t.Fatalf("task after the stop: %s owner %q attempt %d, want ready, no owner, attempt 0 (refunded)", tk.State, tk.LeaseOwner, tk.Attempt)
		}
		for _, want := range []string{"drain ended; canceling the tasks still running", "task canceled by the stop: its lease is released", "task_id=" + itoa(id)} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}
		t.Logf("stopped in %s with a drain of 200ms", took)
		// Another worker, as another process would, takes it at once.
		w2 := worker.New(worker.Config{Engine: b.e, Blobs: b.blobs, TempDir: t.TempDir(), PollInterval: 20 * time.Millisecond, LeaseDuration: time.Hour})
		w2.Start(context.Background())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			w2.Stop(ctx)
		})
		poll.Until(t, 10*time.Second, "the released task completed by another worker", func() (bool, string) {
			tk := taskOf(t, b.db, id)
			return tk.State == record.TaskComplete, string(tk.State)
		})
		if tk := taskOf(t, b.db, id); tk.Attempt != 1 {
			t.Errorf("task completed at attempt %d, want 1: the canceled attempt is not spent", tk.Attempt)
		}
	})
}

// TestStopAbandonsTaskIgnoringCancel: a task that ignores its cancel does not hang Stop; its
// lease is released all the same and the log names it.
func TestStopAbandonsTaskIgnoringCancel(t *testing.T) {
	worker.SetAbandonAfter(t, 200*time.Millisecond) // not parallel: it sets a package variable
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		stuck := make(chan struct{})
		returned := make(chan struct{})
		b, logs, started := drainSetup(t, open, func(ctx context.Context) error {
			defer close(returned)
			<-stuck // ignores ctx
			return nil
		})
		t.Cleanup(func() { close(stuck); <-returned })
		b.startJob(t, "drain", drainWF, engine.Root{Name: "a"})
		id := <-started
		took := stopWithin(t, b.w, 200*time.Millisecond, 10*time.Second)
		if took > 5*time.Second {
			t.Errorf("Stop took %s, want about the drain and the abandon wait (0.4s)", took)
		}
		tk := taskOf(t, b.db, id)
		if tk.State != record.TaskReady || tk.Attempt != 0 {
			t.Errorf("abandoned task: %s attempt %d, want ready at attempt 0", tk.State, tk.Attempt)
		}
		if !strings.Contains(logs.String(), "task ignored its cancel: abandoned, its lease released") {
			t.Errorf("log lacks the abandoned task:\n%s", logs.String())
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestStopGivesBackTasksOfACanceledJobCanceled: a job canceled by another process (an engine
// whose cancel does not reach this worker's running actions) whose task still runs when the
// drain ends: the task ends canceled, not ready, and its item settles with the error canceled —
// a ready task of a canceled job would be run by no one and leave its item written.
func TestStopGivesBackTasksOfACanceledJobCanceled(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		b, _, started := drainSetup(t, open, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		job := b.startJob(t, "drain", drainWF, engine.Root{Name: "a"})
		id := <-started
		cat := &action.Catalog{}
		cat.Register(&fn{spec: action.Spec{Name: "slow"}})
		other := engine.New(engine.Config{Store: b.db, Catalog: cat}) // another process's
		if err := other.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		stopWithin(t, b.w, 200*time.Millisecond, 10*time.Second)
		if tk := taskOf(t, b.db, id); tk.State != record.TaskCanceled || tk.Error != engine.CanceledError {
			t.Errorf("task after the stop: %s %q, want canceled %q", tk.State, tk.Error, engine.CanceledError)
		}
		it, err := b.db.ItemGet(t.Context(), taskOf(t, b.db, id).ItemID)
		if err != nil {
			t.Fatal(err)
		}
		if it.State == record.ItemWritten || it.Error != engine.CanceledError {
			t.Errorf("item after the stop: %s %q, want settled with the error %q", it.State, it.Error, engine.CanceledError)
		}
	})
}

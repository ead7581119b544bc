package workerproto_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workerproto"
)

// TestDrainThenStop: once a drain begins no task is handed out, and a remote worker may still
// report the task it holds; Stop gives back the lease of a task still held — ready again, its
// attempt not spent — and the worker's later requests get 404.
func TestDrainThenStop(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	job := b.job(t, "one", "two", "three")
	finished, held := b.poll(t), b.poll(t)

	drained := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { b.srv.Drain(ctx); close(drained) }()
	waitFor(t, 5*time.Second, "polls answered at once", func() bool {
		th, err := b.client().Poll(t.Context(), "Pdf")
		return err == nil && th == nil
	})
	if err := finished.Post(t.Context(), "done", nil); err != nil {
		t.Fatalf("report the held task during the drain: %v", err)
	}
	select {
	case <-drained:
		t.Fatal("the drain ended with a task still held")
	default:
	}
	cancel()
	<-drained
	b.srv.Stop()

	if err := held.Post(t.Context(), "done", nil); !errors.Is(err, workerproto.ErrGone) {
		t.Errorf("report after the stop: %v, want ErrGone", err)
	}
	tasks, err := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	states := map[record.TaskState]int{}
	for _, tk := range tasks {
		if tk.Step != "convert" {
			continue
		}
		states[tk.State]++
		if tk.State == record.TaskRunning {
			t.Errorf("task %d still running after the stop", tk.ID)
		}
		if tk.State == record.TaskReady && tk.Attempt != 0 {
			t.Errorf("released task %d at attempt %d, want its attempt given back (0)", tk.ID, tk.Attempt)
		}
	}
	// The third root's convert task may not exist yet: its route runs in process.
	if states[record.TaskComplete] != 1 || states[record.TaskReady] < 1 {
		t.Errorf("convert tasks by state %v, want 1 complete (reported in the drain), the rest ready (released or never handed out)", states)
	}
}

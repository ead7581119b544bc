package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
)

// TestIdleTimeout: an action with Policy.IdleTimeout (unpack) that keeps making children runs
// past its timeout in one attempt — an archive of 100,000 entries on a loaded machine used to be
// cut off after ten minutes on each of its three attempts and fail — while one that makes no
// progress (a heartbeat is not progress) still times out.
//
// split makes a child every 20ms for 2.5 timeouts of 2s: only a stall of 100 steps cuts it off (a
// step of 100ms against a timeout of 1s was cut off once, in CI on a loaded machine).
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	const timeout, step = 2 * time.Second, 20 * time.Millisecond
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		var made, ran atomic.Int64 // children made, and how long its attempt ran
		split := enginetest.Func("split", func(ctx context.Context, tk *action.Task, out action.Output) error {
			start := time.Now()
			defer func() { ran.Store(int64(time.Since(start))) }()
			for i := 0; time.Since(start) < timeout*5/2; i++ {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(step): // the work of an entry
				}
				if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/%d", tk.Item.Name, i), Blob: strings.NewReader(fmt.Sprint(i))}); err != nil {
					return err
				}
				made.Store(int64(i + 1))
			}
			return nil
		}).WithPolicy(action.Policy{IdleTimeout: true})
		stuck := enginetest.Func("stuck", func(ctx context.Context, tk *action.Task, out action.Output) error {
			for {
				out.Heartbeat()
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(timeout / 10):
				}
			}
		}).WithPolicy(action.Policy{IdleTimeout: true})
		k := enginetest.Start(t, open, split, stuck)
		sha, size, err := k.Blobs.Put(t.Context(), strings.NewReader("archive"))
		if err != nil {
			t.Fatal(err)
		}
		job := k.StartJob(t, "name: split\nsteps:\n  split: {action: split, needs: [start], when: root, timeout: 2s}\n",
			engine.Root{Name: "a.zip", BlobSHA256: sha, Size: size})
		if j := k.WaitJob(t, job.ID, 60*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		for _, tk := range k.Tasks(t, job.ID) {
			if tk.Step == "split" && tk.State != record.TaskSkipped && (tk.State != record.TaskComplete || tk.Attempt != 1) {
				events, _ := k.Store.EventListByItem(t.Context(), tk.ItemID)
				t.Errorf("split: %s after %d attempts (%s), want complete after 1: it made progress every %s, its timeout is %s; events: %q",
					tk.State, tk.Attempt, tk.Error, step, timeout, events)
			}
		}
		if ran := time.Duration(ran.Load()); ran <= timeout || made.Load() < 10 {
			t.Errorf("split ran %s and made %d children, want longer than its timeout (%s), making progress", ran, made.Load(), timeout)
		}

		job = k.StartJob(t, "name: stuck\nsteps:\n  stuck: {action: stuck, needs: [start], timeout: 2s, attempts: 1}\n",
			engine.Root{Name: "r"})
		k.WaitJob(t, job.ID, 60*time.Second)
		for _, tk := range k.Tasks(t, job.ID) {
			if tk.Step == "stuck" && (tk.State != record.TaskFailed || !strings.Contains(tk.Error, "timed out: no progress for 2s")) {
				t.Errorf("stuck: %s (%q), want failed, timed out with no progress", tk.State, tk.Error)
			}
		}
	})
}

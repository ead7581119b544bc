package enginetest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
)

// TestKit runs a two-step workflow of function actions on every driver: each runs once per
// root, the second sees the first's metadata, and the job completes.
func TestKit(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		var runs atomic.Int64
		first := enginetest.Func("first", func(_ context.Context, tk *action.Task, out action.Output) error {
			runs.Add(1)
			out.SetMetadata(map[string]any{"seen": tk.Item.Name})
			return nil
		})
		second := enginetest.Func("second", func(_ context.Context, tk *action.Task, _ action.Output) error {
			runs.Add(1)
			if tk.Item.Metadata["seen"] != tk.Item.Name {
				return action.Permanentf("metadata %v, want seen=%s", tk.Item.Metadata, tk.Item.Name)
			}
			return nil
		}).WithPolicy(action.Policy{NoTempDir: true})
		k := enginetest.Start(t, open, first, second)
		job := k.StartJob(t, "name: kit\nsteps:\n  a: {action: first, needs: [start], success: [a.done]}\n  b: {action: second, needs: [a.done]}\n",
			engine.Root{Name: "x"}, engine.Root{Name: "y"})
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job = %s (%s), want complete", j.State, j.Error)
		}
		for _, tk := range k.Tasks(t, job.ID) {
			if tk.State != record.TaskComplete {
				t.Errorf("task %s of item %d = %s (%s), want complete", tk.Step, tk.ItemID, tk.State, tk.Error)
			}
		}
		if n := runs.Load(); n != 4 {
			t.Errorf("runs = %d, want 4", n)
		}
	})
}

package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
)

// TestRunawayRecursionEnds: a step on start whose every item makes a child (each child gets the
// same step) would grow the tree without end; the job's depth and item-count limits end it with
// a named error on the item that went too far, and the job ends.
func TestRunawayRecursionEnds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  func(*engine.Config)
		want string
	}{
		{"depth", func(c *engine.Config) { c.MaxItemDepth = 5 }, "item depth limit: a child at depth 6 is deeper than the job's limit of 5"},
		{"count", func(c *engine.Config) { c.MaxJobItems = 7 }, "item count limit: the job made more than 7 items"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
				again := enginetest.Func("again", func(ctx context.Context, task *action.Task, out action.Output) error {
					return out.CreateChild(ctx, action.Child{Name: task.Item.Name + "/again", Blob: strings.NewReader(task.Item.Name)})
				})
				k := enginetest.StartWith(t, open, enginetest.Config{Engine: tt.cfg}, again)
				job := k.StartJob(t, "name: loop\nsteps:\n  again: {action: again, needs: [start], attempts: 1}\n", engine.Root{Name: "r"})
				if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
					t.Fatalf("job %s: %s", j.State, j.Error)
				}
				found := false
				for _, task := range k.Tasks(t, job.ID) {
					if task.State == record.TaskFailed && strings.Contains(task.Error, tt.want) {
						found = true
					}
				}
				if !found {
					t.Errorf("no task failed with %q", tt.want)
				}
			})
		})
	}
}

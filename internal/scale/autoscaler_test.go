package scale_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/scale"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestAutoscalerUpAndDown runs 12 tasks of an action that holds each task until released
// under an autoscaler of 1–6 slots: the backlog takes it to 6, and the worker runs 6 at once
// (its default for the action is 4); once the tasks are done and the queue idle it comes back
// down to 1.
func TestAutoscalerUpAndDown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var running, most atomic.Int64
	hold := enginetest.Func("hold", func(ctx context.Context, _ *action.Task, _ action.Output) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	k := enginetest.Start(t, drivertest.OpenSQLite, hold)
	a := scale.NewAutoscaler(scale.AutoscalerConfig{Reader: k.Store, Set: k.Worker.SetConcurrency, Min: 1, Max: 6, Interval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	roots := make([]engine.Root, 12)
	for i := range roots {
		roots[i] = engine.Root{Name: fmt.Sprintf("r%d", i)}
	}
	job := k.StartJob(t, "name: held\nsteps:\n  h: {action: hold, needs: [start]}\n", roots...)
	poll.Until(t, 60*time.Second, "six tasks at once", func() (bool, string) {
		return most.Load() == 6, fmt.Sprintf("slots %d, most at once %d", a.Current(), most.Load())
	})
	close(release)
	if j := k.WaitJob(t, job.ID, 60*time.Second); j.State != "complete" {
		t.Fatalf("job %s", j.State)
	}
	poll.Until(t, 60*time.Second, "back to one slot", func() (bool, string) {
		return a.Current() == 1, fmt.Sprintf("slots %d", a.Current())
	})
}

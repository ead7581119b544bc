package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
)

// TestCanceledItemSaysSo: an item whose running task a cancel stopped ends with the error
// "canceled", not as if its work were done.
func TestCanceledItemSaysSo(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		started := make(chan struct{}, 1)
		wait := enginetest.Func("wait", func(ctx context.Context, task *action.Task, out action.Output) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		})
		k := enginetest.StartWith(t, open, enginetest.Config{}, wait)
		job := k.StartJob(t, "name: w\nsteps:\n  wait: {action: wait, needs: [start]}\n", engine.Root{Name: "r"})
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the task never started")
		}
		if err := k.Engine.Cancel(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, "the root's error \"canceled\"", func() (bool, string) {
			items, err := k.Store.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			return len(items) == 1 && items[0].Error == "canceled", fmt.Sprintf("%+v", items)
		})
	})
}

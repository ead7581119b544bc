package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/store"
)

// TestRetryClearsErrorOutputs: a file whose conversion failed is listed as an error; once a
// retry converts it, it is listed as a document only — the old error goes with the item's error.
func TestRetryClearsErrorOutputs(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		var fixed atomic.Bool
		conv := enginetest.Func("conv", func(ctx context.Context, task *action.Task, out action.Output) error {
			if !fixed.Load() {
				return action.Permanentf("converter missing")
			}
			return out.CreateChild(ctx, action.Child{Name: task.Item.Name + "/converted.txt", Blob: strings.NewReader("text")})
		})
		k := enginetest.StartWith(t, open, enginetest.Config{}, conv, ingest.New())
		job := k.StartJob(t, "name: docs\nsteps:\n  conv: {action: conv, needs: [start], when: root}\n  collect: {action: ingest, needs: [children.done]}\n",
			engine.Root{Name: "file.doc"})
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != store.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		outputs := func(kind string) []*store.Output {
			t.Helper()
			outs, err := k.Store.OutputList(t.Context(), store.OutputListParams{JobID: job.ID, Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			return outs
		}
		if n := len(outputs(ingest.KindError)); n != 1 {
			t.Fatalf("%d errors before the retry, want 1", n)
		}
		fixed.Store(true)
		if _, err := k.Engine.Retry(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != store.JobComplete {
			t.Fatalf("job after retry %s: %s", j.State, j.Error)
		}
		if errs, docs := outputs(ingest.KindError), outputs(ingest.KindDocument); len(errs) != 0 || len(docs) != 1 {
			t.Errorf("after the retry: %d errors and %d documents, want 0 and 1", len(errs), len(docs))
		}
	})
}

package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/ingest"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/worker"
)

// workers returns the item's attempts as "step attempt state worker".
func (r records) workers(name string) []string {
	r.t.Helper()
	atts, err := r.k.Engine.ItemHistory(r.t.Context(), r.item(name).ID)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		out = append(out, fmt.Sprintf("%s %d %s %s", a.Step, a.Attempt, a.State, a.Worker))
	}
	return out
}

// TestHistoryNamesEveryWorker: every attempt in an item's history names the worker that ran
// it, whichever way the task ran — an ordinary lease, a held batch, the engine's own run of an
// inline step (the engine's name) — and however it ended: failed, complete, or complete and
// then reused by a retry. The collector runs inline in each.
func TestHistoryNamesEveryWorker(t *testing.T) {
	t.Parallel()
	const eng, wrk = "engine-E", "worker-W"
	for _, tc := range []struct {
		name   string
		policy action.Policy
		// first is the worker of the conv step's first run: the engine's name when inline.
		first string
	}{
		{"local", action.Policy{}, wrk},
		{"held", action.Policy{Brief: true}, wrk},
		{"inline", action.Policy{Inline: action.InlineAlways}, eng},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
				var fixed atomic.Bool
				conv := enginetest.Func("conv", func(ctx context.Context, task *action.Task, out action.Output) error {
					if task.Item.Name == "a.pdf" && !fixed.Load() {
						return action.Permanentf("broken")
					}
					return out.SetText(ctx, "text")
				}).WithPolicy(tc.policy)
				k := enginetest.StartWith(t, open, enginetest.Config{
					Engine: func(c *engine.Config) { c.Owner = eng },
					Worker: func(c *worker.Config) { c.Owner = wrk },
				}, conv, ingest.New())
				job := k.StartJob(t, docsWorkflow, engine.Root{Name: "a.pdf"}, engine.Root{Name: "b.pdf"})
				if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
					t.Fatalf("job %s: %s", j.State, j.Error)
				}
				r := records{t: t, k: k, job: job.ID}
				equal(t, "a.pdf's history", r.workers("a.pdf"), []string{"conv 1 failed " + tc.first, "collect 1 complete " + eng})
				equal(t, "b.pdf's history", r.workers("b.pdf"), []string{"conv 1 complete " + tc.first, "collect 1 complete " + eng})

				fixed.Store(true)
				if _, err := k.Engine.Retry(t.Context(), job.ID); err != nil {
					t.Fatal(err)
				}
				if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
					t.Fatalf("job after the retry %s: %s", j.State, j.Error)
				}
				// A retry makes the existing task rows ready again: a worker leases them, the
				// collector too, whichever way they ran the first time.
				equal(t, "a.pdf's history after the retry", r.workers("a.pdf"), []string{"conv 1 failed " + tc.first, "conv 2 complete " + wrk,
					"collect 1 complete " + eng, "collect 2 complete " + wrk})
			})
		})
	}
}

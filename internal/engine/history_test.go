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

// jobHistory returns the job's attempts, read limit tasks at a time, as "item step attempt
// state worker"; it fails the test if an attempt started before its task was queued.
func (r records) jobHistory(limit int) []string {
	r.t.Helper()
	var out []string
	var after int64
	for page := 0; ; page++ {
		atts, last, err := r.k.Engine.JobHistory(r.t.Context(), r.job, after, limit)
		if err != nil {
			r.t.Fatal(err)
		}
		for _, a := range atts {
			if a.StartedAt.Before(a.QueuedAt) {
				r.t.Errorf("attempt %d of task %d started at %s, before its task was queued at %s", a.Attempt, a.TaskID, a.StartedAt, a.QueuedAt)
			}
			out = append(out, fmt.Sprintf("%d %s %d %s %s", a.ItemID, a.Step, a.Attempt, a.State, a.Worker))
		}
		if last == 0 {
			return out
		}
		if page > 1000 {
			r.t.Fatal("the job's history does not end")
		}
		after = last
	}
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
				// The job's history is its items' histories, task by task, however it is paged.
				whole := r.jobHistory(1000)
				equal(t, "the job's history read a task at a time", r.jobHistory(1), whole)
				if len(whole) != len(r.workers("a.pdf"))+len(r.workers("b.pdf")) {
					t.Errorf("the job's history has %d attempts: %q", len(whole), whole)
				}
			})
		})
	}
}

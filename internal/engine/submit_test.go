package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestSubmission checks the one way a job is submitted, on both drivers: roots are committed a
// batch at a time and the job stays running, unsealed, until Seal; a submission interrupted
// after some batches is taken up by its key — the roots recorded are known (Has) and left out,
// the others added — and once sealed the job completes with every root exactly once; the same
// key then finds a job that takes no roots, and a sealed submission refuses more.
func TestSubmission(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		ctx := t.Context()
		k := enginetest.Start(t, open, enginetest.Func("noop", func(context.Context, *action.Task, action.Output) error { return nil }))
		k.ApplyWorkflow(t, "name: submitted\nsteps:\n  a: {action: noop, needs: [start]}\n")
		const n = 1_200 // two full batches and part of a third
		roots := make([]engine.Root, n)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%04d", i)}
		}
		p := engine.SubmitParams{Workflow: "submitted", Key: "submission-test"}
		rootCount := func(jobID int64) int {
			var zero int64
			items, err := k.Store.ItemList(ctx, store.ItemListParams{JobID: jobID, ParentID: &zero, Limit: 2 * n})
			if err != nil {
				t.Fatal(err)
			}
			return len(items)
		}

		first, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if !first.Created() || !first.Open() {
			t.Fatalf("first submission: created %v, open %v; want both", first.Created(), first.Open())
		}
		if err := first.Add(ctx, roots...); err != nil {
			t.Fatal(err)
		}
		// Interrupted here: the full batches are committed, the rest is lost with the submission.
		job := first.Job()
		if got := rootCount(job.ID); got != 1_000 {
			t.Fatalf("after Add without Seal: %d roots recorded, want the two full batches (1000)", got)
		}

		again, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if again.Created() || !again.Open() || again.Job().ID != job.ID {
			t.Fatalf("submission by the same key: job %d, created %v, open %v; want job %d, found, open",
				again.Job().ID, again.Created(), again.Open(), job.ID)
		}
		for ord, want := range map[int]bool{0: true, 999: true, 1_000: false, n - 1: false} {
			if has, err := again.Has(ctx, ord); err != nil || has != want {
				t.Errorf("Has(%d) = %v, %v; want %v", ord, has, err, want)
			}
		}
		if st, err := k.Engine.JobState(ctx, job.ID); err != nil || st != record.JobRunning {
			t.Fatalf("unsealed job is %q (%v), want running until sealed", st, err)
		}
		if err := again.Add(ctx, roots...); err != nil {
			t.Fatal(err)
		}
		if err := again.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if final := k.WaitJob(t, job.ID, 2*time.Minute); final.State != record.JobComplete {
			t.Fatalf("sealed job ended %s (%s), want complete", final.State, final.Error)
		}
		if got := rootCount(job.ID); got != n {
			t.Errorf("%d roots recorded, want %d (each once)", got, n)
		}
		if err := again.Add(ctx, engine.Root{Ordinal: n, Name: "late"}); err == nil {
			t.Error("Add after Seal succeeded, want an error")
		}

		done, err := k.Engine.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if done.Created() || done.Open() {
			t.Fatalf("submission of a completed job: created %v, open %v; want found and closed", done.Created(), done.Open())
		}
		if err := done.Add(ctx, engine.Root{Ordinal: n, Name: "late"}); err != nil {
			t.Fatal(err)
		}
		if err := done.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		if got := rootCount(job.ID); got != n {
			t.Errorf("a closed submission added roots: %d recorded, want %d", got, n)
		}
	})
}

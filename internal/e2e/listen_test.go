package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// TestListenWakesOtherProcess shares one Postgres schema between two nodes: one creates the job
// and runs no action, the other runs them and polls only once an hour. The job can finish only
// if LISTEN/NOTIFY wakes the second node for each task the first node's (and its own) commits
// make ready.
func TestListenWakesOtherProcess(t *testing.T) {
	url := drivertest.DatabaseURL(t)
	schema := drivertest.Schema(t)
	t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
	open := func(queues []string) *node.Node {
		return startNode(t, node.Config{DataDir: t.TempDir(), Engine: true, Queues: queues, PollInterval: time.Hour,
			OpenStore: func(ctx context.Context) (store.Store, error) {
				return postgres.Open(ctx, postgres.Config{URL: url, Schema: schema})
			}})
	}
	front := open([]string{"none"})
	back := open([]string{"noop"})
	// back leased once as it started and found nothing; from now on only a wake-up brings it back
	// (its poll is an hour away). Steps two and three are made ready by back's own commits.
	wf := `name: chain
steps:
  one:   {action: noop, needs: [start], success: [one.done]}
  two:   {action: noop, needs: [one.done], success: [two.done]}
  three: {action: noop, needs: [two.done]}
`
	if _, _, err := front.Engine.ApplyWorkflow(t.Context(), []byte(wf), "chain.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := front.Engine.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "chain", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	roots := make([]engine.Root, 5)
	for i := range roots {
		roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%d", i)}
	}
	if err := front.Engine.AddRoots(t.Context(), job, roots); err != nil {
		t.Fatal(err)
	}
	if err := front.Engine.Seal(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "job complete", func() bool {
		j, err := front.Store.JobGet(t.Context(), job.ID)
		return err == nil && j.State == record.JobComplete
	})
	if got := back.Worker.Stats()["noop"].Runs; got != 15 {
		t.Errorf("back ran %d noop tasks, want 15", got)
	}
}

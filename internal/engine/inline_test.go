package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestInline runs a job whose steps are all inline with no worker at all: the engine must finish
// it inside the transactions that add and seal its roots, with each step's effects applied —
// including metadata a previous inline step merged in the same transaction — and an inline
// error failing its task for good and firing the step's failure events.
func TestInline(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		db := open(t)
		inline := func(name string, outcomes []string, run func(ctx context.Context, t *action.Task, out action.Output) error) action.Action {
			return &fn{spec: action.Spec{Name: name, Outcomes: outcomes}, policy: action.Policy{Inline: action.InlineAlways}, run: run}
		}
		cat := &action.Catalog{}
		cat.Register(
			inline("mark", []string{"marked"}, func(_ context.Context, t *action.Task, out action.Output) error {
				if t.Item.Name == "bad" {
					return errors.New("bad input")
				}
				out.SetMetadata(map[string]any{"mark": t.Item.Name + "!"})
				out.Emit("marked")
				return nil
			}),
			inline("copy", nil, func(ctx context.Context, t *action.Task, out action.Output) error {
				v, _ := json.Marshal(t.Item.Metadata["mark"])
				return out.SetOutput(ctx, "copy", v)
			}),
			inline("note", nil, func(ctx context.Context, t *action.Task, out action.Output) error {
				v, _ := json.Marshal(t.Item.Error)
				return out.SetOutput(ctx, "failed", v)
			}),
		)
		e := engine.New(engine.Config{Store: db, Catalog: cat})
		wf := `name: inline
steps:
  mark: {action: mark, needs: [start], failure: [mark.failed]}
  copy: {action: copy, needs: [marked]}
  note: {action: note, needs: [mark.failed]}
`
		if _, _, err := e.ApplyWorkflow(t.Context(), []byte(wf), "inline.yaml"); err != nil {
			t.Fatal(err)
		}
		job, _, err := e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "inline", Open: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.AddRoots(t.Context(), job, []engine.Root{{Ordinal: 0, Name: "good"}, {Ordinal: 1, Name: "bad"}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Seal(t.Context(), job.ID); err != nil {
			t.Fatal(err)
		}
		j, err := db.JobGet(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != record.JobComplete {
			t.Fatalf("job is %s (%s), want complete with no worker running", j.State, j.Error)
		}
		tasks, err := db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tk := range tasks {
			it, err := db.ItemGet(t.Context(), tk.ItemID)
			if err != nil {
				t.Fatal(err)
			}
			got[it.Name+" "+tk.Step] = string(tk.State) + " " + tk.Error
			if tk.Attempt != 1 || tk.StartedAt.IsZero() || !tk.FinishedAt.Equal(tk.StartedAt) {
				t.Errorf("%s %s: attempt %d, started %v, finished %v; want one attempt started and finished at once",
					it.Name, tk.Step, tk.Attempt, tk.StartedAt, tk.FinishedAt)
			}
		}
		want := map[string]string{
			"good mark": "complete ", "good copy": "complete ",
			"bad mark": "failed bad input", "bad note": "complete ",
		}
		if len(got) != len(want) {
			t.Errorf("tasks %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("task %q is %q, want %q", k, got[k], v)
			}
		}
		outs := map[string]string{}
		for _, kind := range []string{"copy", "failed"} {
			list, err := db.OutputList(t.Context(), store.OutputListParams{JobID: job.ID, Kind: kind, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range list {
				outs[kind] = string(o.Value)
			}
		}
		// copy saw the metadata mark merged in the same transaction; note saw the item's error.
		if outs["copy"] != `"good!"` || outs["failed"] != `"bad input"` {
			t.Errorf("outputs %v, want copy \"good!\" and failed \"bad input\"", outs)
		}
	})
}

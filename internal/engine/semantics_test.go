package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestChildMetadataWins checks that a child inherits its parent's metadata and options and that
// its own keys win: the parent's value used to win the merge, so a row could not say its role.
func TestChildMetadataWins(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{h.act("split", nil, func(ctx context.Context, t *action.Task, out action.Output) error {
				if t.Item.Depth > 0 {
					return nil
				}
				return out.CreateChild(ctx, action.Child{Name: "r/0",
					Metadata: map[string]any{"role": "row"}, Options: map[string]any{"lang": "fr"}})
			})}
		})
		h.startWorker()
		job := h.start("name: wf\nsteps:\n  split: {action: split, needs: [start]}\n", map[string]any{"role": "sheet", "source": "s3"},
			engine.Root{Name: "r", Options: map[string]any{"lang": "en", "ocr": true}})
		if j := h.wait(job.ID); j.State != store.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		child := h.items(job.ID)["r/0"]
		var md, opts map[string]any
		if err := json.Unmarshal(child.Metadata, &md); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(child.Options, &opts); err != nil {
			t.Fatal(err)
		}
		if md["role"] != "row" || md["source"] != "s3" {
			t.Errorf("child metadata %v, want its own role \"row\" over the parent's and the inherited source", md)
		}
		if opts["lang"] != "fr" || opts["ocr"] != true {
			t.Errorf("child options %v, want its own lang \"fr\" and the inherited ocr", opts)
		}
	})
}

// validate is an inline action that emits sheet.valid on a root and nothing on other items.
func validate() action.Action {
	return &fn{spec: action.Spec{Name: "validate", Outcomes: []string{"sheet.valid"}, Inline: action.InlineAlways},
		run: func(_ context.Context, t *action.Task, out action.Output) error {
			if t.Item.Depth == 0 {
				out.Emit("sheet.valid")
			}
			return nil
		}}
}

// TestChildrenDoneWaitsForFanOut checks that children.done does not fire on an item while a
// step that can create its children may still run: make-rows waits for the external approved,
// and children.done fired at once (the root had no children and no task of make-rows), so once
// approved came, collect ran beside make-rows and saw no rows.
func TestChildrenDoneWaitsForFanOut(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{validate(), h.act("make-rows", nil, rows(3)), h.act("collect", nil, nil)}
		})
		wf := `name: wf
external: [approved]
steps:
  validate:  {action: validate, needs: [start]}
  make-rows: {action: make-rows, needs: [sheet.valid, approved]}
  collect:   {action: collect, needs: [approved, children.done]}
`
		// No worker yet: validate runs inline, in the transaction that adds the root.
		job := h.start(wf, nil, engine.Root{Name: "sheet"})
		root := h.items(job.ID)["sheet"]
		events, err := h.db.EventListByItem(t.Context(), root.ID)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(events, "children.done") {
			t.Errorf("children.done fired on the root (events %v) while make-rows, which creates its children, waits for approved", events)
		}
		h.fire(job.ID, "sheet", "approved")
		if got := h.tasks(job.ID); got["sheet make-rows"] != store.TaskReady || got["sheet collect"] != "" {
			t.Fatalf("after approved: tasks %v; want make-rows ready and no collect task yet", got)
		}

		h.startWorker()
		// Each row waits for approved too (its collect needs it): approve the rows as they come.
		poll.Until(t, time.Minute, "the job to end", func() (bool, string) {
			for name := range h.items(job.ID) {
				if name != "sheet" {
					h.fire(job.ID, name, "approved")
				}
			}
			j, err := h.db.JobGet(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State != store.JobRunning, fmt.Sprint(h.tasks(job.ID))
		})
		if j := h.wait(job.ID); j.State != store.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		var makeRows, collect run
		last := 0
		for _, r := range h.runs() {
			switch {
			case r.item == "sheet" && r.step == "make-rows":
				makeRows = r
			case r.item == "sheet" && r.step == "collect":
				collect = r
			default:
				last = max(last, r.seq)
			}
		}
		if collect.seq == 0 || collect.seq < makeRows.seq || collect.seq < last || collect.children != 3 {
			t.Errorf("runs %+v: want the root's collect after make-rows and every row's runs, seeing 3 children", h.runs())
		}
	})
}

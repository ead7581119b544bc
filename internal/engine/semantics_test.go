package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestChildMetadataWins checks that a child inherits its parent's metadata and options and that
// its own keys win: the parent's value used to win the merge, so a row could not say its role.
func TestChildMetadataWins(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		var h *harness
		h = newHarness(t, open, &fn{spec: action.Spec{Name: "split"}, run: func(ctx context.Context, t *action.Task, out action.Output) error {
			if t.Item.Depth > 0 {
				return nil
			}
			return out.CreateChild(ctx, action.Child{Name: "r/0",
				Metadata: map[string]any{"role": "row"}, Options: map[string]any{"lang": "fr"}})
		}})
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

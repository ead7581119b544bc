package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
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
		if j := h.wait(job.ID); j.State != record.JobComplete {
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

// TestOptionsExact: an action reads its item's options as the user gave them, as it reads
// metadata — numbers as json.Number — so that a 20-digit option and 1.50 passed on (to a
// service, a template, a child) come out unchanged, not rounded through float64.
func TestOptionsExact(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		seen := make(chan []byte, 1)
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{h.act("look", nil, func(ctx context.Context, t *action.Task, out action.Output) error {
				b, err := json.Marshal(t.Item.Options)
				if err != nil {
					return err
				}
				if t.Item.Options["big"] != json.Number("12345678901234567890") {
					b = fmt.Appendf(b, " (big is a %T)", t.Item.Options["big"])
				}
				select {
				case seen <- b:
				default:
				}
				return nil
			})}
		})
		h.startWorker()
		job := h.start("name: wf\nsteps:\n  look: {action: look, needs: [start]}\n", nil,
			engine.Root{Name: "r", Options: map[string]any{"big": json.Number("12345678901234567890"), "price": json.Number("1.50")}})
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		const want = `{"big":12345678901234567890,"price":1.50}`
		if got := string(<-seen); got != want {
			t.Errorf("the action read options %s, want %s", got, want)
		}
	})
}

// validate is an inline action that emits sheet.valid on a root and nothing on other items.
func validate() action.Action {
	return &fn{spec: action.Spec{Name: "validate", Outcomes: []string{"sheet.valid"}}, policy: action.Policy{Inline: action.InlineAlways},
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
		if got := h.tasks(job.ID); got["sheet make-rows"] != record.TaskReady || got["sheet collect"] != "" {
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
			return j.State != record.JobRunning, fmt.Sprint(h.tasks(job.ID))
		})
		if j := h.wait(job.ID); j.State != record.JobComplete {
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

// TestWhen checks that a step whose when: condition does not hold for an item is skipped as the
// item is created — a task recorded skipped (attempt 0) and counted in the job's progress — and
// never fires its events, while the steps that apply run; on every kind of condition.
func TestWhen(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{
				h.act("split", nil, func(ctx context.Context, t *action.Task, out action.Output) error {
					if t.Item.Depth > 0 {
						return nil
					}
					if err := out.CreateChild(ctx, action.Child{Name: "r/a.tif", ContentType: "image/tiff", Metadata: map[string]any{"role": "preservation"}}); err != nil {
						return err
					}
					return out.CreateChild(ctx, action.Child{Name: "r/b.txt", ContentType: "text/plain"})
				}),
				h.act("note", nil, nil),
			}
		})
		h.startWorker()
		wf := `name: wf
steps:
  split:    {action: split, needs: [start], when: root}
  image:    {action: note, needs: [start], when: 'content_type.startsWith("image/")', success: [imaged]}
  after:    {action: note, needs: [imaged]}
  preserve: {action: note, needs: [start], when: metadata.role == "preservation" && !root}
  txt:      {action: note, needs: [start], when: name.endsWith(".txt") || options.all == true}
  summary:  {action: note, needs: [children.done], when: depth == 0}
`
		job := h.start(wf, nil, engine.Root{Name: "r"})
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		want := map[string]record.TaskState{
			"r split": record.TaskComplete, "r image": record.TaskSkipped, "r preserve": record.TaskSkipped, "r txt": record.TaskSkipped, "r summary": record.TaskComplete,
			"r/a.tif split": record.TaskSkipped, "r/a.tif image": record.TaskComplete, "r/a.tif after": record.TaskComplete,
			"r/a.tif preserve": record.TaskComplete, "r/a.tif txt": record.TaskSkipped, "r/a.tif summary": record.TaskSkipped,
			"r/b.txt split": record.TaskSkipped, "r/b.txt image": record.TaskSkipped, "r/b.txt preserve": record.TaskSkipped,
			"r/b.txt txt": record.TaskComplete, "r/b.txt summary": record.TaskSkipped,
			// after has no condition: it needs imaged, which a skipped image never fires, so
			// it has no task on r and r/b.txt (skipped implicitly, as ever).
		}
		got := h.tasks(job.ID)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("task %q is %q, want %q", k, got[k], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("tasks %v, want %v", got, want)
		}
		list, err := h.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, State: record.TaskSkipped, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range list {
			if tk.Attempt != 0 {
				t.Errorf("skipped task %s of item %d has attempt %d, want 0: it never ran", tk.Step, tk.ItemID, tk.Attempt)
			}
		}
		p, err := h.e.Progress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Tasks[record.TaskSkipped] != 10 || p.Tasks[record.TaskComplete] != 6 || p.Fraction != 1 {
			t.Errorf("progress %+v, want 10 tasks skipped, 6 complete, all done", p)
		}
	})
}

// TestApprovalGate is the Meadow-shaped workflow of issue #15: an ingest sheet is validated,
// waits for an approval (external) before its rows are made, each row runs its own chain, and
// the sheet's collector runs once every row is done. The approval applies to the sheet only
// (when: root): without when:, a step needing approved held every row open, and the job ran at
// 13 % with all its work done until approved was fired on each row too.
func TestApprovalGate(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{h.act("validate", nil, nil), h.act("make-rows", nil, rows(3)),
				h.act("digest", nil, nil), h.act("copy", nil, nil), h.act("collect", nil, nil)}
		})
		h.startWorker()
		wf := `name: wf
external: [approved]
steps:
  validate:  {action: validate, needs: [start], when: root, success: [sheet.valid]}
  make-rows: {action: make-rows, needs: [sheet.valid, approved], when: root}
  digest:    {action: digest, needs: [start], when: "!root", success: [digested]}
  copy:      {action: copy, needs: [digested], when: "!root", success: [copied]}
  collect:   {action: collect, needs: [approved, children.done], when: root}
`
		job := h.start(wf, nil, engine.Root{Name: "sheet"})
		poll.Until(t, time.Minute, "the sheet to be validated", func() (bool, string) {
			got := h.tasks(job.ID)
			return got["sheet validate"] == record.TaskComplete, fmt.Sprint(got)
		})
		// The sheet waits for its approval, and nothing else of it runs meanwhile.
		root := h.items(job.ID)["sheet"]
		events, err := h.db.EventListByItem(t.Context(), root.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j, _ := h.db.JobGet(t.Context(), job.ID); root.State != record.ItemWritten || j.State != record.JobRunning || slices.Contains(events, "children.done") {
			t.Fatalf("before approval: sheet %s with events %v, job %s; want the sheet open, waiting, without children.done", root.State, events, j.State)
		}

		h.fire(job.ID, "sheet", "approved") // on the sheet only
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete with approved fired on the sheet alone", j.State, j.Error)
		}
		got := h.tasks(job.ID)
		for _, step := range []string{"validate", "make-rows", "collect"} {
			if got["sheet "+step] != record.TaskComplete {
				t.Errorf("sheet %s is %q, want complete", step, got["sheet "+step])
			}
		}
		for i := range 3 {
			row := fmt.Sprintf("sheet/row-%d", i)
			for step, state := range map[string]record.TaskState{"validate": record.TaskSkipped, "make-rows": record.TaskSkipped, "collect": record.TaskSkipped,
				"digest": record.TaskComplete, "copy": record.TaskComplete} {
				if got[row+" "+step] != state {
					t.Errorf("%s %s is %q, want %q", row, step, got[row+" "+step], state)
				}
			}
		}
		var collect run
		last := 0
		for _, r := range h.runs() {
			if r.item == "sheet" && r.step == "collect" {
				collect = r
			} else {
				last = max(last, r.seq)
			}
		}
		if collect.seq == 0 || collect.seq < last || collect.children != 3 {
			t.Errorf("runs %+v: want the sheet's collect strictly after every other run, seeing 3 rows", h.runs())
		}
		if p, err := h.e.Progress(t.Context(), job.ID); err != nil || p.Fraction != 1 {
			t.Errorf("progress %+v, %v; want all done", p, err)
		}
	})
}

// TestFailureOutcome checks that the outcome events an action emitted before failing for good
// fire with the step's failure events, and its success events do not: an http status mapped to
// a failure outcome (platform-404) ran the next step's success path too. A transient error's
// events, once its attempts are spent, do not fire.
func TestFailureOutcome(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		h := newHarness(t, open, func(h *harness) []action.Action {
			return []action.Action{
				h.act("call", []string{"platform-404"}, func(_ context.Context, t *action.Task, out action.Output) error {
					out.Emit("platform-404")
					if t.Item.Name == "flaky" {
						return errors.New("connection reset")
					}
					return action.Permanentf("status 404 (platform-404): no such record")
				}),
				h.act("note", nil, nil),
			}
		})
		h.startWorker()
		wf := `name: wf
steps:
  call:   {action: call, needs: [start], success: [called], failure: [call-failed], attempts: 1}
  next:   {action: note, needs: [called]}
  on-404: {action: note, needs: [platform-404]}
  failed: {action: note, needs: [call-failed]}
`
		job := h.start(wf, nil, engine.Root{Ordinal: 0, Name: "gone"}, engine.Root{Ordinal: 1, Name: "flaky"})
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		want := map[string]record.TaskState{
			"gone call": record.TaskFailed, "gone on-404": record.TaskComplete, "gone failed": record.TaskComplete,
			"flaky call": record.TaskFailed, "flaky failed": record.TaskComplete,
		}
		if got := h.tasks(job.ID); !maps.Equal(got, want) {
			t.Errorf("tasks %v, want %v (no next after a failure; platform-404 only for the permanent one)", got, want)
		}
		if it := h.items(job.ID)["gone"]; it.Error != "status 404 (platform-404): no such record" {
			t.Errorf("item error %q, want the status", it.Error)
		}
	})
}

// TestDeadline checks waits with a deadline: a step waiting for an external event is skipped
// with a deadline error once its deadline passes, fires its failure path, and lets its item (and
// job) end; where the event came in time, the step runs and its wait is gone. A step that needs
// only external events waits from the item's creation; one with other needs, from when they
// have fired.
func TestDeadline(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		h := newHarness(t, open, func(h *harness) []action.Action { return []action.Action{h.act("note", nil, nil)} })
		h.startWorker()
		wf := `name: wf
external: [approved]
steps:
  check:   {action: note, needs: [start], success: [checked]}
  approve: {action: note, needs: [checked, approved], deadline: 1h, failure: [expired]}
  notify:  {action: note, needs: [approved], deadline: 2h}
  expired: {action: note, needs: [expired]}
`
		job := h.start(wf, nil, engine.Root{Ordinal: 0, Name: "late"}, engine.Root{Ordinal: 1, Name: "prompt"})
		waits := func() map[string]time.Duration {
			list, err := h.db.WaitListByJob(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			names := map[int64]string{}
			for name, it := range h.items(job.ID) {
				names[it.ID] = name
			}
			out := map[string]time.Duration{}
			for _, w := range list {
				out[names[w.ItemID]+" "+w.Step] = w.Due.Sub(job.CreatedAt).Round(time.Hour)
			}
			return out
		}
		poll.Until(t, time.Minute, "both items to wait for approved", func() (bool, string) {
			w := waits()
			return len(w) == 4, fmt.Sprint(w)
		})
		if w := waits(); w["late approve"] != time.Hour || w["late notify"] != 2*time.Hour {
			t.Errorf("waits %v, want approve due in 1h and notify in 2h", w)
		}
		h.fire(job.ID, "prompt", "approved")
		poll.Until(t, time.Minute, "prompt's waits to end", func() (bool, string) {
			w := waits()
			return len(w) == 2, fmt.Sprint(w)
		})
		if n, err := h.e.ExpireWaits(t.Context(), 0); err != nil || n != 0 {
			t.Fatalf("ExpireWaits before the deadline = %d, %v; want none", n, err)
		}
		if j, _ := h.db.JobGet(t.Context(), job.ID); j.State != record.JobRunning {
			t.Fatalf("job %s while late waits, want running", j.State)
		}

		h.skew.Store(int64(3 * time.Hour))
		if n, err := h.e.ExpireWaits(t.Context(), 0); err != nil || n != 2 {
			t.Fatalf("ExpireWaits after the deadlines = %d, %v; want 2", n, err)
		}
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		want := map[string]record.TaskState{
			"late check": record.TaskComplete, "late approve": record.TaskSkipped, "late notify": record.TaskSkipped, "late expired": record.TaskComplete,
			"prompt check": record.TaskComplete, "prompt approve": record.TaskComplete, "prompt notify": record.TaskComplete,
		}
		if got := h.tasks(job.ID); !maps.Equal(got, want) {
			t.Errorf("tasks %v, want %v", got, want)
		}
		if it := h.items(job.ID)["late"]; it.Error != "deadline: waited 1h0m0s for approved" {
			t.Errorf("late's error %q, want the deadline of approve", it.Error)
		}
		if w := waits(); len(w) != 0 {
			t.Errorf("waits left: %v", w)
		}
	})
}

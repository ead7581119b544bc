package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// harness is an engine on a fresh store of one driver with the test's actions, and a worker
// started when the test asks (so it can look at what is ready before anything runs).
type harness struct {
	t     *testing.T
	db    store.Store
	e     *engine.Engine
	w     *worker.Worker
	blobs *blob.Dir
	dir   string
	// skew is added to the engine's clock (nanoseconds), so a test can move time on.
	skew atomic.Int64
	// log records the action runs in the order they started.
	mu  sync.Mutex
	log []run
}

// run is one action run seen by the harness.
type run struct {
	seq  int
	step string
	item string
	// children is the number of children the item had when the run started.
	children int
}

// newHarness makes the harness; actions returns the actions of its catalog (made with
// [harness.act] to record their runs).
func newHarness(t *testing.T, open drivertest.Open, actions func(h *harness) []action.Action) *harness {
	t.Helper()
	h := &harness{t: t, db: open(t), dir: t.TempDir()}
	var err error
	if h.blobs, err = blob.NewDir(filepath.Join(h.dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	cat := &action.Catalog{}
	cat.Register(actions(h)...)
	h.e = engine.New(engine.Config{Store: h.db, Catalog: cat,
		Now: func() time.Time { return time.Now().Add(time.Duration(h.skew.Load())) },
		OnReady: func(qs []string) {
			if w := h.worker(); w != nil {
				w.Ready(qs)
			}
		}})
	return h
}

func (h *harness) worker() *worker.Worker {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.w
}

// startWorker starts a worker, stopped when the test ends.
func (h *harness) startWorker() {
	w := worker.New(worker.Config{Engine: h.e, Blobs: h.blobs, TempDir: h.dir, PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	h.mu.Lock()
	h.w = w
	h.mu.Unlock()
	h.t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		w.Stop(sctx)
		cancel()
	})
}

// act returns an action named name that records its runs and then does do (when not nil).
func (h *harness) act(name string, outcomes []string, do func(ctx context.Context, t *action.Task, out action.Output) error) action.Action {
	return &fn{spec: action.Spec{Name: name, Outcomes: outcomes}, run: func(ctx context.Context, t *action.Task, out action.Output) error {
		h.mu.Lock()
		h.log = append(h.log, run{seq: len(h.log) + 1, step: t.Step, item: t.Item.Name, children: t.Item.NChildren})
		h.mu.Unlock()
		if do == nil {
			return nil
		}
		return do(ctx, t, out)
	}}
}

// runs returns the runs so far, in the order they started.
func (h *harness) runs() []run {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]run(nil), h.log...)
}

// start applies the workflow (its name must be "wf") and starts a job of it with roots.
func (h *harness) start(wf string, meta map[string]any, roots ...engine.Root) *record.Job {
	h.t.Helper()
	ctx := h.t.Context()
	if _, _, err := h.e.ApplyWorkflow(ctx, []byte(wf), "wf.yaml"); err != nil {
		h.t.Fatal(err)
	}
	job, _, err := h.e.CreateJob(ctx, engine.CreateJobParams{Workflow: "wf", Metadata: meta})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.e.AddRoots(ctx, job, roots); err != nil {
		h.t.Fatal(err)
	}
	return job
}

// wait waits for the job to end.
func (h *harness) wait(id int64) *record.Job {
	h.t.Helper()
	var j *record.Job
	poll.Until(h.t, time.Minute, fmt.Sprintf("job %d to end", id), func() (bool, string) {
		var err error
		if j, err = h.db.JobGet(h.t.Context(), id); err != nil {
			h.t.Fatal(err)
		}
		p, _ := h.e.Progress(h.t.Context(), id)
		return j.State != record.JobRunning, fmt.Sprintf("%+v; tasks %v", p, h.tasks(id))
	})
	return j
}

// items returns the job's items by name.
func (h *harness) items(jobID int64) map[string]*record.Item {
	h.t.Helper()
	list, err := h.db.ItemList(h.t.Context(), store.ItemListParams{JobID: jobID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	out := make(map[string]*record.Item, len(list))
	for _, it := range list {
		out[it.Name] = it
	}
	return out
}

// tasks returns the states of the job's task rows by "item step".
func (h *harness) tasks(jobID int64) map[string]record.TaskState {
	h.t.Helper()
	names := map[int64]string{}
	for name, it := range h.items(jobID) {
		names[it.ID] = name
	}
	list, err := h.db.TaskListByJob(h.t.Context(), store.TaskListParams{JobID: jobID, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	out := make(map[string]record.TaskState, len(list))
	for _, tk := range list {
		out[names[tk.ItemID]+" "+tk.Step] = tk.State
	}
	return out
}

// fire fires an external event on the named item.
func (h *harness) fire(jobID int64, item, event string) {
	h.t.Helper()
	it := h.items(jobID)[item]
	if it == nil {
		h.t.Fatalf("job %d has no item %q", jobID, item)
	}
	if _, err := h.e.FireExternal(h.t.Context(), it.ID, event); err != nil {
		h.t.Fatal(err)
	}
}

// rows is an action body that creates n children named ITEM/row-I of a root (and none of
// another item), each with the metadata {"row": I}.
func rows(n int) func(ctx context.Context, t *action.Task, out action.Output) error {
	return func(ctx context.Context, t *action.Task, out action.Output) error {
		if t.Item.Depth > 0 {
			return nil
		}
		for i := range n {
			if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("%s/row-%d", t.Item.Name, i), Metadata: map[string]any{"row": i}}); err != nil {
				return err
			}
		}
		return nil
	}
}

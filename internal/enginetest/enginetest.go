// Package enginetest is a kit for tests that run workflows end to end in one process (River's
// rivertest in spirit): it opens a store on each driver ([ForEachDriver]: SQLite, and Postgres
// when SLUICE_TEST_DATABASE_URL is set), starts an engine and a worker on it ([Start]), applies
// workflows, starts jobs and waits for them with a deadline, and makes actions of plain
// functions ([Func]). Everything it starts is stopped when the test ends. Package testdomain is
// a domain for tests of domain writes; package domaintest is the conformance kit every domain
// runs.
package enginetest

import (
	"context"
	"fmt"
	"path/filepath"
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

// Open opens a new, empty, migrated store that is closed when the test ends (see drivertest).
type Open = drivertest.Open

// ForEachDriver runs fn as a subtest per store driver, "sqlite" and "postgres" (see
// drivertest.ForEach: the Postgres subtest skips without a database, or fails when one is
// required).
func ForEachDriver(t *testing.T, fn func(t *testing.T, open Open)) {
	t.Helper()
	drivertest.ForEach(t, fn)
}

// FuncAction is an in-memory action that runs a function; its Spec and Policy may be changed
// before it is registered.
type FuncAction struct {
	S  action.Spec
	P  action.Policy
	Fn func(ctx context.Context, t *action.Task, out action.Output) error
}

// Func returns an action called name that runs fn.
func Func(name string, fn func(ctx context.Context, t *action.Task, out action.Output) error) *FuncAction {
	return &FuncAction{S: action.Spec{Name: name}, Fn: fn}
}

// WithSpec changes the action's spec with edit and returns the action.
func (f *FuncAction) WithSpec(edit func(*action.Spec)) *FuncAction {
	edit(&f.S)
	return f
}

// WithPolicy sets the action's policy to p and returns the action.
func (f *FuncAction) WithPolicy(p action.Policy) *FuncAction {
	f.P = p
	return f
}

// Spec implements [action.Action].
func (f *FuncAction) Spec() action.Spec { return f.S }

// Policy is the action's policy, which [action.Catalog.Register] reads.
func (f *FuncAction) Policy() action.Policy { return f.P }

// Run implements [action.Action].
func (f *FuncAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	return f.Fn(ctx, t, out)
}

// Config tunes what [StartWith] starts. The zero value starts an engine and a worker with the
// worker's defaults, polling every 50 ms.
type Config struct {
	// Engine, when set, edits the engine's configuration before it is made (its store, catalog
	// and wake-ups are set already).
	Engine func(*engine.Config)
	// Worker, when set, edits the worker's configuration before it is made.
	Worker func(*worker.Config)
	// Domains are registered with the engine (their migrations applied) before the worker starts.
	Domains map[string]engine.Domain
}

// Kit is an engine and a worker running on one store.
type Kit struct {
	Engine *engine.Engine
	Worker *worker.Worker
	Store  store.Store
	Blobs  *blob.Dir
	// Dir is the kit's temporary directory (blobs, the worker's temp dirs).
	Dir string
}

// Start opens a store with open and starts an engine and a worker on it with the actions.
func Start(t testing.TB, open Open, actions ...action.Action) *Kit {
	t.Helper()
	return StartWith(t, open, Config{}, actions...)
}

// StartWith is [Start] with a configuration. The worker is stopped (5 s for its running tasks)
// and the store closed when t ends.
func StartWith(t testing.TB, open Open, cfg Config, actions ...action.Action) *Kit {
	t.Helper()
	dir := t.TempDir()
	db := open(t)
	blobs, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	cat := &action.Catalog{}
	cat.Register(actions...)
	var w *worker.Worker
	ecfg := engine.Config{Store: db, Catalog: cat,
		OnReady:  func(qs []string) { w.Ready(qs) },
		OnCancel: func(ids []int64) { w.CancelTasks(ids) }}
	if cfg.Engine != nil {
		cfg.Engine(&ecfg)
	}
	e := engine.New(ecfg)
	for name, d := range cfg.Domains {
		if err := e.RegisterDomain(t.Context(), name, d); err != nil {
			t.Fatal(err)
		}
	}
	wcfg := worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 50 * time.Millisecond}
	if cfg.Worker != nil {
		cfg.Worker(&wcfg)
	}
	w = worker.New(wcfg)
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	// As a node does: a task made ready by another process (another kit on the same schema)
	// wakes this worker at once (Postgres LISTEN/NOTIFY), not at its next poll.
	listening := make(chan struct{})
	if db.Capabilities().Listen {
		go func() {
			defer close(listening)
			ch, take, stop := db.Notify()
			defer stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-ch:
					if queues, all := take(); all {
						w.Wake()
					} else {
						w.WakeQueues(queues)
					}
				}
			}
		}()
	} else {
		close(listening)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		w.Stop(sctx)
		cancel()
		<-listening
		db.Close()
	})
	return &Kit{Engine: e, Worker: w, Store: db, Blobs: blobs, Dir: dir}
}

// ApplyWorkflow stores a workflow (YAML or JSON), failing t when it is invalid.
func (k *Kit) ApplyWorkflow(t testing.TB, src string) *record.Workflow {
	t.Helper()
	wf, _, err := k.Engine.ApplyWorkflow(t.Context(), []byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// StartJob applies the workflow src and submits a job of it ([engine.Engine.Submit]) with the
// roots (their ordinals are their indexes when all are zero), sealed.
func (k *Kit) StartJob(t testing.TB, src string, roots ...engine.Root) *record.Job {
	t.Helper()
	wf := k.ApplyWorkflow(t, src)
	sub, err := k.Engine.Submit(t.Context(), engine.SubmitParams{Workflow: wf.Name})
	if err != nil {
		t.Fatal(err)
	}
	numbered := true
	for _, r := range roots {
		numbered = numbered && r.Ordinal == 0
	}
	if numbered {
		roots = append([]engine.Root(nil), roots...)
		for i := range roots {
			roots[i].Ordinal = i
		}
	}
	if err := sub.Add(t.Context(), roots...); err != nil {
		t.Fatal(err)
	}
	if err := sub.Seal(t.Context()); err != nil {
		t.Fatal(err)
	}
	return sub.Job()
}

// WaitJob waits up to d for the job to end and returns it.
func (k *Kit) WaitJob(t testing.TB, id int64, d time.Duration) *record.Job {
	t.Helper()
	return WaitJob(t, k.Engine, id, d)
}

// Tasks returns the job's tasks.
func (k *Kit) Tasks(t testing.TB, jobID int64) []*record.Task {
	t.Helper()
	tasks, err := k.Store.TaskListByJob(t.Context(), store.TaskListParams{JobID: jobID})
	if err != nil {
		t.Fatal(err)
	}
	return tasks
}

// WaitJob waits up to d for the job to leave the running state and returns it; on time out it
// fails t with the job's progress.
func WaitJob(t testing.TB, e *engine.Engine, id int64, d time.Duration) *record.Job {
	t.Helper()
	var j *record.Job
	// Progress aggregates every item and task of the job (140 ms at 40,000 tasks on SQLite):
	// read only for the failure message, it leaves the database to the workers.
	poll.UntilDone(t, d, fmt.Sprintf("job %d to end", id), func() bool {
		var err error
		if j, err = e.Job(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return j.State != record.JobRunning
	}, func() string {
		p, err := e.Progress(context.WithoutCancel(t.Context()), id)
		if err != nil {
			return fmt.Sprintf("%s (progress: %v)", j.State, err)
		}
		return fmt.Sprintf("%+v", p)
	})
	return j
}

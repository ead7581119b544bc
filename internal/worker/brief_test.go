package worker_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/worker"
)

// TestBriefTasks runs brief actions (action.Policy.Brief) on every driver: their tasks are
// while they run, not leased (the row stays ready: locked on Postgres, behind the one writer on
// SQLite). Successes, a snooze, a permanent error and a second step all end as with leases;
// a brief action creating a child fails, as it declared it would not.
func TestBriefTasks(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		testBriefTasks(t, open)
	})
}

func testBriefTasks(t *testing.T, open drivertest.Open) {
	db := open(t)
	const n = 300
	wantRow := record.TaskReady // a brief batch writes nothing to its rows until it finishes
	var runs, seconds atomic.Int64
	var snoozed atomic.Bool
	rowStates := make(chan record.TaskState, 1)
	var b *bundle
	first := &fn{spec: action.Spec{Name: "first", Concurrency: 100}, policy: action.Policy{Brief: true, NoTempDir: true}, run: func(ctx context.Context, tk *action.Task, out action.Output) error {
		runs.Add(1)
		if tk.Item.Ordinal == 0 {
			row, err := b.db.TaskGet(ctx, tk.ID) // read on a connection of its own
			if err != nil {
				return err
			}
			select {
			case rowStates <- row.State:
			default:
			}
		}
		switch tk.Item.Ordinal {
		case 1:
			return action.Permanentf("item %s is bad", tk.Item.Name)
		case 2:
			if snoozed.CompareAndSwap(false, true) {
				return action.Snooze(10 * time.Millisecond)
			}
		case 3:
			return out.CreateChild(ctx, action.Child{Name: "kid"}) // not for a brief action
		}
		return nil
	}}
	second := &fn{spec: action.Spec{Name: "second"}, policy: action.Policy{Brief: true, NoTempDir: true}, run: func(context.Context, *action.Task, action.Output) error {
		seconds.Add(1)
		return nil
	}}
	b = setup(t, func(testing.TB) store.Store { return db }, first, second)
	wf := `name: brief
steps:
  first: {action: first, needs: [start], success: [first.done]}
  second: {action: second, needs: [first.done]}
`
	roots := make([]engine.Root, n)
	for i := range roots {
		roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%03d", i)}
	}
	job := b.startJob(t, "brief", wf, roots...)
	j := enginetest.WaitJob(t, b.e, job.ID, 2*time.Minute)
	if j.State != record.JobComplete {
		t.Fatalf("job state %s: %s", j.State, j.Error)
	}
	select {
	case got := <-rowStates:
		if got != wantRow {
			t.Errorf("a running task's row was %s, want %s", got, wantRow)
		}
	default:
		t.Error("the first item's task never ran")
	}
	if got := runs.Load(); got != n+1 { // once each, and the snoozed one again
		t.Errorf("first ran %d times, want %d", got, n+1)
	}
	if got := seconds.Load(); got != n-2 { // not after the two permanent errors
		t.Errorf("second ran %d times, want %d", got, n-2)
	}
	st, err := store.TaskStats(t.Context(), b.db, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st[record.TaskComplete] != 2*n-4 || st[record.TaskFailed] != 2 || len(st) != 2 {
		t.Errorf("task stats %v, want %d complete and 2 failed (their second steps never made)", st, 2*n-4)
	}
	tasks, err := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, Limit: 10 * n})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		if tk.State != record.TaskComplete {
			continue
		}
		if tk.Attempt != 1 || tk.StartedAt.IsZero() || tk.FinishedAt.Before(tk.StartedAt) || tk.LeaseOwner != "" {
			t.Fatalf("complete task %+v: want attempt 1 (a snooze gives its attempt back), a start before its end, no owner", tk)
		}
	}
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10 * n, OnlyErrored: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"r001": "item r001 is bad", "r003": "action first is brief (Policy.Brief) and cannot create children"}
	for _, it := range items {
		if it.Error != want[it.Name] {
			t.Errorf("item %s error %q, want %q", it.Name, it.Error, want[it.Name])
		}
	}
	if len(items) != len(want) {
		t.Errorf("%d items have an error, want %d", len(items), len(want))
	}
}

// TestBriefTaskTimesOutWithinALease checks that a brief action that hangs in a brief batch (its
// rows locked meanwhile) is timed out after a lease, not its step's default ten minutes.
func TestBriefTaskTimesOutWithinALease(t *testing.T) {
	t.Parallel()
	hang := &fn{spec: action.Spec{Name: "hang"}, policy: action.Policy{Brief: true, NoTempDir: true}, run: func(ctx context.Context, _ *action.Task, _ action.Output) error {
		<-ctx.Done()
		return ctx.Err()
	}}
	b := setupWith(t, drivertest.OpenPostgres, func(c *worker.Config) { c.LeaseDuration = time.Second }, hang)
	job := b.startJob(t, "hang", "name: hang\nsteps:\n  hang: {action: hang, needs: [start], attempts: 1}\n", engine.Root{Ordinal: 0, Name: "r"})
	j := enginetest.WaitJob(t, b.e, job.ID, time.Minute)
	items, err := b.db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(items) != 1 {
		t.Fatalf("items = %v, %v", items, err)
	}
	if want := "hang failed 1 times: timed out: hang timed out after 1s"; j.State != record.JobComplete || items[0].Error != want {
		t.Fatalf("job %s, item error %q; want complete with %q", j.State, items[0].Error, want)
	}
}

// TestBriefBatchesGoToWokenQueues starts a worker over three brief queues on every driver. With tasks
// announced (woken by name) in a only, its brief batches go to a alone: b and c, never woken,
// are checked in one statement and found empty, not each given a batch (a transaction and a
// connection) — at the start of a burndown the empty queues took two of three batch slots.
// With tasks made ready in b before the start and never announced, b's are still run, long
// before the poll (a minute here) would find them.
func TestBriefBatchesGoToWokenQueues(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		for _, tc := range []struct {
			name     string
			step     string
			announce bool
			want     []string
		}{
			{"announced in a", "a", true, []string{"a"}},
			{"unannounced in b", "b", false, []string{"b"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				testBriefBatchesGoToWokenQueues(t, open, tc.step, tc.announce, tc.want)
			})
		}
	})
}

func testBriefBatchesGoToWokenQueues(t *testing.T, open drivertest.Open, step string, announce bool, want []string) {
	db := open(t)
	cat := &action.Catalog{}
	for _, name := range []string{"a", "b", "c"} {
		cat.Register(&fn{spec: action.Spec{Name: name, Concurrency: 10}, policy: action.Policy{Brief: true, NoTempDir: true}, run: func(context.Context, *action.Task, action.Output) error { return nil }})
	}
	var w atomic.Pointer[worker.Worker]
	e := engine.New(engine.Config{Store: db, Catalog: cat, OnReady: func(qs []string) {
		if w := w.Load(); w != nil && announce {
			w.Ready(qs)
		}
	}})
	w.Store(worker.New(worker.Config{Engine: e, TempDir: t.TempDir(), PollInterval: time.Minute}))
	if _, _, err := e.ApplyWorkflow(t.Context(), []byte("name: one\nsteps:\n  s: {action: "+step+", needs: [start]}\n"), "one.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := e.CreateJob(t.Context(), engine.CreateJobParams{Workflow: "one"})
	if err != nil {
		t.Fatal(err)
	}
	roots := make([]engine.Root, 25)
	for i := range roots {
		roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%02d", i)}
	}
	if err := e.AddRoots(t.Context(), job, roots); err != nil {
		t.Fatal(err)
	}
	if err := e.Seal(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w.Load().Start(ctx)
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		w.Load().Stop(sctx)
		cancel()
	})
	if j := enginetest.WaitJob(t, e, job.ID, 30*time.Second); j.State != record.JobComplete {
		t.Fatalf("job state %s: %s", j.State, j.Error)
	}
	if got := worker.BriefQueues(w.Load()); !slices.Equal(got, want) {
		t.Errorf("brief batches started for %q, want %q only", got, want)
	}
}

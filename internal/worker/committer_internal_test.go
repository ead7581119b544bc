package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestRenewalGoesFirst: a renewal of leases queued behind a long queue of the writer's ops (on a
// loaded machine: children and results of a fan-out) is committed in the next batch, not after
// the queue — it used to wait its turn, and the leases of running tasks expired meanwhile.
func TestRenewalGoesFirst(t *testing.T) {
	t.Parallel()
	e := engine.New(engine.Config{Store: drivertest.OpenSQLite(t)})
	c := newCommitter(e, slog.New(slog.DiscardHandler), 2, 0, 1)
	ctx := t.Context()
	c.start(ctx)
	t.Cleanup(c.stop)
	var mu sync.Mutex
	var order []string
	note := func(s string) func(*engine.Tx) error {
		return func(*engine.Tx) error {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
			return nil
		}
	}
	gate := make(chan struct{})
	busy := make(chan struct{})
	if err := c.submit(ctx, func(*engine.Tx) error { close(busy); <-gate; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	<-busy // the lane is in its transaction
	for i := range 3 {
		if err := c.submit(ctx, note(string(rune('a'+i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	renewed := make(chan error, 1)
	go func() { renewed <- c.doFirst(ctx, note("renew")) }()
	poll.Until(t, 10*time.Second, "the renewal queued", func() (bool, string) { return len(c.first) == 1, "" })
	close(gate)
	if err := <-renewed; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	if err := c.submit(ctx, note("last"), done); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 5 || order[0] != "renew" {
		t.Errorf("committed in the order %q, want the renewal first, ahead of the 3 ops queued before it", order)
	}
}

// TestCommitterStopNeverStrands reproduces the shutdown hang: an op queued while the committer
// stops (a task's result arriving as the process shuts down) waited forever in committer.await
// once no lane was left. Now an op is either committed or refused with ErrStopped, and every
// wait returns: for ops queued before the stop, during it, and after it.
func TestCommitterStopNeverStrands(t *testing.T) {
	t.Parallel()
	e := engine.New(engine.Config{Store: drivertest.OpenSQLite(t)})
	c := newCommitter(e, slog.New(slog.DiscardHandler), 2, 0, 1)
	// The caller's context ends first, as the CLI's does on SIGTERM: the lanes go on.
	ctx, cancel := context.WithCancel(context.Background())
	c.start(ctx)
	cancel()
	gate := make(chan struct{})
	busy := make(chan struct{})
	if err := c.submit(context.Background(), func(*engine.Tx) error { close(busy); <-gate; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	<-busy // the lane is in its transaction
	var committed atomic.Int32
	count := func(*engine.Tx) error { committed.Add(1); return nil }
	before := make(chan error, 1)
	go func() { before <- c.do(context.Background(), count) }()
	poll.Until(t, 10*time.Second, "the op queued", func() (bool, string) { return len(c.ops) == 1, "" })
	stopped := make(chan struct{})
	go func() { c.stop(); close(stopped) }()
	poll.Until(t, 10*time.Second, "the stop begun", func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.closed, ""
	})
	during := make(chan error, 1)
	go func() { during <- c.do(context.Background(), count) }()
	close(gate)
	wait := func(name string, ch chan error) error {
		t.Helper()
		select {
		case err := <-ch:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting 10s after the committer stopped", name)
			return nil
		}
	}
	if err := wait("an op queued before the stop", before); err != nil {
		t.Errorf("an op queued before the stop: %v, want it committed", err)
	}
	if err := wait("an op sent during the stop", during); !errors.Is(err, ErrStopped) {
		t.Errorf("an op sent during the stop: %v, want ErrStopped", err)
	}
	<-stopped
	after := make(chan error, 1)
	go func() { after <- c.doFirst(context.Background(), count) }()
	if err := wait("an op sent after the stop", after); !errors.Is(err, ErrStopped) {
		t.Errorf("an op sent after the stop: %v, want ErrStopped", err)
	}
	if err := c.submitAfter(context.Background(), count, func(error) { t.Error("after called for a refused op") }); !errors.Is(err, ErrStopped) {
		t.Errorf("submitAfter after the stop: %v, want ErrStopped", err)
	}
	if n := committed.Load(); n != 1 {
		t.Errorf("%d ops committed, want 1 (the one queued before the stop)", n)
	}
	c.stop() // idempotent
}

// nothing is an action that does nothing, for tests that commit results by hand.
type nothing struct{}

func (nothing) Spec() action.Spec                                      { return action.Spec{Name: "noop"} }
func (nothing) Policy() action.Policy                                  { return action.Policy{} }
func (nothing) Run(context.Context, *action.Task, action.Output) error { return nil }

// TestApplyOps checks how a lane applies its batch (applyOps): other ops run where they stand,
// the results of adjacent result ops are applied together after their cache writes, and a
// result skipped at commit time (its lease released while it waited) writes nothing — also
// when it ends a run of results, whose others are still applied.
func TestApplyOps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := drivertest.OpenSQLite(t)
	cat := &action.Catalog{}
	cat.Register(nothing{})
	e := engine.New(engine.Config{Store: db, Catalog: cat})
	if _, _, err := e.ApplyWorkflow(ctx, []byte("name: one\nsteps:\n  b: {action: noop, needs: [start]}\n"), "one.yaml"); err != nil {
		t.Fatal(err)
	}
	job, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: "one", Open: true})
	if err != nil {
		t.Fatal(err)
	}
	var roots []engine.Root
	for i := range 4 {
		roots = append(roots, engine.Root{Ordinal: i, Name: fmt.Sprint("r", i)})
	}
	if err := e.AddRoots(ctx, job, roots); err != nil {
		t.Fatal(err)
	}
	var tasks []*record.Task
	err = db.InTx(ctx, func(x store.Executor) error {
		now := e.Now()
		tasks, err = x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"noop"}, Max: []int{10}, Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
		return err
	})
	if err != nil || len(tasks) != 4 {
		t.Fatalf("leased %d tasks, %v; want 4", len(tasks), err)
	}
	var order []string
	note := func(s string) func(*engine.Tx) error {
		return func(*engine.Tx) error { order = append(order, s); return nil }
	}
	result := func(i int, skip bool) op {
		r := &resultOp{res: &engine.Result{Task: tasks[i], Owner: "w", Started: tasks[i].StartedAt}, before: note(fmt.Sprint("cache ", i))}
		if skip {
			r.skip = func() bool { return true }
		}
		return op{fn: r.apply, result: r}
	}
	batch := []op{{fn: note("a")}, result(0, false), result(1, true), {fn: note("b")}, result(2, false), result(3, true)}
	if err := e.Run(ctx, func(t *engine.Tx) error { return applyOps(t, batch) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "cache 0", "b", "cache 2"}; !slices.Equal(order, want) {
		t.Errorf("ran %q, want %q", order, want)
	}
	for i, want := range []record.TaskState{record.TaskComplete, record.TaskRunning, record.TaskComplete, record.TaskRunning} {
		tk, err := db.TaskGet(ctx, tasks[i].ID)
		if err != nil || tk.State != want {
			t.Errorf("task %d: %v, %v; want %s", i, tk.State, err, want)
		}
	}
}

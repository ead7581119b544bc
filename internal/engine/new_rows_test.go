package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// insertLog records the tasks and events inserted in bulk in a store's transactions.
type insertLog struct {
	mu     sync.Mutex
	tasks  []store.TaskInsertParams
	events []store.EventInsertParams
}

// logStore is a store whose transactions record their bulk inserts in log.
type logStore struct {
	store.Store
	log *insertLog
}

func (s *logStore) InTx(ctx context.Context, fn func(store.Executor) error) error {
	return s.Store.InTx(ctx, func(x store.Executor) error { return fn(&logExec{Executor: x, log: s.log}) })
}

type logExec struct {
	store.Executor
	log *insertLog
}

func (x *logExec) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) error {
	x.log.mu.Lock()
	x.log.tasks = append(x.log.tasks, ps...)
	x.log.mu.Unlock()
	return x.Executor.TaskInsertMany(ctx, ps)
}

func (x *logExec) EventInsertMany(ctx context.Context, es []store.EventInsertParams) error {
	x.log.mu.Lock()
	x.log.events = append(x.log.events, es...)
	x.log.mu.Unlock()
	return x.Executor.EventInsertMany(ctx, es)
}

// TestChainRowsNew checks that a chain's next-step tasks and its held-back events are inserted
// marked New (the driver inserts them without ON CONFLICT: an existing row fails the
// transaction), and that the engine is right to: every job completes, each task once, on
// PostgreSQL a plain insert of a row that existed would have failed the batch.
func TestChainRowsNew(t *testing.T) {
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		log := &insertLog{}
		h := newHarness(t, func(tb testing.TB) store.Store { return &logStore{Store: open(tb), log: log} },
			func(h *harness) []action.Action { return []action.Action{h.act("noop", nil, nil)} })
		const n = 20
		roots := make([]engine.Root, n)
		for i := range roots {
			roots[i] = engine.Root{Ordinal: i, Name: fmt.Sprintf("r%02d", i)}
		}
		job := h.start("name: wf\nsteps:\n"+
			"  s1: {action: noop, needs: [start], success: [s1.done]}\n"+
			"  s2: {action: noop, needs: [s1.done], success: [s2.done]}\n"+
			"  s3: {action: noop, needs: [s2.done], success: [s3.done]}\n", nil, roots...)
		h.startWorker() // after the roots: their s1 tasks are leased, and finished, together
		if j := h.wait(job.ID); j.State != record.JobComplete {
			t.Fatalf("job %s (%s), want complete", j.State, j.Error)
		}
		tasks := h.tasks(job.ID)
		if len(tasks) != 3*n {
			t.Errorf("%d tasks, want %d: %v", len(tasks), 3*n, tasks)
		}
		for k, st := range tasks {
			if st != record.TaskComplete {
				t.Errorf("task %s %s, want complete", k, st)
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		next := 0
		for _, p := range log.tasks {
			if p.Step == "s1" {
				continue // inserted with its root, in the root's transaction
			}
			next++
			if !p.New {
				t.Errorf("task %s of item %d inserted without New", p.Step, p.ItemID)
			}
		}
		if next != 2*n {
			t.Errorf("%d next-step tasks inserted in bulk, want %d", next, 2*n)
		}
		held := 0
		for _, e := range log.events {
			if e.Name == "start" {
				continue // a root's, in its transaction
			}
			held++
			if !e.New {
				t.Errorf("event %s of item %d inserted without New", e.Name, e.ItemID)
			}
		}
		if held == 0 {
			t.Error("no held-back event: the batches fired none in bulk")
		}
	})
}

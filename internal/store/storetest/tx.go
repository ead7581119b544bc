package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func testInTxRollback(t *testing.T, b *bundle) {
	ctx := t.Context()
	keep := b.job("keep")
	keepItem := b.root(keep.ID, 0, "0")
	errBoom := errors.New("boom")
	var jobID, itemID, taskID int64
	err := b.s.InTx(ctx, func(x store.Executor) error {
		j, err := x.JobInsert(ctx, store.JobInsertParams{Key: "gone", WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
		if err != nil {
			return err
		}
		jobID = j.ID
		it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "0", Name: "x", Now: b.now})
		if err != nil {
			return err
		}
		itemID = it.ID
		taskID = b.task(x, it, "s").ID
		if _, err := x.EventInsert(ctx, store.EventInsertParams{ItemID: it.ID, Name: "start", Now: b.now}); err != nil {
			return err
		}
		if _, err := x.WorkflowInsert(ctx, store.WorkflowInsertParams{Name: "wf", Digest: "d", Definition: []byte("{}"), Source: []byte("s"), Now: b.now}); err != nil {
			return err
		}
		if err := x.CachePut(ctx, store.CachePutParams{Key: "gone", Value: []byte("v"), Now: b.now}); err != nil {
			return err
		}
		if err := x.OutputPut(ctx, store.OutputPutParams{ItemID: it.ID, JobID: j.ID, Kind: "document", Value: []byte("{}"), Now: b.now}); err != nil {
			return err
		}
		mustOK(t, x.ItemUpdate(ctx, store.ItemUpdateParams{ID: keepItem.ID, Error: "set in a rolled back tx", Metadata: []byte(`{"x":1}`)}))
		if ok, err := x.JobSetState(ctx, store.JobSetStateParams{ID: keep.ID, State: record.JobCanceled, Now: b.now}); err != nil || !ok {
			return fmt.Errorf("JobSetState in tx = %v, %v", ok, err)
		}
		return fmt.Errorf("wrapped: %w", errBoom)
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("InTx error = %v, want fn's error", err)
	}
	_, err = b.s.JobGet(ctx, jobID)
	checkNotFound(t, "JobGet of rolled back job", err)
	_, err = b.s.JobGetByKey(ctx, "gone")
	checkNotFound(t, "JobGetByKey of rolled back job", err)
	_, err = b.s.ItemGet(ctx, itemID)
	checkNotFound(t, "ItemGet of rolled back item", err)
	_, err = b.s.TaskGet(ctx, taskID)
	checkNotFound(t, "TaskGet of rolled back task", err)
	_, err = b.s.CacheGet(ctx, "gone")
	checkNotFound(t, "CacheGet of rolled back entry", err)
	_, err = b.s.WorkflowGet(ctx, "wf", 0)
	checkNotFound(t, "WorkflowGet of rolled back workflow", err)
	if evs := must(b.s.EventListByItem(ctx, itemID))(t); len(evs) != 0 {
		t.Errorf("rolled back events: %v", evs)
	}
	if outs := must(b.s.OutputList(ctx, store.OutputListParams{}))(t); len(outs) != 0 {
		t.Errorf("rolled back outputs: %d", len(outs))
	}
	checkIDs(t, "jobs after rollback", jobIDs(must(b.s.JobList(ctx, store.JobListParams{}))(t)), []int64{keep.ID})
	if got := must(b.s.JobGet(ctx, keep.ID))(t); got.State != record.JobRunning {
		t.Errorf("job state after rollback = %s, want running", got.State)
	}
	if got := b.getItem(keepItem.ID); got.Error != "" {
		t.Errorf("item error after rollback = %q", got.Error)
	} else {
		checkJSON(t, "metadata after rollback", got.Metadata, `{}`)
	}
	if n := b.lease("q", 10, "w", b.now); len(n) != 0 {
		t.Errorf("leased %d rolled back tasks", len(n))
	}
	// The store is still usable after a rollback.
	b.job("after")
}

func testInTxReadsOwnWrites(t *testing.T, b *bundle) {
	ctx := t.Context()
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		j, err := x.JobInsert(ctx, store.JobInsertParams{Key: "k", WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
		if err != nil {
			return err
		}
		if _, err := x.JobGet(ctx, j.ID); err != nil {
			return fmt.Errorf("JobGet in tx: %w", err)
		}
		if _, err := x.JobGetByKey(ctx, "k"); err != nil {
			return fmt.Errorf("JobGetByKey in tx: %w", err)
		}
		text := "t"
		it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "0", Name: "x", Text: &text, Now: b.now})
		if err != nil {
			return err
		}
		if got, err := x.ItemGet(ctx, it.ID); err != nil || got.Text != "t" {
			return fmt.Errorf("ItemGet in tx = %v, %v", got, err)
		}
		if got, err := x.ItemList(ctx, store.ItemListParams{JobID: j.ID}); err != nil || len(got) != 1 {
			return fmt.Errorf("ItemList in tx = %d items, %v", len(got), err)
		}
		tk := b.task(x, it, "s")
		if got, err := x.TaskGet(ctx, tk.ID); err != nil || got.State != record.TaskReady {
			return fmt.Errorf("TaskGet in tx = %v, %v", got, err)
		}
		leased, err := x.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: 5, Owner: "w", Now: b.now, LeaseUntil: b.at(time.Minute)})
		if err != nil || len(leased) != 1 {
			return fmt.Errorf("TaskLease in tx = %d tasks, %v", len(leased), err)
		}
		if ok, err := x.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 1, State: record.TaskComplete, Now: b.now}); err != nil || !ok {
			return fmt.Errorf("TaskFinish in tx = %v, %v", ok, err)
		}
		if st, err := store.TaskStats(ctx, x, j.ID); err != nil || st[record.TaskComplete] != 1 {
			return fmt.Errorf("TaskStats in tx = %v, %v", st, err)
		}
		if _, err := x.EventInsert(ctx, store.EventInsertParams{ItemID: it.ID, Name: "start", Now: b.now}); err != nil {
			return err
		}
		if evs, err := x.EventListByItem(ctx, it.ID); err != nil || len(evs) != 1 {
			return fmt.Errorf("EventListByItem in tx = %v, %v", evs, err)
		}
		if open, err := x.JobHasOpenItems(ctx, j.ID); err != nil || !open {
			return fmt.Errorf("JobHasOpenItems in tx = %v, %v", open, err)
		}
		return nil
	}))
	if got := must(b.s.JobGetByKey(ctx, "k"))(t); got.State != record.JobRunning {
		t.Errorf("committed job = %+v", got)
	}
}

// testConcurrentLease: leasers racing in separate transactions never get the same task.
func testConcurrentLease(t *testing.T, b *bundle) {
	ctx := t.Context()
	const tasks, leasers, batch = 240, 8, 7
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		for i := range 4 {
			j, err := x.JobInsert(ctx, store.JobInsertParams{WorkflowName: "wf", WorkflowVersion: 1, Now: b.now})
			if err != nil {
				return err
			}
			for k := range tasks / 4 {
				it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: k, SortKey: fmt.Sprintf("%04d", k), Name: "x", Now: b.now})
				if err != nil {
					return err
				}
				if _, err := x.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "s", Action: "a", Queue: "q", MaxAttempts: 3, SortKey: it.SortKey, Now: b.now}); err != nil {
					return err
				}
			}
			_ = i
		}
		return nil
	}))
	var (
		mu     sync.Mutex
		seen   = map[int64]string{}
		dups   []int64
		wg     sync.WaitGroup
		errs   []error
		start  = make(chan struct{})
		totals = make([]int, leasers)
	)
	for w := range leasers {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			<-start
			for {
				var got []*record.Task
				err := b.s.InTx(ctx, func(x store.Executor) error {
					var err error
					got, err = x.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: batch, Owner: owner, Now: b.now, LeaseUntil: b.at(time.Minute)})
					return err
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, tk := range got {
					if _, ok := seen[tk.ID]; ok {
						dups = append(dups, tk.ID)
					}
					seen[tk.ID] = owner
					if tk.Attempt != 1 || tk.LeaseOwner != owner {
						errs = append(errs, fmt.Errorf("task %d leased by %s: attempt %d owner %s", tk.ID, owner, tk.Attempt, tk.LeaseOwner))
					}
				}
				totals[w] += len(got)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if i == 5 {
			t.Errorf("… and %d more errors", len(errs)-i)
			break
		}
		t.Error(err)
	}
	if len(dups) > 0 {
		t.Errorf("tasks leased twice: %v", dups)
	}
	if len(seen) != tasks {
		t.Errorf("leased %d distinct tasks, want %d (per leaser %v)", len(seen), tasks, totals)
	}
	for id, owner := range seen {
		if got := b.getTask(id); got.LeaseOwner != owner || got.Attempt != 1 {
			t.Errorf("task %d stored owner %s attempt %d, want %s 1", id, got.LeaseOwner, got.Attempt, owner)
			break
		}
	}
}

// testWait: Wait honours d and ctx; a driver that can Listen wakes waiters on new ready work.
func testWait(t *testing.T, b *bundle) {
	start := time.Now()
	b.s.Wait(t.Context(), 20*time.Millisecond)
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Errorf("Wait(20ms) returned after %v", el)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start = time.Now()
	b.s.Wait(ctx, time.Minute)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("Wait with a canceled ctx took %v", el)
	}
	if !b.s.Capabilities().Listen {
		return
	}
	it := b.root(b.job("").ID, 0, "0")
	// A Notify channel hears every notification from its call on: a TaskInsert must reach it.
	{
		ch, take, stop := b.s.Notify()
		defer stop()
		for i := 0; ; i++ {
			b.task(b.s, it, fmt.Sprintf("n%d", i))
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Fatal("Notify channel not woken by TaskInsert within 20s")
			}
			queues, all := take()
			if i == 1 {
				// The first may be the listener's own wake-up on connecting; this one names
				// the task's queue.
				if !all && !slices.Contains(queues, "q") {
					t.Errorf("Notify announced queues %v, want q", queues)
				}
				break
			}
		}
	}
	// A notification sent before the waiter listens is lost by design (Wait is never the only way
	// to find work), so keep making work until a waiter wakes: every TaskInsert must notify.
	woke := make(chan time.Duration, 1)
	waitCtx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() {
		s := time.Now()
		b.s.Wait(waitCtx, time.Minute)
		woke <- time.Since(s)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for i := 0; ; i++ {
		select {
		case el := <-woke:
			if el >= time.Minute {
				t.Errorf("Wait returned after %v: not woken by TaskInsert", el)
			}
			return
		case <-tick.C:
			b.task(b.s, it, fmt.Sprintf("s%d", i))
		case <-deadline:
			t.Fatal("Wait not woken by TaskInsert within 20s")
		}
	}
}

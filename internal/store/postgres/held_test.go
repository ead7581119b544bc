package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// readyTasks inserts a job with n items, each with one ready task in queue q.
func readyTasks(t *testing.T, db *postgres.DB, n int, now time.Time) []int64 {
	t.Helper()
	ctx := t.Context()
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Metadata: []byte(`{}`), Options: []byte(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range n {
		it, _, err := db.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: fmt.Sprint(i), Name: fmt.Sprint(i), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "s", Action: "a", Queue: "q", MaxAttempts: 3, SortKey: it.SortKey, Now: now}); err != nil {
			t.Fatal(err)
		}
		ts, err := db.TaskListByItem(ctx, it.ID)
		if err != nil || len(ts) != 1 {
			t.Fatalf("tasks of item %d = %v, %v", it.ID, ts, err)
		}
		ids = append(ids, ts[0].ID)
	}
	return ids
}

var errRollback = errors.New("roll back")

// TestHeldLease checks leases held by row locks (TaskHoldMany): they write nothing, another
// holder skips them, a rollback gives them back at their attempt, and a held finish counts the
// attempt once.
func TestHeldLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now().Truncate(time.Microsecond)
	ids := readyTasks(t, db, 3, now)
	hold := func(x store.Executor, limit int) []*store.Task {
		t.Helper()
		got, err := x.TaskHoldMany(ctx, store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{limit}, Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	err := db.InTx(ctx, func(x store.Executor) error {
		held := hold(x, 2)
		if len(held) != 2 || held[0].ID != ids[0] || held[1].ID != ids[1] {
			return fmt.Errorf("held %v, want the first two of %v", held, ids)
		}
		for _, tk := range held {
			if !tk.Held || tk.State != store.TaskRunning || tk.Attempt != 1 || tk.LeaseOwner != "w" || !tk.StartedAt.Equal(now) {
				return fmt.Errorf("held task = %+v, want held, running, attempt 1, owner w, started now", tk)
			}
		}
		// Another transaction skips the locked rows.
		err := db.InTx(ctx, func(y store.Executor) error {
			if other := hold(y, 3); len(other) != 1 || other[0].ID != ids[2] {
				return fmt.Errorf("second holder got %v, want only task %d", other, ids[2])
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			return err
		}
		// Nothing was written: the rows read from outside are still ready, at attempt 0.
		for _, tk := range held {
			if got, err := db.TaskGet(ctx, tk.ID); err != nil || got.State != store.TaskReady || got.Attempt != 0 {
				return fmt.Errorf("held task %d read from outside = %+v (%v), want ready at attempt 0", tk.ID, got, err)
			}
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	// Rolled back (as a process dying would): the tasks are ready again, and a held finish
	// writes the attempt, its start and the end.
	var first *store.Task
	err = db.InTx(ctx, func(x store.Executor) error {
		held := hold(x, 1)
		if len(held) != 1 || held[0].ID != ids[0] || held[0].Attempt != 1 {
			return fmt.Errorf("held again %v, want task %d at attempt 1", held, ids[0])
		}
		first = held[0]
		oks, err := x.TaskFinishMany(ctx, []store.TaskFinishParams{{ID: first.ID, Attempt: first.Attempt, State: store.TaskComplete, Now: now.Add(time.Second), Held: true, Started: first.StartedAt}})
		if err != nil || !oks[0] {
			return fmt.Errorf("held finish = %v, %v; want ok", oks, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.TaskGet(ctx, first.ID)
	if err != nil || got.State != store.TaskComplete || got.Attempt != 1 || !got.StartedAt.Equal(now) || !got.FinishedAt.Equal(now.Add(time.Second)) || got.LeaseOwner != "" {
		t.Fatalf("finished held task = %+v (%v), want complete at attempt 1, started now, finished a second later", got, err)
	}
	// A held finish of a task that is no longer ready at the attempt before does nothing.
	ok, err := db.TaskFinish(ctx, store.TaskFinishParams{ID: first.ID, Attempt: first.Attempt, State: store.TaskFailed, Now: now, Held: true, Started: now})
	if err != nil || ok {
		t.Fatalf("held finish of a finished task = %v, %v; want not ok", ok, err)
	}
	// One held task finished on its own (TaskFinish) counts its attempt as in a batch.
	err = db.InTx(ctx, func(x store.Executor) error {
		held := hold(x, 1)
		if len(held) != 1 || held[0].ID != ids[1] {
			return fmt.Errorf("held %v, want task %d", held, ids[1])
		}
		ok, err := x.TaskFinish(ctx, store.TaskFinishParams{ID: held[0].ID, Attempt: held[0].Attempt, State: store.TaskComplete, Now: now, Held: true, Started: now})
		if err != nil || !ok {
			return fmt.Errorf("held finish of one task = %v, %v; want ok", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.TaskGet(ctx, ids[1]); err != nil || got.State != store.TaskComplete || got.Attempt != 1 {
		t.Fatalf("task finished alone = %+v (%v), want complete at attempt 1", got, err)
	}
}

// TestHeldLeaseExpire checks that the record of a held lease whose transaction died turns its
// tasks into expired leases (the attempt counted), and that a finished batch's tasks are left
// alone.
func TestHeldLeaseExpire(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now().Truncate(time.Microsecond)
	ids := readyTasks(t, db, 2, now)
	until := now.Add(time.Minute)
	var deadID int64
	// Task 0: held, recorded, and its transaction dies (rolled back) before the results.
	err := db.InTx(ctx, func(x store.Executor) error {
		held, err := x.TaskHoldMany(ctx, store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{1}, Owner: "dead", Now: now, LeaseUntil: until})
		if err != nil || len(held) != 1 {
			return fmt.Errorf("hold = %v, %v", held, err)
		}
		id, err := db.HeldLeaseRecord(ctx, store.HeldLeaseParams{Owner: "dead", TaskIDs: []int64{held[0].ID}, Attempts: []int{held[0].Attempt}, Started: now, Until: until})
		if err != nil {
			return err
		}
		deadID = id
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	// Task 1: held, recorded, and finished with its record deleted in the same transaction.
	err = db.InTx(ctx, func(x store.Executor) error {
		held, err := x.TaskHoldMany(ctx, store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{2}, Owner: "live", Now: now, LeaseUntil: until})
		if err != nil || len(held) != 2 {
			return fmt.Errorf("hold = %v, %v", held, err)
		}
		tk := held[1]
		id, err := db.HeldLeaseRecord(ctx, store.HeldLeaseParams{Owner: "live", TaskIDs: []int64{tk.ID}, Attempts: []int{tk.Attempt}, Started: now, Until: until})
		if err != nil {
			return err
		}
		if err := x.HeldLeaseDelete(ctx, id); err != nil {
			return err
		}
		_, err = x.TaskFinishMany(ctx, []store.TaskFinishParams{{ID: tk.ID, Attempt: tk.Attempt, State: store.TaskComplete, Now: now, Held: true, Started: now}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Not yet expired: nothing happens.
	if n, err := db.HeldLeaseExpire(ctx, now); err != nil || n != 0 {
		t.Fatalf("expire before the lease ends = %d, %v; want 0", n, err)
	}
	// Renewal moves the end of the records named, of their owner, only.
	for _, p := range []store.TaskRenewLeasesParams{
		{Owner: "dead", Until: until.Add(time.Hour)},                                       // no record named
		{Owner: "live", HeldLeaseIDs: []int64{deadID}, Until: until.Add(time.Hour)},        // another owner's
		{Owner: "dead", HeldLeaseIDs: []int64{deadID}, Until: until.Add(time.Minute)},      // this one
		{Owner: "dead", HeldLeaseIDs: []int64{deadID + 1000}, Until: until.Add(time.Hour)}, // no such record
	} {
		if _, err := db.TaskRenewLeases(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.HeldLeaseExpire(ctx, until.Add(time.Second)); err != nil || n != 0 {
		t.Fatalf("expire after a renewal = %d, %v; want 0", n, err)
	}
	if n, err := db.HeldLeaseExpire(ctx, until.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expire = %d, %v; want 1 task", n, err)
	}
	got, err := db.TaskGet(ctx, ids[0])
	if err != nil || got.State != store.TaskRunning || got.Attempt != 1 || got.LeaseOwner != "dead" || !got.StartedAt.Equal(now) {
		t.Fatalf("task of the dead batch = %+v (%v), want running at attempt 1, owner dead", got, err)
	}
	expired, err := db.TaskListExpired(ctx, now, 10)
	if err != nil || len(expired) != 1 || expired[0].ID != ids[0] {
		t.Fatalf("expired leases = %v (%v), want task %d", expired, err, ids[0])
	}
	if got, err := db.TaskGet(ctx, ids[1]); err != nil || got.State != store.TaskComplete || got.Attempt != 1 {
		t.Fatalf("task of the finished batch = %+v (%v), want complete at attempt 1", got, err)
	}
	// The record is gone: expiring again turns nothing.
	if n, err := db.HeldLeaseExpire(ctx, until.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second expire = %d, %v; want 0", n, err)
	}
}

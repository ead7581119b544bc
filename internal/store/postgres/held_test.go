package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
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

// brief takes up to limit tasks of queue "q" as a brief batch of owner, leased until until.
func brief(t *testing.T, x store.Executor, owner string, limit int, now, until time.Time) []*record.Task {
	t.Helper()
	got, err := x.TaskGetAvailable(t.Context(), store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{limit}, Owner: owner, Now: now, LeaseUntil: until, Brief: true})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestBriefBatch checks brief batches held by row locks: they write nothing running, another
// batch skips them, a rollback leaves them leased (written) to their owner, and a brief finish,
// in a batch or alone (TaskFinish), counts the attempt once.
func TestBriefBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now().Truncate(time.Microsecond)
	until := now.Add(time.Minute)
	ids := readyTasks(t, db, 4, now)
	err := db.InTx(ctx, func(x store.Executor) error {
		held := brief(t, x, "w", 2, now, until)
		if len(held) != 2 || held[0].ID != ids[0] || held[1].ID != ids[1] {
			return fmt.Errorf("held %v, want the first two of %v", held, ids)
		}
		for _, tk := range held {
			if tk.State != record.TaskRunning || tk.Attempt != 1 || tk.LeaseOwner != "w" || !tk.StartedAt.Equal(now) {
				return fmt.Errorf("held task = %+v, want running, attempt 1, owner w, started now", tk)
			}
		}
		// Another batch skips the locked rows; rolled back, it leaves its task leased to w2.
		err := db.InTx(ctx, func(y store.Executor) error {
			if other := brief(t, y, "w2", 1, now, until); len(other) != 1 || other[0].ID != ids[2] {
				return fmt.Errorf("second batch got %v, want only task %d", other, ids[2])
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			return err
		}
		// Nothing was written: the rows read from outside are still ready, at attempt 0.
		for _, tk := range held {
			if got, err := db.TaskGet(ctx, tk.ID); err != nil || got.State != record.TaskReady || got.Attempt != 0 {
				return fmt.Errorf("held task %d read from outside = %+v (%v), want ready at attempt 0", tk.ID, got, err)
			}
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	for i, owner := range []string{"w", "w", "w2"} {
		if got, err := db.TaskGet(ctx, ids[i]); err != nil || got.State != record.TaskRunning || got.Attempt != 1 || got.LeaseOwner != owner || !got.LeaseExpires.Equal(until) {
			t.Fatalf("task %d of a rolled-back batch = %+v (%v), want running at attempt 1, leased to %s until %v", i, got, err, owner, until)
		}
	}
	// One held task finished on its own (TaskFinish) counts its attempt as in a batch, and
	// writes its start and its end.
	err = db.InTx(ctx, func(x store.Executor) error {
		held := brief(t, x, "w", 1, now, until)
		if len(held) != 1 || held[0].ID != ids[3] {
			return fmt.Errorf("held %v, want task %d", held, ids[3])
		}
		ok, err := x.TaskFinish(ctx, store.TaskFinishParams{ID: held[0].ID, Attempt: held[0].Attempt, State: record.TaskComplete, Now: now.Add(time.Second), Started: now})
		if err != nil || !ok {
			return fmt.Errorf("held finish of one task = %v, %v; want ok", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := db.TaskGet(ctx, ids[3])
	if err != nil || got.State != record.TaskComplete || got.Attempt != 1 || !got.StartedAt.Equal(now) || !got.FinishedAt.Equal(now.Add(time.Second)) {
		t.Fatalf("task finished alone = %+v (%v), want complete at attempt 1, started now, finished a second later", got, err)
	}
	// A finish outside the batch's transaction is an ordinary one: not running, not finished.
	if ok, err := db.TaskFinish(ctx, store.TaskFinishParams{ID: ids[3], Attempt: 1, State: record.TaskFailed, Now: now, Started: now}); err != nil || ok {
		t.Fatalf("finish of a finished task = %v, %v; want not ok", ok, err)
	}
}

// TestBriefBatchDies checks a brief batch whose process dies after its record committed (its
// transaction then ends without the process: nothing converts the record): the record is
// renewed while the batch runs, and once expired TaskGetStuck turns its task into an expired
// lease, the attempt counted, while a task finished by a batch that committed is left alone.
func TestBriefBatchDies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now().Truncate(time.Microsecond)
	until := now.Add(time.Minute)
	ids := readyTasks(t, db, 2, now)
	get := func(x store.Executor, owner string) *record.Task {
		t.Helper()
		got, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{1}, Owner: owner, Now: now, LeaseUntil: until, Brief: true})
		if err != nil || len(got) != 1 {
			t.Fatalf("brief batch = %v, %v; want 1 task", got, err)
		}
		if _, err := x.TaskGet(ctx, got[0].ID); err != nil { // the next statement: the record is durable
			t.Fatal(err)
		}
		return got[0]
	}
	err := db.InTx(ctx, func(x store.Executor) error {
		tk := get(x, "live")
		_, err := x.TaskSetStateIfRunningMany(ctx, []store.TaskFinishParams{{ID: tk.ID, Attempt: tk.Attempt, State: record.TaskComplete, Now: now, Started: now}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	errDied := errors.New("process died")
	err = db.InTx(ctx, func(x store.Executor) error {
		if tk := get(x, "dead"); tk.ID != ids[1] {
			t.Fatalf("dead batch took task %d, want %d", tk.ID, ids[1])
		}
		// Renewed while it runs: the record's end moves, for its owner only.
		for _, owner := range []string{"dead", "other"} {
			if _, err := db.TaskRenewLeases(ctx, store.TaskRenewLeasesParams{Owner: owner, Until: until.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		postgres.Abandon(x) // the process dies: nothing of it runs after the statement
		return errDied
	})
	if !errors.Is(err, errDied) {
		t.Fatal(err)
	}
	if got, err := db.TaskGet(ctx, ids[1]); err != nil || got.State != record.TaskReady || got.Attempt != 0 {
		t.Fatalf("task of the dead batch = %+v (%v), want ready at attempt 0 until its record expires", got, err)
	}
	if stuck, err := db.TaskGetStuck(ctx, until.Add(time.Second), 10); err != nil || len(stuck) != 0 {
		t.Fatalf("stuck after the lease's first end = %v, %v; want none (renewed)", stuck, err)
	}
	stuck, err := db.TaskGetStuck(ctx, until.Add(2*time.Hour), 10)
	if err != nil || len(stuck) != 1 || stuck[0].ID != ids[1] || stuck[0].Attempt != 1 || stuck[0].LeaseOwner != "dead" || !stuck[0].StartedAt.Equal(now) {
		t.Fatalf("stuck = %+v, %v; want task %d running at attempt 1, owner dead, started at the get", stuck, err, ids[1])
	}
	if got, err := db.TaskGet(ctx, ids[0]); err != nil || got.State != record.TaskComplete || got.Attempt != 1 {
		t.Fatalf("task of the finished batch = %+v (%v), want complete at attempt 1", got, err)
	}
}

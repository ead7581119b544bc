package sqlite

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestHeldPickReadsTheRow: a brief batch's pick reads fewer columns than taskCols (taskHoldCols) and sets
// the rest itself; what it returns is the stored row, leased.
func TestHeldPickReadsTheRow(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := t.Context()
	if _, err := db.w.ExecContext(ctx, `INSERT INTO tasks (id, job_id, item_id, step, action, queue, state, attempt, max_attempts, run_after, error, sort_key, progress_weight, created_at, finished_at)
		VALUES (7, 3, 5, 'step', 'noop', 'q', 'ready', 1, 4, 11, 'boom', 'k', 2.5, 13, 17)`); err != nil {
		t.Fatal(err)
	}
	want, err := db.TaskGet(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMicro(1_000_000).UTC()
	want.State, want.Attempt, want.LeaseOwner, want.LeaseExpires, want.StartedAt = record.TaskRunning, 2, "o", now.Add(time.Minute), now
	var got []*record.Task
	if err := db.InTx(ctx, func(x store.Executor) error {
		got, err = x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{10}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Brief: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("held %d tasks, want 1", len(got))
	}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("held task:\n%+v\nwant the row, leased:\n%+v", got[0], want)
	}
}

// TestFullDiskIsErrFull: SQLite's SQLITE_FULL (here the database at its max_page_count, as on a
// full disk) is store.ErrFull, which the engine takes as no fault of the task's.
func TestFullDiskIsErrFull(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := t.Context()
	var pages int
	if err := db.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+1)); err != nil {
		t.Fatal(err)
	}
	err := db.InTx(ctx, func(x store.Executor) error {
		ps := make([]store.TaskInsertParams, 2000)
		for i := range ps {
			ps[i] = store.TaskInsertParams{JobID: 1, ItemID: int64(i + 1), Step: "s", Action: "noop", Queue: "q", MaxAttempts: 1, SortKey: strings.Repeat("k", 200)}
		}
		return x.TaskInsertMany(ctx, ps)
	})
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("inserting past max_page_count: %v, want store.ErrFull", err)
	}
}

// TestBriefBatchDies: a brief batch's pick commits with its record before its tasks run; a
// process that dies then (its transaction ends without it: nothing converts the record) leaves
// the tasks ready at their attempt until the record expires, when TaskGetStuck turns them into
// expired leases, the attempt counted.
func TestBriefBatchDies(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := t.Context()
	if _, err := db.w.ExecContext(ctx, `INSERT INTO tasks (id, job_id, item_id, step, action, queue, state, attempt, max_attempts, sort_key, created_at)
		VALUES (7, 3, 5, 'step', 'noop', 'q', 'ready', 0, 4, 'k', 1)`); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMicro(1_000_000).UTC()
	until := now.Add(time.Minute)
	errDied := errors.New("process died")
	err := db.InTx(ctx, func(x store.Executor) error {
		got, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{10}, Owner: "dead", Now: now, LeaseUntil: until, Brief: true})
		if err != nil || len(got) != 1 {
			return fmt.Errorf("brief batch = %v, %v; want 1 task", got, err)
		}
		x.(*queries).brief = nil // the process dies: nothing of it runs after the pick
		return errDied
	})
	if !errors.Is(err, errDied) {
		t.Fatal(err)
	}
	if got, err := db.TaskGet(ctx, 7); err != nil || got.State != record.TaskReady || got.Attempt != 0 {
		t.Fatalf("task of the dead batch = %+v (%v), want ready at attempt 0 until its record expires", got, err)
	}
	if stuck, err := db.TaskGetStuck(ctx, now, 10); err != nil || len(stuck) != 0 {
		t.Fatalf("stuck before the lease's end = %v, %v; want none", stuck, err)
	}
	stuck, err := db.TaskGetStuck(ctx, until.Add(time.Second), 10)
	if err != nil || len(stuck) != 1 || stuck[0].ID != 7 || stuck[0].Attempt != 1 || stuck[0].LeaseOwner != "dead" || !stuck[0].StartedAt.Equal(now) {
		t.Fatalf("stuck = %+v, %v; want task 7 running at attempt 1, owner dead, started at the pick", stuck, err)
	}
}

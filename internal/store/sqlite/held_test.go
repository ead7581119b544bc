package sqlite

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// TestHeldPickReadsTheRow: a held pick reads fewer columns than taskCols (taskHoldCols) and sets
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
	want.State, want.Attempt, want.LeaseOwner, want.LeaseExpires, want.StartedAt, want.Held = store.TaskRunning, 2, "o", now.Add(time.Minute), now, true
	var got []*store.Task
	if err := db.InTx(ctx, func(x store.Executor) error {
		got, err = x.TaskHoldMany(ctx, store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{10}, Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute)})
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

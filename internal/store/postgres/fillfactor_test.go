package postgres

import (
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestFinishStaysOnPage: a batch's finish writes each task's new version on the task's own
// page (migration 021 leaves 60 % of each page for it), so the update neither looks for space
// elsewhere nor logs a lock of the old row while it does. A thousand ready tasks, packed as a
// job's insert packs them, are taken as one brief batch and finished in its transaction, as a
// worker does; each task's row must be where it was.
func TestFinishStaysOnPage(t *testing.T) {
	t.Parallel()
	db := openTestSchema(t)
	ctx := t.Context()
	const n = 1000
	owner := "ingest-7.example.internal-123456-0a1b2c3d" // a node's owner: host, pid, random
	if _, err := db.pool.Exec(ctx, `INSERT INTO tasks (job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at)
		SELECT 1, g, 'convert', 'convert', 'q', 'ready', 3, lpad(g::text, 10, '0'), 0 FROM generate_series(1, $1::bigint) g`, n); err != nil {
		t.Fatal(err)
	}
	pages := func() map[int64]string {
		t.Helper()
		rows, err := db.pool.Query(ctx, `SELECT id, (ctid::text::point)[0]::text FROM tasks`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		at := map[int64]string{}
		for rows.Next() {
			var id int64
			var page string
			if err := rows.Scan(&id, &page); err != nil {
				t.Fatal(err)
			}
			at[id] = page
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := pages()
	if len(before) != n {
		t.Fatalf("%d tasks inserted, want %d", len(before), n)
	}
	now := time.Now().Truncate(time.Microsecond)
	err := db.InTx(ctx, func(x store.Executor) error {
		held, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{n}, Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute), Brief: true})
		if err != nil {
			return err
		}
		if len(held) != n {
			t.Fatalf("brief batch of %d tasks, want %d", len(held), n)
		}
		ps := make([]store.TaskFinishParams, len(held))
		for i, tk := range held {
			ps[i] = store.TaskFinishParams{ID: tk.ID, Attempt: tk.Attempt, State: record.TaskComplete, Worker: owner, Now: now.Add(time.Second), Started: now}
		}
		oks, err := x.TaskSetStateIfRunningMany(ctx, ps)
		for i, ok := range oks {
			if !ok {
				t.Fatalf("task %d not finished", ps[i].ID)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for id, page := range pages() {
		if page != before[id] {
			moved++
		}
	}
	if moved > 0 {
		t.Fatalf("%d of %d finished tasks' rows moved to another page; want each on its own page", moved, n)
	}
}

package engine_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/store"
)

// TestStoppedJobDecidedUnderLock checks that a transaction deciding on a failed job's items
// takes the job's row lock, so that it waits for a retry in another process holding that lock
// (the retry's JobReopen) instead of settling an item as a stopped job's beside it. Postgres
// only: SQLite has one writer.
func TestStoppedJobDecidedUnderLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openStore(t, "postgres")
	e, job := oneRootJob(t, db, action.Spec{Name: "a"}, "ext", "name: ext\nexternal: [approved]\nsteps:\n  a: {action: a, needs: [start, approved]}\n", true)
	items, err := db.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(items) != 1 {
		t.Fatalf("items = %d, %v", len(items), err)
	}
	if ok, err := db.JobSetState(ctx, store.JobSetStateParams{ID: job.ID, State: store.JobFailed, Error: "failed", Now: time.Now()}); err != nil || !ok {
		t.Fatalf("fail the job: %v %v", ok, err)
	}
	conn, err := pgx.Connect(ctx, os.Getenv("SLUICE_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	// Another process's retry, as far as the lock goes: a transaction holding the job's row.
	err = db.InTx(ctx, func(x store.Executor) error {
		if _, err := x.JobLock(ctx, job.ID); err != nil {
			return err
		}
		go func() {
			_, err := e.FireExternal(ctx, items[0].ID, "approved")
			done <- err
		}()
		var returned error
		poll.Until(t, 20*time.Second, "the event's transaction to wait for the job's lock", func() (bool, string) {
			select {
			case err := <-done:
				returned = fmt.Errorf("FireExternal on a failed job returned (error %v) while another transaction held the job's row", err)
				return true, ""
			default:
			}
			var waiting int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM jobs WHERE id = $1 FOR UPDATE%'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			return waiting > 0, fmt.Sprintf("%d backends waiting on a job's lock", waiting)
		})
		return returned
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("FireExternal after the lock was released: %v", err)
	}
}

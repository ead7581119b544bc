package engine_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
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
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "a"}}, "ext", "name: ext\nexternal: [approved]\nsteps:\n  a: {action: a, needs: [start, approved]}\n", true)
	items, err := db.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(items) != 1 {
		t.Fatalf("items = %d, %v", len(items), err)
	}
	if ok, err := db.JobSetState(ctx, store.JobSetStateParams{ID: job.ID, State: record.JobFailed, Error: "failed", Now: time.Now()}); err != nil || !ok {
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

// raceWorkflow's one step waits for an external event besides start: its root is ingested by
// the transaction that fires the event (the step is inline), or stays open until then.
const raceWorkflow = "name: race\nexternal: [approved]\nsteps:\n  a: {action: a, needs: [start, approved]}\n"

// waitForIngestLock waits, inside another transaction, until a backend waits for a job's ingest
// lock in mode (pg_locks: an advisory lock on two keys, the second the job's id). It returns an
// error if done reports first: the transaction it waits for did not wait.
func waitForIngestLock(t *testing.T, conn *pgx.Conn, jobID int64, mode string, done chan error, who string) error {
	t.Helper()
	var returned error
	poll.Until(t, 20*time.Second, who+" to wait for the job's ingest lock", func() (bool, string) {
		select {
		case err := <-done:
			returned = fmt.Errorf("%s returned (error %v) while another transaction held the job's ingest lock", who, err)
			done <- err
			return true, ""
		default:
		}
		var waiting int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND objsubid = 2 AND objid::bigint = $1 AND mode = $2`, jobID, mode).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0, fmt.Sprintf("%d backends waiting", waiting)
	})
	return returned
}

// raceJob returns a job with one open root, waiting for approved, and a connection to look at
// the locks with.
func raceJob(t *testing.T) (store.Store, *engine.Engine, *record.Job, *record.Item, *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	db := openStore(t, "postgres")
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "a"}, policy: action.Policy{Inline: action.InlineAlways}}, "race", raceWorkflow, true)
	items, err := db.ItemList(ctx, store.ItemListParams{JobID: job.ID, Limit: 10})
	if err != nil || len(items) != 1 || items[0].State == record.ItemIngested {
		t.Fatalf("items = %v, %v; want one open root", items, err)
	}
	conn, err := pgx.Connect(ctx, os.Getenv("SLUICE_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.WithoutCancel(ctx)) })
	return db, e, job, items[0], conn
}

// raceIngestLock holds the job's ingest lock in a transaction (hold), runs other beside it until
// other waits for that lock in mode, commits, and then wants other to succeed and the job to
// have completed: the transaction that looked for open items saw the other's writes.
func raceIngestLock(t *testing.T, db store.Store, conn *pgx.Conn, jobID int64, hold func(x store.Executor) error, other func() error, mode, who string) {
	t.Helper()
	done := make(chan error, 1)
	err := db.InTx(t.Context(), func(x store.Executor) error {
		if err := hold(x); err != nil {
			return err
		}
		go func() { done <- other() }()
		return waitForIngestLock(t, conn, jobID, mode, done, who)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("%s after the other transaction committed: %v", who, err)
	}
	j, err := db.JobGet(t.Context(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != record.JobComplete {
		t.Fatalf("job is %s (sealed %v), want complete: its seal and the ingest of its last root missed each other", j.State, j.Sealed)
	}
}

// TestIngestBesideSeal checks the job's ingest lock from the side of a transaction that ingests
// a job's last root while another seals it: it waits for the seal to commit, then reads the job
// sealed and completes it. Reading the job before the lock, it would leave it running for good:
// the seal's transaction saw the root open. Postgres only (SQLite has one writer).
func TestIngestBesideSeal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, e, job, root, conn := raceJob(t)
	raceIngestLock(t, db, conn, job.ID, func(x store.Executor) error {
		if _, err := x.JobSeal(ctx, job.ID); err != nil {
			return err
		}
		_, err := x.JobGet(ctx, job.ID) // sends the seal's lock
		return err
	}, func() error {
		_, err := e.FireExternal(ctx, root.ID, "approved") // runs a inline: ingests the root
		return err
	}, "ShareLock", "the ingesting transaction")
}

// TestSealBesideIngest checks it from the side of the seal: Seal waits for a transaction that
// holds the ingest lock (and ingests the job's last root) to commit, then finds nothing open and
// completes the job. Without the lock it would see the root open, and the ingesting
// transaction, having read the job unsealed, would not end it either.
func TestSealBesideIngest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, e, job, root, conn := raceJob(t)
	raceIngestLock(t, db, conn, job.ID, func(x store.Executor) error {
		j, err := x.JobIngestLock(ctx, job.ID)
		if err != nil {
			return err
		}
		if j.Sealed {
			return fmt.Errorf("job sealed before Seal")
		}
		// As an ingesting transaction that read the job unsealed: the root ingested, no end.
		n, err := x.ItemSetStateMany(ctx, store.ItemSetStateManyParams{IDs: []int64{root.ID}, From: root.State, To: record.ItemIngested, Now: time.Now()})
		if err == nil && n != 1 {
			err = fmt.Errorf("ingested %d items, want the root", n)
		}
		return err
	}, func() error { return e.Seal(ctx, job.ID) }, "ExclusiveLock", "Seal")
}

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// open returns a store in a new schema of its own, dropped when the test ends.
func open(tb testing.TB) *postgres.DB {
	tb.Helper()
	return openSchema(tb, drivertest.Schema(tb), false)
}

func openSchema(tb testing.TB, schema string, skipMigrate bool) *postgres.DB {
	tb.Helper()
	url := drivertest.DatabaseURL(tb)
	db, err := postgres.Open(tb.Context(), postgres.Config{URL: url, Schema: schema, SkipMigrate: skipMigrate})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		db.Close()
		drivertest.DropSchema(tb, url, schema)
	})
	return db
}

func TestStore(t *testing.T) {
	t.Parallel()
	drivertest.DatabaseURL(t)
	storetest.Exercise(t, func(t *testing.T) store.Store { return open(t) })
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openSchema(t, drivertest.Schema(t), true)
	status, err := db.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(status) == 0 || !status[0].AppliedAt.IsZero() {
		t.Fatalf("status before migrating = %+v, want all pending", status)
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var versions []int
	for _, m := range applied {
		versions = append(versions, m.Version)
	}
	if want := postgres.MigrationVersions(); !slices.Equal(versions, want) {
		t.Errorf("Migrate applied %v, want %v", versions, want)
	}
	if again, err := db.Migrate(ctx); err != nil || len(again) != 0 {
		t.Errorf("second Migrate = %v, %v; want nothing to do", again, err)
	}
	status, err = db.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range status {
		if m.AppliedAt.IsZero() || m.Name == "" {
			t.Errorf("after Migrate: %+v", m)
		}
	}
	// Concurrent Opens of a fresh schema (many processes starting at once) all succeed.
	schema := drivertest.Schema(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			db, err := postgres.Open(ctx, postgres.Config{URL: drivertest.DatabaseURL(t), Schema: schema})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	openSchema(t, schema, true) // registers the cleanup
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
}

func TestTryLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := drivertest.Schema(t)
	a, b := openSchema(t, schema, false), openSchema(t, schema, true)
	other := open(t) // another schema: another lock namespace
	la, ok, err := a.TryLock(ctx, "maintenance")
	if err != nil || !ok {
		t.Fatalf("first TryLock = %v, %v", ok, err)
	}
	if err := la.Check(ctx); err != nil {
		t.Fatalf("Check of a held lock: %v", err)
	}
	if l, ok, err := b.TryLock(ctx, "maintenance"); err != nil || ok || l != nil {
		t.Fatalf("TryLock while held = %v, %v, %v; want nil, false", l, ok, err)
	}
	if l, ok, err := other.TryLock(ctx, "maintenance"); err != nil || !ok {
		t.Fatalf("TryLock in another schema = %v, %v; want true", ok, err)
	} else {
		l.Release()
	}
	la.Release()
	la.Release() // idempotent
	if err := la.Check(ctx); err == nil {
		t.Fatal("Check of a released lock succeeded")
	}
	lb, ok, err := b.TryLock(ctx, "maintenance")
	if err != nil || !ok {
		t.Fatalf("TryLock after release = %v, %v", ok, err)
	}
	defer lb.Release()

	// The server releases the lock of a session that ends without unlocking (a killed process),
	// and the holder's Check reports the loss.
	conn, err := pgx.Connect(ctx, drivertest.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, schema+".maintenance"); err != nil {
		t.Fatal(err)
	}
	if err := lb.Check(ctx); err == nil {
		t.Fatal("Check after the server ended the lock's session succeeded")
	}
	var la2 store.Lock
	poll.Until(t, 10*time.Second, "the lock to be free after its session ended", func() (bool, string) {
		var err error
		la2, ok, err = a.TryLock(ctx, "maintenance")
		return err == nil && ok, fmt.Sprint(ok, err)
	})
	la2.Release()
}

func BenchmarkLeaseFinish(b *testing.B) {
	storetest.BenchmarkLeaseFinish(b, func(tb testing.TB) store.Store { return open(tb) }, 10_000)
}

// TestRenewSkipsHeldRows checks that renewing a process's leases does not wait for a transaction
// of the same process that holds one of its tasks (its committer finishing it): the held task is
// left for that transaction, the others are renewed.
func TestRenewSkipsHeldRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now().Truncate(time.Microsecond)
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Metadata: []byte(`{}`), Options: []byte(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		it, _, err := db.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: fmt.Sprint(i), Name: fmt.Sprint(i), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "s", Action: "a", Queue: "q", MaxAttempts: 3, SortKey: it.SortKey, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	leased, err := db.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: 2, Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(leased) != 2 {
		t.Fatalf("lease = %d tasks, %v; want 2", len(leased), err)
	}
	held := leased[0]
	err = db.InTx(ctx, func(x store.Executor) error {
		if _, err := x.TaskFinish(ctx, store.TaskFinishParams{ID: held.ID, Attempt: held.Attempt, State: record.TaskComplete, Now: now}); err != nil {
			return err
		}
		// Another connection renews while this transaction holds the finished task's row.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := db.TaskRenewLeases(rctx, store.TaskRenewLeasesParams{Owner: "w", TaskIDs: []int64{leased[0].ID, leased[1].ID}, Until: now.Add(2 * time.Minute)})
		if err != nil {
			return fmt.Errorf("renew while a task is held: %w (it waited for the holder)", err)
		}
		if n != 1 {
			return fmt.Errorf("renewed %d leases, want 1 (the task not held)", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.TaskGet(ctx, leased[1].ID); err != nil || !got.LeaseExpires.Equal(now.Add(2*time.Minute)) {
		t.Errorf("the task not held: lease until %v (%v), want %v", got.LeaseExpires, err, now.Add(2*time.Minute))
	}
	if got, err := db.TaskGet(ctx, held.ID); err != nil || got.State != record.TaskComplete {
		t.Errorf("the held task = %+v (%v), want complete", got, err)
	}
}

// TestDeadlockIsErrRetry checks that a transaction Postgres aborts as a deadlock victim returns
// an error wrapping store.ErrRetry, which the committer runs again.
func TestDeadlockIsErrRetry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now()
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var ids [2]int64
	for i := range ids {
		it, _, err := db.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: fmt.Sprint(i), Name: fmt.Sprint(i), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = it.ID
	}
	// Two transactions lock the two items in opposite orders; each takes its first lock before
	// either asks for its second, so Postgres must abort one of them.
	var first sync.WaitGroup
	first.Add(2)
	errs := make(chan error, 2)
	for _, order := range [][2]int64{{ids[0], ids[1]}, {ids[1], ids[0]}} {
		go func() {
			errs <- db.InTx(ctx, func(x store.Executor) error {
				if _, err := x.ItemLock(ctx, order[0]); err != nil {
					return err
				}
				first.Done()
				first.Wait()
				_, err := x.ItemLock(ctx, order[1])
				return err
			})
		}()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("errors %v and %v, want exactly one deadlock victim", e1, e2)
	}
	victim := e1
	if victim == nil {
		victim = e2
	}
	if !errors.Is(victim, store.ErrRetry) {
		t.Errorf("deadlock victim's error = %v, want one wrapping store.ErrRetry", victim)
	}
}

// BenchmarkPickAtBacklog: SLUICE_BENCH_BACKLOGS=1000,10000000 for the figures of
// docs/performance.md.
func BenchmarkPickAtBacklog(b *testing.B) {
	storetest.BenchmarkPickAtBacklog(b, func(tb testing.TB) store.Store { return open(tb) }, postgres.FillBacklog)
}

package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// fillReserve draws a block of item ids into the DB's reserve, as a transaction that found it
// low would in the background.
func fillReserve(db *DB) {
	db.reserve.mu.Lock()
	db.reserve.filling = true
	db.reserve.mu.Unlock()
	db.reserve.wg.Add(1)
	db.reserve.fill(db, aheadBlock)
}

// TestItemInsertAhead checks items written ahead: ids are reserved once roots come in a stream;
// a transaction that adds them and their tasks commits in one round trip, with the reserved ids; one whose item key exists, or whose job is
// no longer as given, fails with ErrStale and writes nothing.
func TestItemInsertAhead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestSchema(t)
	now := time.Now()
	job, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Now: now, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	root := func(ord int) store.ItemInsertParams {
		return store.ItemInsertParams{JobID: job.ID, Ordinal: ord, SortKey: "k", Name: "r", RangeLen: 1, Now: now}
	}
	// add adds the roots ahead with a task each, and returns what went ahead and the round trips.
	add := func(j *store.Job, ps ...store.ItemInsertParams) (items []*store.Item, ok bool, trips int, err error) {
		var tc *txConn
		err = db.InTx(ctx, func(x store.Executor) error {
			tc = x.(*queries).c.(*txConn)
			var err error
			if items, ok, err = x.(store.ItemAdderAhead).ItemInsertAhead(ctx, j, ps); err != nil || !ok {
				return err
			}
			for _, it := range items {
				if err := x.TaskInsertMany(ctx, []store.TaskInsertParams{{JobID: job.ID, ItemID: it.ID, Step: "a", Action: "a", Queue: "q", MaxAttempts: 1, SortKey: "k", Now: now}}); err != nil {
					return err
				}
			}
			return nil
		})
		return items, ok, tc.sends, err
	}
	count := func(table string) (n int) {
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, ok, _, err := add(job, root(0)); ok || err != nil {
		t.Fatalf("with no ids reserved: ok %v, %v; want nothing written ahead", ok, err)
	}
	// One transaction that found too few draws nothing; the next within aheadStream does.
	held := func() (int, bool) {
		db.reserve.mu.Lock()
		defer db.reserve.mu.Unlock()
		return len(db.reserve.ids), db.reserve.filling
	}
	if n, filling := held(); n > 0 || filling {
		t.Errorf("after one transaction: %d ids reserved, filling %v; want none drawn for a single root", n, filling)
	}
	if ids := db.reserve.take(db, 1, time.Now()); ids != nil {
		t.Fatalf("took %v from an empty reserve", ids)
	}
	db.reserve.wg.Wait()
	if n, _ := held(); n != aheadBlock {
		t.Fatalf("after a second transaction at once: %d ids reserved, want %d", n, aheadBlock)
	}
	fillReserve(db)
	items, ok, trips, err := add(job, root(0), root(1))
	if err != nil || !ok || len(items) != 2 {
		t.Fatalf("ahead: %d items, ok %v, %v", len(items), ok, err)
	}
	if trips != 1 {
		t.Errorf("the transaction took %d round trips, want 1", trips)
	}
	for _, it := range items {
		got, err := db.ItemGet(ctx, it.ID)
		if err != nil {
			t.Fatalf("item %d written ahead: %v", it.ID, err)
		}
		if got.RootID != it.ID || got.JobID != job.ID || got.Ordinal != it.Ordinal || got.State != store.ItemWritten {
			t.Errorf("item %d as stored: %+v, want the root returned: %+v", it.ID, got, it)
		}
	}
	if n, m := count("open_items"), count("tasks"); n != 2 || m != 2 {
		t.Errorf("open_items %d, tasks %d; want 2 and 2", n, m)
	}

	// A replayed root among new ones: nothing of the transaction is written.
	if _, ok, _, err := add(job, root(5), root(1)); !ok || !errors.Is(err, store.ErrStale) {
		t.Errorf("a root whose key exists: ok %v, %v; want ErrStale", ok, err)
	}
	// The job as the caller read it is not as it is now.
	if _, err := db.JobSeal(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _, err := add(job, root(6)); !ok || !errors.Is(err, store.ErrStale) {
		t.Errorf("a job sealed since it was read: ok %v, %v; want ErrStale", ok, err)
	}
	if n, m, k := count("items"), count("open_items"), count("tasks"); n != 2 || m != 2 || k != 2 {
		t.Errorf("after the stale transactions: items %d, open_items %d, tasks %d; want 2 of each", n, m, k)
	}
	sealed, err := db.JobGet(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _, err := add(sealed, root(7)); !ok || err != nil {
		t.Errorf("the job as it is now: ok %v, %v", ok, err)
	}

	// Ids drawn longer ago than aheadFresh are not used.
	fillReserve(db)
	db.reserve.mu.Lock()
	db.reserve.at = db.reserve.at.Add(-2 * aheadFresh)
	db.reserve.mu.Unlock()
	if _, ok, _, err := add(sealed, root(8)); ok || err != nil {
		t.Errorf("with ids reserved %v ago: ok %v, %v; want nothing written ahead", 2*aheadFresh, ok, err)
	}
	// Nor are they for more roots than aheadLow.
	fillReserve(db)
	many := make([]store.ItemInsertParams, aheadLow+1)
	for i := range many {
		many[i] = root(100 + i)
	}
	if _, ok, _, err := add(sealed, many...); ok || err != nil {
		t.Errorf("%d roots: ok %v, %v; want nothing written ahead", len(many), ok, err)
	}
}

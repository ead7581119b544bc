package postgres

import (
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
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

// TestItemInsertRootsAhead checks roots written ahead: ids are reserved once roots come in a
// stream; a transaction that adds them and their tasks commits in one round trip, with the
// reserved ids; one whose item key exists, or whose job is no longer as given, writes nothing
// and runs again, reading first, and so do the job's next roots.
func TestItemInsertRootsAhead(t *testing.T) {
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
	// add adds the roots with a task each, and returns what its last run added, whether ahead,
	// how many runs the transaction took and the round trips of the last.
	add := func(j *record.Job, ps ...store.ItemInsertParams) (items []*record.Item, ok bool, runs, trips int, err error) {
		var tc *txConn
		err = db.InTx(ctx, func(x store.Executor) error {
			runs++
			tc = x.(*queries).c.(*txConn)
			var err error
			if items, ok, err = x.ItemInsertRoots(ctx, j, ps); err != nil {
				return err
			}
			for _, it := range items {
				if err := x.TaskInsertMany(ctx, []store.TaskInsertParams{{JobID: job.ID, ItemID: it.ID, Step: "a", Action: "a", Queue: "q", MaxAttempts: 1, SortKey: "k", Now: now}}); err != nil {
					return err
				}
			}
			return nil
		})
		return items, ok, runs, tc.sends, err
	}
	count := func(table string) (n int) {
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, ok, _, _, err := add(job, root(0)); ok || err != nil {
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
	items, ok, _, trips, err := add(job, root(1), root(2))
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
		if got.RootID != it.ID || got.JobID != job.ID || got.Ordinal != it.Ordinal || got.State != record.ItemWritten {
			t.Errorf("item %d as stored: %+v, want the root returned: %+v", it.ID, got, it)
		}
	}
	if n, m := count("open_items"), count("tasks"); n != 3 || m != 3 {
		t.Errorf("open_items %d, tasks %d; want 3 and 3", n, m)
	}

	// A replayed root among new ones: the first run writes nothing, the second reads first
	// and adds the new root once.
	items, ok, runs, _, err := add(job, root(5), root(1))
	if err != nil || ok || runs != 2 || len(items) != 1 || items[0].Ordinal != 5 {
		t.Errorf("a root whose key exists: %d items, ok %v in %d runs, %v; want root 5 alone, read first in the second run", len(items), ok, runs, err)
	}
	// The job's next roots read first.
	fillReserve(db)
	if _, ok, runs, _, err := add(job, root(6)); err != nil || ok || runs != 1 {
		t.Errorf("the next root of a job whose roots went stale: ok %v in %d runs, %v; want read first", ok, runs, err)
	}
	// The job as the caller read it is not as it is now (its roots ahead again, as after
	// another job's roots failed ahead).
	db.staleRoots.Store(0)
	if _, err := db.JobSeal(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, runs, _, err := add(job, root(7)); err != nil || ok || runs != 2 {
		t.Errorf("a job sealed since it was read: ok %v in %d runs, %v; want read first in the second run", ok, runs, err)
	}
	if n, m, k := count("items"), count("open_items"), count("tasks"); n != 6 || m != 6 || k != 6 {
		t.Errorf("after the stale transactions: items %d, open_items %d, tasks %d; want 6 of each", n, m, k)
	}
	sealed, err := db.JobGet(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	db.staleRoots.Store(0)
	fillReserve(db)
	if _, ok, _, _, err := add(sealed, root(8)); !ok || err != nil {
		t.Errorf("the job as it is now: ok %v, %v", ok, err)
	}

	// Ids drawn longer ago than aheadFresh are not used.
	fillReserve(db)
	db.reserve.mu.Lock()
	db.reserve.at = db.reserve.at.Add(-2 * aheadFresh)
	db.reserve.mu.Unlock()
	if _, ok, _, _, err := add(sealed, root(9)); ok || err != nil {
		t.Errorf("with ids reserved %v ago: ok %v, %v; want nothing written ahead", 2*aheadFresh, ok, err)
	}
	// Nor are they for more roots than aheadLow.
	fillReserve(db)
	many := make([]store.ItemInsertParams, aheadLow+1)
	for i := range many {
		many[i] = root(100 + i)
	}
	if _, ok, _, _, err := add(sealed, many...); ok || err != nil {
		t.Errorf("%d roots: ok %v, %v; want nothing written ahead", len(many), ok, err)
	}
}

package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestPickFloors: a queue's first pick starts at the front of the index; the next, at the last
// task it returned (in index order) if it came back full; one from the front comes again after fullPickEvery, and
// after any pick that came back short.
func TestPickFloors(t *testing.T) {
	t.Parallel()
	var f pickFloors
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	task := func(job int64, key string) *record.Task { return &record.Task{Queue: "q", JobID: job, SortKey: key} }
	check := func(now time.Time, wantFull bool, wantJob int64, wantKey string) {
		t.Helper()
		jobs, keys, full := f.starts([]string{"q"}, now)
		if full[0] != wantFull || jobs[0] != wantJob || keys[0] != wantKey {
			t.Fatalf("at %s: start (%d, %q), full %v; want (%d, %q), %v", now.Sub(t0), jobs[0], keys[0], full[0], wantJob, wantKey, wantFull)
		}
	}
	limits := []int32{3}
	check(at(0), true, 0, "")
	f.picked([]string{"q"}, limits, []*record.Task{task(2, "b"), task(1, "z"), task(1, "c")})
	check(at(10*time.Millisecond), false, 2, "b")
	f.picked([]string{"q"}, limits, []*record.Task{task(1, "d"), task(1, "e"), task(1, "f")})
	check(at(20*time.Millisecond), false, 1, "f")
	f.picked([]string{"q"}, limits, []*record.Task{task(1, "g")}) // short: no floor
	check(at(30*time.Millisecond), true, 0, "")
	f.picked([]string{"q"}, limits, []*record.Task{task(1, "h"), task(1, "i"), task(1, "j")})
	check(at(40*time.Millisecond), false, 1, "j")
	check(at(30*time.Millisecond+fullPickEvery), true, 0, "")
}

// TestPickBelowFloor: a task made ready before the floor — a retry keeping its sort key — is
// still picked, by a pick from the front of the index, and first, as its place in the order says.
func TestPickBelowFloor(t *testing.T) {
	t.Parallel()
	db := openTestSchema(t)
	FillBacklog(t, db, 2000, 1000)
	ctx := t.Context()
	pick := func(limit int) string {
		t.Helper()
		ts := holdRolledBack(t, db, limit)
		if len(ts) == 0 {
			return ""
		}
		return ts[0].SortKey
	}
	if first := pick(100); first != "0000001001" {
		t.Fatalf("first pick began at %q, want the first ready task, 0000001001", first)
	}
	if _, err := db.pool.Exec(ctx, `UPDATE tasks SET state = 'ready' WHERE sort_key = '0000000005'`); err != nil {
		t.Fatal(err)
	}
	// Picks that come back full find it within fullPickEvery.
	poll.Until(t, 10*time.Second, "the task before the floor is picked", func() (bool, string) {
		first := pick(100)
		return first == "0000000005", "picks begin at " + first
	})
	// A pick that asks for more than there is past the floor finds one before it at once.
	if _, err := db.pool.Exec(ctx, `UPDATE tasks SET state = 'ready' WHERE sort_key = '0000000003'`); err != nil {
		t.Fatal(err)
	}
	if first := pick(5000); first != "0000000003" {
		t.Fatalf("a pick for more than the ready tasks began at %q, want 0000000003", first)
	}
}

// TestPickFloorGivenBack: what this process took and gave back — a pick whose transaction rolled
// back, a leased task finished back to ready — is picked again at once, and first, though the
// floor had moved past it (the floor is cleared; without that it waits for a pick from the front).
func TestPickFloorGivenBack(t *testing.T) {
	t.Parallel()
	db := openTestSchema(t)
	FillBacklog(t, db, 2000, 1000)
	ctx := t.Context()
	hold := func() string {
		t.Helper()
		ts := holdRolledBack(t, db, 100)
		if len(ts) != 100 {
			t.Fatalf("held %d tasks, want 100", len(ts))
		}
		return ts[0].SortKey
	}
	for i := range 2 {
		if first := hold(); first != "0000001001" {
			t.Fatalf("held pick %d (after a rolled-back one) began at %q, want 0000001001", i, first)
		}
	}
	lease := func() []*record.Task {
		t.Helper()
		now := time.Now()
		ts, err := db.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: 100, Owner: "t", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 100 {
			t.Fatalf("leased %d tasks, want 100", len(ts))
		}
		return ts
	}
	first := lease()[0]
	if first.SortKey != "0000001001" {
		t.Fatalf("lease began at %q, want 0000001001", first.SortKey)
	}
	if ok, err := db.TaskFinish(ctx, store.TaskFinishParams{ID: first.ID, Attempt: first.Attempt, State: record.TaskReady, Refund: true, Now: time.Now()}); err != nil || !ok {
		t.Fatalf("give back: %v, %v", ok, err)
	}
	if again := lease()[0].SortKey; again != "0000001001" {
		t.Fatalf("a lease after a task was given back began at %q, want it, 0000001001", again)
	}
}

// holdRolledBack leases up to limit ready tasks of queue "q" in a transaction it then rolls
// back, and returns what the pick took.
func holdRolledBack(t *testing.T, db *DB, limit int) []*record.Task {
	t.Helper()
	ctx := t.Context()
	errRollback := errors.New("roll back")
	var held []*record.Task
	now := time.Now()
	err := db.InTx(ctx, func(x store.Executor) error {
		ts, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{limit}, Owner: "t", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			return err
		}
		held = ts
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	return held
}

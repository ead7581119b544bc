package postgres

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestFreshRows checks the inserts of tasks and events of items inserted in the same transaction
// (inserted_rows.go): the first of each goes in, a repeat in the transaction is left alone, as ON
// CONFLICT leaves alone a row of an older item; and they go in without ON CONFLICT — a row the
// driver did not write (put there behind its back) makes the insert fail rather than be skipped.
func TestFreshRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestSchema(t)
	now := time.Now().Truncate(time.Microsecond)
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Metadata: []byte(`{}`), Options: []byte(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	item := func(ord int) store.ItemInsertParams {
		return store.ItemInsertParams{JobID: j.ID, Ordinal: ord, SortKey: fmt.Sprint(ord), Name: fmt.Sprint(ord), Now: now}
	}
	task := func(itemID int64, step string, done *store.TaskDone) store.TaskInsertParams {
		return store.TaskInsertParams{JobID: j.ID, ItemID: itemID, Step: step, Action: "a", Queue: "q", MaxAttempts: 3, SortKey: "k", Now: now, Done: done}
	}
	event := func(itemID int64, name string) store.EventInsertParams {
		return store.EventInsertParams{ItemID: itemID, Name: name, Now: now}
	}
	skipped, failed := &store.TaskDone{State: record.TaskSkipped}, &store.TaskDone{State: record.TaskFailed, Error: "boom"}

	// An item of an earlier transaction, with a task and an event.
	old, _, err := db.ItemInsert(ctx, item(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.TaskInsert(ctx, task(old.ID, "a", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EventInsert(ctx, event(old.ID, "start")); err != nil {
		t.Fatal(err)
	}

	var n1, n2 *record.Item
	err = db.InTx(ctx, func(x store.Executor) error {
		its, err := x.ItemInsertMany(ctx, []store.ItemInsertParams{item(1), item(2)})
		if err != nil {
			return err
		}
		n1, n2 = its[0], its[1]
		if _, err := x.TaskInsert(ctx, task(n2.ID, "c", nil)); err != nil { // one at a time, counted too
			return err
		}
		if err := x.TaskInsertMany(ctx, []store.TaskInsertParams{task(old.ID, "a", failed), task(n1.ID, "a", nil), task(n1.ID, "b", skipped), task(n2.ID, "a", nil)}); err != nil {
			return err
		}
		if err := x.TaskInsertMany(ctx, []store.TaskInsertParams{task(n1.ID, "a", failed), task(n2.ID, "b", skipped), task(n2.ID, "c", failed)}); err != nil {
			return err
		}
		if err := x.EventInsertMany(ctx, []store.EventInsertParams{event(n1.ID, "start"), event(n1.ID, "start"), event(old.ID, "start")}); err != nil {
			return err
		}
		return x.EventInsertMany(ctx, []store.EventInsertParams{event(n1.ID, "start"), event(n2.ID, "start"), event(n1.ID, "x")})
	})
	if err != nil {
		t.Fatalf("inserts of fresh items' rows: %v", err)
	}
	want := map[int64]map[string]record.TaskState{
		old.ID: {"a": record.TaskReady},
		n1.ID:  {"a": record.TaskReady, "b": record.TaskSkipped},
		n2.ID:  {"a": record.TaskReady, "b": record.TaskSkipped, "c": record.TaskReady},
	}
	for id, steps := range want {
		ts, err := db.TaskListByItem(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]record.TaskState{}
		for _, tk := range ts {
			got[tk.Step] = tk.State
		}
		if fmt.Sprint(got) != fmt.Sprint(steps) {
			t.Errorf("tasks of item %d = %v, want %v (the first insert of each)", id, got, steps)
		}
	}
	for id, events := range map[int64][]string{old.ID: {"start"}, n1.ID: {"start", "x"}, n2.ID: {"start"}} {
		got, err := db.EventListByItem(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, events) {
			t.Errorf("events of item %d = %v, want %v", id, got, events)
		}
	}

	// Behind the driver's back, a fresh item's task exists: the driver's insert is a plain one.
	err = db.InTx(ctx, func(x store.Executor) error {
		its, err := x.ItemInsertMany(ctx, []store.ItemInsertParams{item(3)})
		if err != nil {
			return err
		}
		q := x.(*queries)
		if _, err := q.c.Exec(ctx, `INSERT INTO tasks (job_id, item_id, step, action, queue, state, max_attempts, sort_key, created_at) VALUES ($1, $2, 'a', 'a', 'q', 'ready', 3, 'k', 0)`, j.ID, its[0].ID); err != nil {
			return err
		}
		if err := x.TaskInsertMany(ctx, []store.TaskInsertParams{task(its[0].ID, "a", nil)}); err != nil {
			return err
		}
		_, err = x.TaskListByItem(ctx, its[0].ID) // sends the insert
		return err
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("insert of a fresh item's task that exists = %v, want a conflict (no ON CONFLICT)", err)
	}
}

// TestNewRows checks the tasks and events the engine marks New (it holds the item's lock and
// knows them new): of an item of an earlier transaction, they go in, next to unmarked ones that
// keep ON CONFLICT; and without ON CONFLICT — one that exists fails the insert and the
// transaction, where an unmarked one is left alone.
func TestNewRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestSchema(t)
	now := time.Now().Truncate(time.Microsecond)
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Metadata: []byte(`{}`), Options: []byte(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	it, _, err := db.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "k", Name: "i", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	task := func(step string, isNew bool) store.TaskInsertParams {
		return store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: step, Action: "a", Queue: "q", MaxAttempts: 3, SortKey: "k", Now: now, New: isNew}
	}
	event := func(name string, isNew bool) store.EventInsertParams {
		return store.EventInsertParams{ItemID: it.ID, Name: name, Now: now, New: isNew}
	}
	if _, err := db.TaskInsert(ctx, task("a", false)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EventInsert(ctx, event("a.done", false)); err != nil {
		t.Fatal(err)
	}

	// New rows and a repeat left alone, in one transaction.
	err = db.InTx(ctx, func(x store.Executor) error {
		if err := x.TaskInsertMany(ctx, []store.TaskInsertParams{task("b", true), task("a", false)}); err != nil {
			return err
		}
		return x.EventInsertMany(ctx, []store.EventInsertParams{event("b.done", true), event("a.done", false)})
	})
	if err != nil {
		t.Fatalf("insert of new rows: %v", err)
	}
	ts, err := db.TaskListByItem(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, tk := range ts {
		steps = append(steps, tk.Step)
	}
	if !slices.Equal(steps, []string{"a", "b"}) {
		t.Errorf("tasks = %v, want [a b]", steps)
	}
	evs, err := db.EventListByItem(ctx, it.ID)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(evs)
	if !slices.Equal(evs, []string{"a.done", "b.done"}) {
		t.Errorf("events = %v, want [a.done b.done]", evs)
	}

	// A row marked New that exists fails the transaction: the insert does not look for it.
	for _, tc := range []struct {
		name string
		ins  func(x store.Executor) error
	}{
		{"task", func(x store.Executor) error { return x.TaskInsertMany(ctx, []store.TaskInsertParams{task("a", true)}) }},
		{"event", func(x store.Executor) error {
			return x.EventInsertMany(ctx, []store.EventInsertParams{event("a.done", true)})
		}},
	} {
		err := db.InTx(ctx, func(x store.Executor) error {
			if err := tc.ins(x); err != nil {
				return err
			}
			_, err := x.TaskListByItem(ctx, it.ID) // sends the insert
			return err
		})
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("insert of an existing %s marked New = %v, want a conflict (no ON CONFLICT)", tc.name, err)
		}
	}
}

// TestColorLater checks that a transaction's ItemColorMany goes out with its next statement
// (execLater), not in a round trip of its own, and that the statements after it see it.
func TestColorLater(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openTestSchema(t)
	now := time.Now()
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Metadata: []byte(`{}`), Options: []byte(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	item, _, err := db.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, SortKey: "k", Name: "i", RangeLen: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	err = db.InTx(ctx, func(x store.Executor) error {
		if _, err := x.ItemLock(ctx, item.ID); err != nil {
			return err
		}
		tc := x.(*queries).c.(*txConn)
		sends := tc.sends
		if err := x.ItemColorMany(ctx, []int64{item.ID}, []float64{0.25}); err != nil {
			return err
		}
		if tc.sends != sends || len(tc.later) != 1 {
			t.Errorf("ItemColorMany sent %d statements, queued %d; want it queued for the next one", tc.sends-sends, len(tc.later))
		}
		it, err := x.ItemLock(ctx, item.ID)
		if err != nil {
			return err
		}
		if it.Colored != 0.25 {
			t.Errorf("colored read after ItemColorMany in its transaction = %v, want 0.25", it.Colored)
		}
		return x.ItemColorMany(ctx, []int64{item.ID}, []float64{0.5}) // sent with the commit
	})
	if err != nil {
		t.Fatal(err)
	}
	it, err := db.ItemGet(ctx, item.ID)
	if err != nil || it.Colored != 0.5 {
		t.Fatalf("item after commit = %+v, %v; want colored 0.5", it, err)
	}
}

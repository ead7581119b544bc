package postgres_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// TestExecLater checks the writes a transaction sends with its next statement (execLater:
// events, tasks, a job's total, a held lease's deletion): the statements after them see them,
// and one that fails fails the statement or the commit it went out with, naming the write, and
// rolls back the whole transaction.
func TestExecLater(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, tk, now := oneReadyTask(t)
	err := db.InTx(ctx, func(x store.Executor) error {
		if err := x.EventInsertMany(ctx, []store.EventInsertParams{{ItemID: tk.ItemID, Name: "e1", Now: now}}); err != nil {
			return err
		}
		if err := x.JobAddTotal(ctx, tk.JobID, 5); err != nil {
			return err
		}
		evs, err := x.EventListByItem(ctx, tk.ItemID)
		if err != nil {
			return err
		}
		if !slices.Contains(evs, "e1") {
			t.Errorf("events read after EventInsertMany in its transaction = %v, want e1", evs)
		}
		return x.EventInsertMany(ctx, []store.EventInsertParams{{ItemID: tk.ItemID, Name: "e2", Now: now}}) // sent with the commit
	})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := db.EventListByItem(ctx, tk.ItemID)
	if err != nil || !slices.Equal(evs, []string{"e1", "e2"}) {
		t.Fatalf("events after commit = %v, %v; want [e1 e2]", evs, err)
	}
	total := func() float64 {
		t.Helper()
		j, err := db.JobGet(ctx, tk.JobID)
		if err != nil {
			t.Fatal(err)
		}
		return j.TotalBytes
	}
	if got := total(); got != 5 {
		t.Fatalf("total after commit = %v, want 5", got)
	}
	// Postgres refuses a NUL byte in text: the bad event fails where it is sent.
	bad := []store.EventInsertParams{{ItemID: tk.ItemID, Name: "bad\x00name", Now: now}}
	for _, tc := range []struct {
		name string
		then func(x store.Executor) error // after the bad write
	}{
		{"next statement", func(x store.Executor) error {
			_, err := x.JobGet(ctx, tk.JobID)
			if err == nil || !strings.Contains(err.Error(), "insert 1 events") {
				t.Errorf("JobGet after a failing write = %v, want the write's error", err)
			}
			return err
		}},
		{"commit", func(store.Executor) error { return nil }},
	} {
		err := db.InTx(ctx, func(x store.Executor) error {
			if err := x.JobAddTotal(ctx, tk.JobID, 7); err != nil {
				return err
			}
			if err := x.EventInsertMany(ctx, bad); err != nil {
				t.Errorf("%s: EventInsertMany returned %v before it was sent", tc.name, err)
				return err
			}
			return tc.then(x)
		})
		if err == nil || !strings.Contains(err.Error(), "insert 1 events") {
			t.Errorf("%s: InTx = %v, want the failing write's error", tc.name, err)
		}
		if got := total(); got != 5 {
			t.Errorf("%s: total = %v after a failed transaction, want 5 (rolled back)", tc.name, got)
		}
	}
	evs, err = db.EventListByItem(ctx, tk.ItemID)
	if err != nil || len(evs) != 2 {
		t.Fatalf("events after the failed transactions = %v, %v; want the 2 committed", evs, err)
	}
}

// oneReadyTask opens a DB with one ready task, and returns the task and when it was made.
func oneReadyTask(t *testing.T) (*postgres.DB, *record.Task, time.Time) {
	t.Helper()
	db := open(t)
	now := time.Now()
	tk, err := db.TaskGet(t.Context(), readyTasks(t, db, 1, now)[0])
	if err != nil {
		t.Fatal(err)
	}
	return db, tk, now
}

// twoDBs opens two DBs on one schema (cleanup drops it twice: harmless) with a job and an item,
// and returns how to insert a ready task of the item in a queue.
func twoDBs(t *testing.T) (mine, theirs *postgres.DB, ins func(queue string) store.TaskInsertParams) {
	t.Helper()
	mine = open(t)
	theirs = openSchema(t, mine.Schema(), false)
	now := time.Now()
	j, err := mine.JobInsert(t.Context(), store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 1, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	it, _, err := mine.ItemInsert(t.Context(), store.ItemInsertParams{JobID: j.ID, Name: "i", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return mine, theirs, func(queue string) store.TaskInsertParams {
		return store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: queue, Action: "a", Queue: queue, MaxAttempts: 1, Now: now}
	}
}

// nextWake waits for the next wake of ch and returns what it announced.
func nextWake(t *testing.T, ch <-chan struct{}, take func() ([]string, bool)) ([]string, bool) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no notification within 20s")
	}
	return take()
}

// TestNotifyOthers checks that NotifyOthers hears the notifications of another DB's
// connections and not those of its own, which Notify hears.
func TestNotifyOthers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mine, theirs, ins := twoDBs(t)
	insert := func(db store.Store, queue string) {
		t.Helper()
		if _, err := db.TaskInsert(ctx, ins(queue)); err != nil {
			t.Fatal(err)
		}
	}
	ochan, otake, ostop := mine.NotifyOthers()
	defer ostop()
	achan, atake, astop := mine.Notify()
	defer astop()
	take := func(ch <-chan struct{}, take func() ([]string, bool)) ([]string, bool) { return nextWake(t, ch, take) }
	// The listener wakes every subscriber once on connecting, NotifyOthers's too.
	if _, all := take(ochan, otake); !all {
		t.Fatal("NotifyOthers's first wake does not announce every queue")
	}
	// Notifications reach the listener in commit order: once theirs is heard, mine was too.
	insert(mine, "mine")
	insert(theirs, "theirs")
	if qs, all := take(ochan, otake); all || !slices.Equal(qs, []string{"theirs"}) {
		t.Errorf("NotifyOthers announced %v (all %v), want only [theirs]", qs, all)
	}
	heard := map[string]bool{}
	for !heard["mine"] || !heard["theirs"] {
		qs, _ := take(achan, atake)
		for _, q := range qs {
			heard[q] = true
		}
	}
}

// TestItemInsertReadsJob checks the job read in the batch of ItemInsertMany: a JobGet sent next
// gets it, and one after another write of the transaction reads the job again and sees that
// write.
func TestItemInsertReadsJob(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := open(t)
	now := time.Now()
	j, err := db.JobInsert(ctx, store.JobInsertParams{WorkflowName: "w", WorkflowVersion: 3, Metadata: []byte(`{"a":1}`), Options: []byte(`{}`), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	err = db.InTx(ctx, func(x store.Executor) error {
		its, err := x.ItemInsertMany(ctx, []store.ItemInsertParams{{JobID: j.ID, Ordinal: 0, SortKey: "0", Name: "a", Now: now}, {JobID: j.ID, Ordinal: 1, SortKey: "1", Name: "b", Now: now}})
		if err != nil || len(its) != 2 {
			t.Fatalf("ItemInsertMany = %v, %v; want 2 items", its, err)
		}
		got, err := x.JobGet(ctx, j.ID)
		if err != nil {
			return err
		}
		if got.ID != j.ID || got.WorkflowName != "w" || got.WorkflowVersion != 3 || got.State != record.JobRunning || string(got.Metadata) != `{"a": 1}` {
			t.Errorf("JobGet after ItemInsertMany = %+v, want job %d as inserted", got, j.ID)
		}
		if _, err := x.ItemInsertMany(ctx, []store.ItemInsertParams{{JobID: j.ID, Ordinal: 2, SortKey: "2", Name: "c", Now: now}}); err != nil {
			return err
		}
		if err := x.JobAddTotal(ctx, j.ID, 9); err != nil { // queued, sent with the next read
			return err
		}
		got, err = x.JobGet(ctx, j.ID)
		if err != nil {
			return err
		}
		if got.TotalBytes != 9 {
			t.Errorf("JobGet after JobAddTotal(9) = total %v, want 9", got.TotalBytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNotifyAfterCommit checks the notifications of a transaction's ready queues, sent once it
// committed and outside it (notifier): another DB hears those of a committed transaction and
// none of one that rolled back.
func TestNotifyAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mine, theirs, ins := twoDBs(t)
	ch, take, stop := mine.NotifyOthers()
	defer stop()
	wait := func() ([]string, bool) { return nextWake(t, ch, take) }
	if _, all := wait(); !all {
		t.Fatal("the first wake does not announce every queue")
	}
	insert := func(queue string, fail error) error {
		return theirs.InTx(ctx, func(x store.Executor) error {
			if _, err := x.TaskInsert(ctx, ins(queue)); err != nil {
				return err
			}
			return fail
		})
	}
	if err := insert("rolled-back", errRollback); !errors.Is(err, errRollback) {
		t.Fatalf("rolled back transaction: %v", err)
	}
	if err := insert("committed", nil); err != nil {
		t.Fatal(err)
	}
	if qs, all := wait(); all || !slices.Equal(qs, []string{"committed"}) {
		t.Errorf("heard %v (all %v), want only [committed]", qs, all)
	}
}

// TestLaterWrites checks the per-document writes that go out with a transaction's next statement
// (an output, a cache entry, an item's update and child count, a domain's write): the reads
// after them in the transaction see them, a caller's buffer reused after the call does not change
// what is written, and a failing one fails the statement it went out with, naming it.
func TestLaterWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, tk, now := oneReadyTask(t)
	if _, err := db.DomainSQL().Exec(ctx, `CREATE TABLE later_domain (v text)`); err != nil {
		t.Fatal(err)
	}
	text := "the text"
	err := db.InTx(ctx, func(x store.Executor) error {
		value := []byte(`{"a":1}`)
		if err := x.OutputPut(ctx, store.OutputPutParams{ItemID: tk.ItemID, JobID: tk.JobID, Kind: "document", Value: value, Now: now}); err != nil {
			return err
		}
		cached := []byte("cached")
		if err := x.CachePut(ctx, store.CachePutParams{Key: "k", Value: cached, Now: now}); err != nil {
			return err
		}
		copy(value, `{"b":2}`) // the caller's buffers, reused
		copy(cached, "zapped")
		if err := x.ItemUpdate(ctx, store.ItemUpdateParams{ID: tk.ItemID, Text: &text}); err != nil {
			return err
		}
		text = "changed after the call"
		if err := x.ItemAddChild(ctx, store.ItemAddChildParams{ParentID: tk.ItemID, N: 2}); err != nil {
			return err
		}
		if err := x.DomainSQL().ExecLater(ctx, "domain row", `INSERT INTO later_domain (v) VALUES ($1)`, "d"); err != nil {
			return err
		}
		outs, err := x.OutputList(ctx, store.OutputListParams{JobID: tk.JobID})
		if err != nil || len(outs) != 1 || string(outs[0].Value) != `{"a":1}` {
			t.Errorf("outputs read in the transaction = %v, %v; want the one put, as put", outs, err)
		}
		v, err := x.CacheGet(ctx, "k")
		if err != nil || string(v) != "cached" {
			t.Errorf("cache entry read in the transaction = %q, %v; want %q", v, err, "cached")
		}
		it, err := x.ItemGet(ctx, tk.ItemID)
		if err != nil || it.Text != "the text" || it.NChildren != 2 {
			t.Errorf("item read in the transaction = %+v, %v; want its text and 2 children", it, err)
		}
		rows, err := x.DomainSQL().Query(ctx, `SELECT count(*) FROM later_domain`)
		if err != nil {
			return err
		}
		defer rows.Close()
		var n int
		if !rows.Next() || rows.Scan(&n) != nil || n != 1 {
			t.Errorf("domain rows read in the transaction = %d, want 1", n)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	// Postgres refuses a NUL byte in text: the bad output fails the next statement, by name.
	err = db.InTx(ctx, func(x store.Executor) error {
		if err := x.OutputPut(ctx, store.OutputPutParams{ItemID: tk.ItemID, JobID: tk.JobID, Kind: "bad\x00kind", Value: []byte(`{}`), Now: now}); err != nil {
			t.Errorf("OutputPut returned %v before it was sent", err)
			return err
		}
		_, err := x.JobGet(ctx, tk.JobID)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), `put output "bad`) {
		t.Errorf("a failing output = %v, want its error named at the next statement", err)
	}
}

package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// testHeldLeases checks that a driver holds a ready task without writing it and finishes it
// once, counting the attempt. (Postgres's own tests cover skipping, rollback and expiry in
// depth.)
func testHeldLeases(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "a"), "s")
	p := store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{5}, Owner: "w", Now: b.now, LeaseUntil: b.at(time.Minute)}
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		held, err := x.TaskHoldMany(ctx, p)
		if err != nil {
			return err
		}
		if len(held) != 1 || held[0].ID != tk.ID || !held[0].Held || held[0].Attempt != 1 {
			return fmt.Errorf("held %+v, want task %d, held, at attempt 1", held, tk.ID)
		}
		if got := b.getTask(tk.ID); got.State != store.TaskReady || got.Attempt != 0 {
			t.Errorf("held task read from outside = %s at attempt %d, want ready at 0 (nothing written)", got.State, got.Attempt)
		}
		oks, err := x.TaskFinishMany(ctx, []store.TaskFinishParams{{ID: tk.ID, Attempt: 1, State: store.TaskComplete, Now: b.at(time.Second), Held: true, Started: b.now}})
		if err == nil && !oks[0] {
			t.Error("held finish not ok")
		}
		return err
	}))
	if got := b.getTask(tk.ID); got.State != store.TaskComplete || got.Attempt != 1 || !got.StartedAt.Equal(b.now) {
		t.Errorf("held task after its finish = %+v, want complete at attempt 1, started at the hold", got)
	}
}

// testHeldLeaseRecordExpire checks a held lease recorded in the transaction that picked its tasks
// (the way of a store with one writer, SQLite, where nothing else can commit while the holding
// transaction is open): a batch whose process died after that commit leaves its record, which
// HeldLeaseExpire turns, once expired, into lost attempts (running, lease expired, attempt
// counted), while a batch that ran has its tasks finished and its record deleted together.
// Renewals move the end of the records named, of their owner only.
func testHeldLeaseRecordExpire(t *testing.T, b *bundle) {
	ctx := t.Context()
	jobID := b.job("").ID
	dead := b.task(b.s, b.root(jobID, 0, "a"), "s")
	live := b.task(b.s, b.root(jobID, 1, "b"), "s")
	until := b.at(time.Minute)
	pick := func(x store.Executor, owner string, limit int) ([]*store.Task, int64, error) {
		held, err := x.TaskHoldMany(ctx, store.TaskLeaseManyParams{Queues: []string{"q"}, Limits: []int{limit}, Owner: owner, Now: b.now, LeaseUntil: until})
		if err != nil || len(held) != limit {
			return nil, 0, fmt.Errorf("hold %d = %v, %v", limit, held, err)
		}
		tk := held[limit-1]
		id, err := x.HeldLeaseRecord(ctx, store.HeldLeaseParams{Owner: owner, TaskIDs: []int64{tk.ID}, Attempts: []int{tk.Attempt}, Started: b.now, Until: until})
		return held, id, err
	}
	// The dead batch: its pick and record commit, and its process dies before the run.
	var deadID int64
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		held, id, err := pick(x, "dead", 1)
		if err == nil && held[0].ID != dead.ID {
			err = fmt.Errorf("held task %d first, want %d", held[0].ID, dead.ID)
		}
		deadID = id
		return err
	}))
	if got := b.getTask(dead.ID); got.State != store.TaskReady || got.Attempt != 0 {
		t.Errorf("task of the committed pick = %s at attempt %d, want ready at 0 (nothing written)", got.State, got.Attempt)
	}
	// The live batch: picked and recorded, then run and finished with its record deleted.
	var held []*store.Task
	var liveID int64
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		var err error
		held, liveID, err = pick(x, "live", 2)
		return err
	}))
	tk := held[1]
	if tk.ID != live.ID || tk.Attempt != 1 {
		t.Fatalf("second held task = %+v, want task %d at attempt 1", tk, live.ID)
	}
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		if err := x.HeldLeaseDelete(ctx, liveID); err != nil {
			return err
		}
		oks, err := x.TaskFinishMany(ctx, []store.TaskFinishParams{{ID: tk.ID, Attempt: tk.Attempt, State: store.TaskComplete, Now: b.at(time.Second), Held: true, Started: b.now}})
		if err == nil && !oks[0] {
			err = errors.New("held finish of the live batch not ok")
		}
		return err
	}))
	if n, err := b.s.HeldLeaseExpire(ctx, b.now); err != nil || n != 0 {
		t.Fatalf("expire before the lease ends = %d, %v; want 0", n, err)
	}
	for _, p := range []store.TaskRenewLeasesParams{
		{Owner: "dead", Until: until.Add(time.Hour)},                                       // no record named
		{Owner: "live", HeldLeaseIDs: []int64{deadID}, Until: until.Add(time.Hour)},        // another owner's
		{Owner: "dead", HeldLeaseIDs: []int64{deadID}, Until: until.Add(time.Minute)},      // this one
		{Owner: "dead", HeldLeaseIDs: []int64{deadID + 1000}, Until: until.Add(time.Hour)}, // no such record
	} {
		must(b.s.TaskRenewLeases(ctx, p))(t)
	}
	if n, err := b.s.HeldLeaseExpire(ctx, until.Add(time.Second)); err != nil || n != 0 {
		t.Fatalf("expire after a renewal = %d, %v; want 0", n, err)
	}
	if n, err := b.s.HeldLeaseExpire(ctx, until.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expire = %d, %v; want 1 task", n, err)
	}
	if got := b.getTask(dead.ID); got.State != store.TaskRunning || got.Attempt != 1 || got.LeaseOwner != "dead" || !got.StartedAt.Equal(b.now) {
		t.Fatalf("task of the dead batch = %+v, want running at attempt 1, owner dead, started at the pick", got)
	}
	expired := must(b.s.TaskListExpired(ctx, b.now, 10))(t)
	if len(expired) != 1 || expired[0].ID != dead.ID {
		t.Fatalf("expired leases = %v, want task %d", expired, dead.ID)
	}
	if got := b.getTask(live.ID); got.State != store.TaskComplete || got.Attempt != 1 {
		t.Fatalf("task of the finished batch = %+v, want complete at attempt 1", got)
	}
	if n, err := b.s.HeldLeaseExpire(ctx, until.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second expire = %d, %v; want 0 (the record is gone)", n, err)
	}
}

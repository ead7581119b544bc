package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// testBriefBatch checks a brief batch (TaskGetAvailable with Brief) that commits: its tasks come
// back running at their next attempt, owned and started; their rows, read from outside while the
// transaction is open, were not written running; the finish counts the attempt once and writes
// its start; and nothing of the batch is left for TaskGetStuck to reclaim, however late.
func testBriefBatch(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	tks := []*record.Task{b.task(b.s, b.root(j.ID, 0, "a"), "s"), b.task(b.s, b.root(j.ID, 1, "b"), "s")}
	until := b.at(time.Minute)
	p := store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{5}, Owner: "w", Now: b.now, LeaseUntil: until, Brief: true}
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		got, err := x.TaskGetAvailable(ctx, p)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0].ID != tks[0].ID || got[1].ID != tks[1].ID {
			return fmt.Errorf("brief batch %v, want tasks %d and %d", got, tks[0].ID, tks[1].ID)
		}
		for _, tk := range got {
			if tk.State != record.TaskRunning || tk.Attempt != 1 || tk.LeaseOwner != "w" || !tk.StartedAt.Equal(b.now) || !tk.LeaseExpires.Equal(until) {
				return fmt.Errorf("brief task = %+v, want running at attempt 1, owner w, started now, leased a minute", tk)
			}
		}
		if _, err := x.ItemLockMany(ctx, []int64{got[0].ItemID, got[1].ItemID}); err != nil {
			return err
		}
		for _, tk := range got {
			if row := b.getTask(tk.ID); row.State == record.TaskRunning {
				t.Errorf("brief task read from outside = %s at attempt %d, want not written running", row.State, row.Attempt)
			}
		}
		oks, err := x.TaskSetStateIfRunningMany(ctx, []store.TaskFinishParams{
			{ID: got[0].ID, Attempt: 1, State: record.TaskComplete, Now: b.at(time.Second), Started: b.now, Worker: "w"},
			{ID: got[1].ID, Attempt: 1, State: record.TaskFailed, Error: "x", Now: b.at(time.Second), Started: b.now, Worker: "w"},
		})
		if err == nil && (!oks[0] || !oks[1]) {
			err = fmt.Errorf("brief finishes = %v, want both ok", oks)
		}
		return err
	}))
	for i, want := range []record.TaskState{record.TaskComplete, record.TaskFailed} {
		if got := b.getTask(tks[i].ID); got.State != want || got.Attempt != 1 || !got.StartedAt.Equal(b.now) || got.LastWorker != "w" {
			t.Errorf("brief task %d after its finish = %+v, want %s at attempt 1, started at the get, by w", i, got, want)
		}
	}
	if stuck := must(b.s.TaskGetStuck(ctx, b.at(time.Hour), 10))(t); len(stuck) != 0 {
		t.Errorf("stuck after a committed brief batch = %v, want none", stuck)
	}
}

// testBriefRollback checks a brief batch whose transaction rolls back: its tasks stay leased,
// written, until the lease's end, so that the caller finishes them (or gives them back) in
// transactions of their own; TaskGetStuck reclaims them once the lease expired.
func testBriefRollback(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	tks := []*record.Task{b.task(b.s, b.root(j.ID, 0, "a"), "s"), b.task(b.s, b.root(j.ID, 1, "b"), "s")}
	until := b.at(time.Minute)
	errRollback := errors.New("roll back")
	err := b.s.InTx(ctx, func(x store.Executor) error {
		got, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"q"}, Max: []int{5}, Owner: "w", Now: b.now, LeaseUntil: until, Brief: true})
		if err != nil || len(got) != 2 {
			return fmt.Errorf("brief batch = %v, %v; want 2 tasks", got, err)
		}
		if _, err := x.ItemLockMany(ctx, []int64{got[0].ItemID, got[1].ItemID}); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	for _, tk := range tks {
		if got := b.getTask(tk.ID); got.State != record.TaskRunning || got.Attempt != 1 || got.LeaseOwner != "w" || !got.StartedAt.Equal(b.now) || !got.LeaseExpires.Equal(until) {
			t.Fatalf("task of a rolled-back brief batch = %+v, want running at attempt 1, owner w, started now, leased until %v", got, until)
		}
	}
	ok := must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tks[0].ID, Attempt: 1, State: record.TaskComplete, Now: b.at(time.Second), Started: b.now, Worker: "w"}))(t)
	if !ok {
		t.Error("finish of a rolled-back brief task not ok")
	}
	if stuck := must(b.s.TaskGetStuck(ctx, b.at(time.Second), 10))(t); len(stuck) != 0 {
		t.Errorf("stuck before the lease's end = %v, want none", stuck)
	}
	if stuck := must(b.s.TaskGetStuck(ctx, until.Add(time.Second), 10))(t); len(stuck) != 1 || stuck[0].ID != tks[1].ID {
		t.Errorf("stuck after the lease's end = %v, want task %d", stuck, tks[1].ID)
	}
}

package storetest

import (
	"slices"
	"testing"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// testBatches checks that each *Many method does what its single-row method does, row by row
// and in order, including a row repeated in one call.
func testBatches(t *testing.T, b *bundle) {
	ctx := t.Context()
	job := b.job("")
	r0, r1, r2 := b.root(job.ID, 0, "0000"), b.root(job.ID, 1, "0001"), b.root(job.ID, 2, "0002")
	for _, it := range []*record.Item{r0, r1, r2} {
		b.taskIn(b.s, it, "s", "s")
	}
	b.task(b.s, r0, "t")

	got := must(b.s.ItemGetMany(ctx, []int64{r2.ID, r0.ID, 1 << 40}))(t)
	if ids := itemIDs(got); !slices.Equal(ids, []int64{r0.ID, r2.ID}) {
		t.Errorf("ItemGetMany = %v, want %v (id order, missing left out)", ids, []int64{r0.ID, r2.ID})
	}
	ts := must(b.s.TaskListByItems(ctx, []int64{r1.ID, r0.ID}))(t)
	if len(ts) != 3 || ts[0].ItemID != r0.ID || ts[1].ItemID != r0.ID || ts[2].ItemID != r1.ID || ts[0].ID > ts[1].ID {
		t.Errorf("TaskListByItems = %+v, want r0's two tasks then r1's", ts)
	}

	leased := b.lease("s", 10, "w", b.now)
	if len(leased) != 3 {
		t.Fatalf("leased %d tasks, want 3", len(leased))
	}
	var ps []store.TaskFinishParams
	for _, tk := range leased {
		ps = append(ps, store.TaskFinishParams{ID: tk.ID, Attempt: tk.Attempt, State: record.TaskComplete, Now: b.at(1)})
	}
	ps[1].State, ps[1].Error, ps[1].RunAfter = record.TaskReady, "again", b.at(60)
	ps[2].Attempt++ // a lost lease: not this attempt
	// The same task again: already finished by the first row.
	ps = append(ps, store.TaskFinishParams{ID: leased[0].ID, Attempt: leased[0].Attempt, State: record.TaskFailed, Now: b.at(2)})
	var oks []bool
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		var err error
		oks, err = x.TaskSetStateIfRunningMany(ctx, ps)
		return err
	}))
	if !slices.Equal(oks, []bool{true, true, false, false}) {
		t.Errorf("TaskSetStateIfRunningMany = %v, want [true true false false]", oks)
	}
	if tk := b.getTask(leased[0].ID); tk.State != record.TaskComplete {
		t.Errorf("task 0 state %s, want complete", tk.State)
	}
	if tk := b.getTask(leased[1].ID); tk.State != record.TaskReady || tk.Error != "again" {
		t.Errorf("task 1 = %s %q, want ready \"again\"", tk.State, tk.Error)
	}
	if tk := b.getTask(leased[2].ID); tk.State != record.TaskRunning {
		t.Errorf("task 2 state %s, want running", tk.State)
	}
	// A batch without a task named twice: task 2 is snoozed with its
	// attempt refunded; tasks 0 and 1 are no longer running.
	ps = []store.TaskFinishParams{
		{ID: leased[2].ID, Attempt: leased[2].Attempt, State: record.TaskReady, Error: "snoozed", RunAfter: b.at(5), Refund: true, Now: b.at(3)},
		{ID: leased[1].ID, Attempt: leased[1].Attempt, State: record.TaskComplete, Now: b.at(3)},
		{ID: leased[0].ID, Attempt: leased[0].Attempt, State: record.TaskComplete, Now: b.at(3)},
	}
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		var err error
		oks, err = x.TaskSetStateIfRunningMany(ctx, ps)
		return err
	}))
	if !slices.Equal(oks, []bool{true, false, false}) {
		t.Errorf("TaskSetStateIfRunningMany without repeats = %v, want [true false false]", oks)
	}
	if tk := b.getTask(leased[2].ID); tk.State != record.TaskReady || tk.Error != "snoozed" || tk.Attempt != leased[2].Attempt-1 || !tk.FinishedAt.IsZero() || tk.LeaseOwner != "" {
		t.Errorf("snoozed task 2 = %+v", tk)
	} else {
		checkTime(t, "RunAfter of snoozed task 2", tk.RunAfter, b.at(5))
	}
	if tk := b.getTask(leased[0].ID); tk.State != record.TaskComplete {
		t.Errorf("task 0 state %s, want complete", tk.State)
	}

	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		locked, err := x.ItemLockMany(ctx, []int64{r1.ID, r0.ID, r1.ID})
		if err != nil {
			return err
		}
		if ids := itemIDs(locked); !slices.Equal(ids, []int64{r0.ID, r1.ID}) {
			t.Errorf("ItemLockMany = %v, want %v", ids, []int64{r0.ID, r1.ID})
		}
		return nil
	}))
}

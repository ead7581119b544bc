package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// testTaskLastWorker checks that every way an attempt ends keeps its worker on the task row
// (Task.LastWorker), while the lease itself is gone: a finish one at a time, a batch that mixes
// workers and endings, a held batch, a step inserted already ended (inline), and a retry, which
// keeps it until the next attempt ends. Every read of a task's record returns it.
func testTaskLastWorker(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	check := func(what string, id int64, state record.TaskState, worker string) {
		t.Helper()
		got := b.getTask(id)
		if got.State != state || got.LastWorker != worker || got.LeaseOwner != "" {
			t.Errorf("%s: task %d %s, last worker %q, lease owner %q; want %s, last worker %q, no lease owner",
				what, id, got.State, got.LastWorker, got.LeaseOwner, state, worker)
		}
	}

	// One finish at a time: the ready task has no worker yet; the running one has its lease.
	one := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	check("ready", one.ID, record.TaskReady, "")
	b.lease("q", 1, "w1", b.now)
	if got := b.getTask(one.ID); got.LeaseOwner != "w1" || got.LastWorker != "" {
		t.Errorf("running task: lease owner %q, last worker %q; want w1 and none", got.LeaseOwner, got.LastWorker)
	}
	if !must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: one.ID, Attempt: 1, State: record.TaskComplete, Now: b.at(time.Second), Worker: "w1"}))(t) {
		t.Fatal("TaskFinish = false")
	}
	check("complete", one.ID, record.TaskComplete, "w1")

	// A retry keeps the worker of the attempt it reuses the row after; the next attempt's
	// finish replaces it.
	// (A complete task goes back through blocked, as a retried collector does.)
	if !must(b.s.TaskRetry(ctx, store.TaskRetryParams{ID: one.ID, Now: b.at(time.Minute), Blocked: true}))(t) ||
		!must(b.s.TaskRetry(ctx, store.TaskRetryParams{ID: one.ID, Now: b.at(time.Minute)}))(t) {
		t.Fatal("TaskRetry of the complete task = false")
	}
	check("retried", one.ID, record.TaskReady, "w1")
	b.lease("q", 1, "w2", b.at(time.Minute))
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: one.ID, Attempt: 2, State: record.TaskFailed, Error: "boom", Now: b.at(2 * time.Minute), Worker: "w2"}))(t)
	check("failed on its second attempt", one.ID, record.TaskFailed, "w2")

	// A batch: several workers and endings at once (the driver may group them); each task keeps
	// its own worker.
	type end struct {
		state       record.TaskState
		err, worker string
	}
	ends := []end{
		{record.TaskComplete, "", "w1"}, {record.TaskComplete, "", "w1"}, {record.TaskComplete, "", "w2"},
		{record.TaskFailed, "bad", "w2"}, {record.TaskCanceled, "canceled", "w3"}, {record.TaskReady, "again", "w1"},
	}
	var ps []store.TaskFinishParams
	for i, e := range ends {
		it := b.root(j.ID, 10+i, fmt.Sprintf("1%d", i))
		b.task(b.s, it, "s")
		leased := b.lease("q", 1, e.worker, b.now)
		if len(leased) != 1 || leased[0].ItemID != it.ID {
			t.Fatalf("leased %+v, want the task of item %d", leased, it.ID)
		}
		ps = append(ps, store.TaskFinishParams{ID: leased[0].ID, Attempt: 1, State: e.state, Error: e.err, Now: b.at(time.Second), Worker: e.worker})
	}
	oks := must(b.s.TaskSetStateIfRunningMany(ctx, ps))(t)
	for i, p := range ps {
		if !oks[i] {
			t.Errorf("TaskSetStateIfRunningMany of task %d not ok", p.ID)
		}
		check(fmt.Sprintf("batch %s by %s", ends[i].state, ends[i].worker), p.ID, ends[i].state, ends[i].worker)
	}

	// A step run inline: inserted already ended, with the engine's name; a ready one inserted
	// beside it has none. Both inserts, one at a time and many.
	it := b.root(j.ID, 30, "30")
	must(b.s.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "inline", Action: "a", Queue: "q", MaxAttempts: 1,
		SortKey: it.SortKey, Now: b.now, Done: &store.TaskDone{State: record.TaskComplete, Worker: "engine-1"}}))(t)
	mustOK(t, b.s.TaskInsertMany(ctx, []store.TaskInsertParams{
		{JobID: j.ID, ItemID: it.ID, Step: "inline2", Action: "a", Queue: "q", MaxAttempts: 1, SortKey: it.SortKey, Now: b.now,
			Done: &store.TaskDone{State: record.TaskFailed, Error: "no", Worker: "engine-2"}, New: true},
		{JobID: j.ID, ItemID: it.ID, Step: "ready", Action: "a", Queue: "other", MaxAttempts: 1, SortKey: it.SortKey, Now: b.now, New: true},
	}))
	want := map[string]string{"inline": "engine-1", "inline2": "engine-2", "ready": ""}
	byItem := must(b.s.TaskListByItems(ctx, []int64{it.ID}))(t)
	byJob := must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, Limit: 100}))(t)
	for _, list := range [][]*record.Task{must(b.s.TaskListByItem(ctx, it.ID))(t), byItem, byJob} {
		n := 0
		for _, tk := range list {
			if w, ok := want[tk.Step]; ok {
				n++
				if tk.LastWorker != w {
					t.Errorf("listed task %s: last worker %q, want %q", tk.Step, tk.LastWorker, w)
				}
			}
		}
		if n != len(want) {
			t.Errorf("listed %d of the item's tasks, want %d", n, len(want))
		}
	}

	// A brief batch: the row was never written running, and its finish writes the worker.
	held := b.taskIn(b.s, b.root(j.ID, 40, "40"), "s", "h")
	mustOK(t, b.s.InTx(ctx, func(x store.Executor) error {
		got, err := x.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{"h"}, Max: []int{1}, Owner: "wh", Now: b.now, LeaseUntil: b.at(time.Minute), Brief: true})
		if err != nil {
			return err
		}
		if len(got) != 1 || got[0].ID != held.ID {
			return fmt.Errorf("held %+v, want task %d", got, held.ID)
		}
		oks, err := x.TaskSetStateIfRunningMany(ctx, []store.TaskFinishParams{{ID: held.ID, Attempt: 1, State: record.TaskComplete, Now: b.at(time.Second),
			Started: b.now, Worker: "wh"}})
		if err == nil && !oks[0] {
			return fmt.Errorf("held finish not ok")
		}
		return err
	}))
	check("held", held.ID, record.TaskComplete, "wh")
}

package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

func testTaskInsert(t *testing.T, b *bundle) {
	ctx := t.Context()
	it := b.root(b.job("").ID, 0, "0007")
	p := store.TaskInsertParams{JobID: it.JobID, ItemID: it.ID, Step: "detect", Action: "detect", Queue: "cpu", MaxAttempts: 3, SortKey: it.SortKey, ProgressWeight: 0.25, Now: b.now}
	if !must(b.s.TaskInsert(ctx, p))(t) {
		t.Error("first TaskInsert = false")
	}
	replay := p
	replay.Action, replay.Queue, replay.MaxAttempts, replay.Now = "other", "io", 9, b.at(time.Hour)
	if must(b.s.TaskInsert(ctx, replay))(t) {
		t.Error("replayed TaskInsert = true")
	}
	ts := must(b.s.TaskListByItem(ctx, it.ID))(t)
	if len(ts) != 1 {
		t.Fatalf("TaskListByItem = %d tasks, want 1", len(ts))
	}
	tk := b.getTask(ts[0].ID)
	if tk.JobID != it.JobID || tk.ItemID != it.ID || tk.Step != "detect" || tk.Action != "detect" || tk.Queue != "cpu" ||
		tk.State != record.TaskReady || tk.Attempt != 0 || tk.MaxAttempts != 3 || tk.SortKey != "0007" || tk.ProgressWeight != 0.25 ||
		tk.LeaseOwner != "" || tk.Error != "" {
		t.Errorf("task = %+v", tk)
	}
	checkTime(t, "CreatedAt", tk.CreatedAt, b.now)
	checkTime(t, "RunAfter", tk.RunAfter, time.Time{})
	checkTime(t, "LeaseExpires", tk.LeaseExpires, time.Time{})
	checkTime(t, "StartedAt", tk.StartedAt, time.Time{})
	checkTime(t, "FinishedAt", tk.FinishedAt, time.Time{})
	// Another step of the same item is another task.
	p.Step = "pdf"
	if !must(b.s.TaskInsert(ctx, p))(t) {
		t.Error("TaskInsert of a second step = false")
	}
}

// testInsertMany checks the multi-row inserts with counts that cross the drivers' chunk sizes.
func testInsertMany(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	for _, n := range []int{0, 1, 5, 70, 150} {
		var items []*record.Item
		var tasks []store.TaskInsertParams
		var events []store.EventInsertParams
		for i := range n {
			it := b.root(j.ID, i, fmt.Sprintf("%04d", i))
			items = append(items, it)
			p := store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "a", Action: "act", Queue: "q", MaxAttempts: 3, SortKey: it.SortKey, ProgressWeight: 0.5, Now: b.now}
			tasks = append(tasks, p)
			p.Step, p.Done = "b", &store.TaskDone{State: record.TaskFailed, Error: fmt.Sprint("boom ", i)}
			tasks = append(tasks, p)
			events = append(events, store.EventInsertParams{ItemID: it.ID, Name: "start", Now: b.now}, store.EventInsertParams{ItemID: it.ID, Name: "x", Now: b.now})
		}
		mustOK(t, b.s.TaskInsertMany(ctx, tasks))
		mustOK(t, b.s.EventInsertMany(ctx, events))
		// A row that exists is left alone, as with TaskInsert and EventInsert.
		mustOK(t, b.s.TaskInsertMany(ctx, tasks))
		mustOK(t, b.s.EventInsertMany(ctx, events))
		for i, it := range items {
			ts := must(b.s.TaskListByItem(ctx, it.ID))(t)
			if len(ts) != 2 {
				t.Fatalf("n=%d item %d: %d tasks, want 2", n, i, len(ts))
			}
			a, f := b.getTask(ts[0].ID), b.getTask(ts[1].ID)
			if a.Step != "a" || a.State != record.TaskReady || a.Attempt != 0 || a.Queue != "q" || a.SortKey != it.SortKey || a.ProgressWeight != 0.5 || a.MaxAttempts != 3 {
				t.Errorf("n=%d item %d: ready task = %+v", n, i, a)
			}
			checkTime(t, "ready FinishedAt", a.FinishedAt, time.Time{})
			if f.Step != "b" || f.State != record.TaskFailed || f.Attempt != 1 || f.Error != fmt.Sprint("boom ", i) {
				t.Errorf("n=%d item %d: ended task = %+v", n, i, f)
			}
			checkTime(t, "ended StartedAt", f.StartedAt, b.now)
			checkTime(t, "ended FinishedAt", f.FinishedAt, b.now)
			if ev := must(b.s.EventListByItem(ctx, it.ID))(t); len(ev) != 2 {
				t.Errorf("n=%d item %d: events %v, want start and x", n, i, ev)
			}
		}
	}
}

func testTaskLeaseOrder(t *testing.T, b *bundle) {
	older, newer := b.job(""), b.job("")
	// Insert the newer job's task first: age is the job's, not the task's.
	n0 := b.task(b.s, b.root(newer.ID, 0, "0000"), "s")
	r0 := b.root(older.ID, 0, "0000")
	r1 := b.root(older.ID, 1, "0001")
	t1 := b.task(b.s, r1, "s")
	c := b.child(r0, "unpack", 0) // 0000/0000: sorts between r0 and r1
	tc := b.task(b.s, c, "s")
	t0 := b.task(b.s, r0, "s")
	b.taskIn(b.s, r0, "elsewhere", "other-queue")

	before := b.now.Add(-time.Second)
	got := b.lease("q", 10, "w1", b.now)
	checkIDs(t, "lease order", taskIDs(got), []int64{t0.ID, tc.ID, t1.ID, n0.ID})
	for _, tk := range got {
		if tk.State != record.TaskRunning || tk.Attempt != 1 || tk.LeaseOwner != "w1" || tk.Queue != "q" {
			t.Errorf("leased task = %+v", tk)
		}
		checkTime(t, "LeaseExpires", tk.LeaseExpires, b.now.Add(time.Minute))
		checkTime(t, "StartedAt", tk.StartedAt, b.now)
	}
	if stored := b.getTask(t0.ID); stored.State != record.TaskRunning || stored.Attempt != 1 || stored.LeaseOwner != "w1" {
		t.Errorf("stored leased task = %+v", stored)
	}
	if again := b.lease("q", 10, "w2", b.now); len(again) != 0 {
		t.Errorf("second lease = %v, want none", taskIDs(again))
	}
	if other := b.lease("other-queue", 10, "w2", before); len(other) != 1 || other[0].Step != "elsewhere" {
		t.Errorf("lease of other-queue = %v", taskIDs(other))
	}
}

func testTaskLeaseLimit(t *testing.T, b *bundle) {
	j := b.job("")
	var want []int64
	for i := range 5 {
		want = append(want, b.task(b.s, b.root(j.ID, i, fmt.Sprintf("%04d", i)), "s").ID)
	}
	var got []int64
	for _, n := range []int{2, 2, 1, 0} {
		leased := b.lease("q", 2, "w", b.now)
		if len(leased) != n {
			t.Fatalf("lease with limit 2 = %d tasks, want %d", len(leased), n)
		}
		got = append(got, taskIDs(leased)...)
	}
	checkIDs(t, "leased in batches", got, want)
}

func testTaskLeaseRunAfter(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "0"), "s")
	b.lease("q", 1, "w", b.now)
	later := b.at(time.Minute)
	if !must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 1, State: record.TaskReady, Error: "retry me", RunAfter: later, Now: b.now}))(t) {
		t.Fatal("TaskFinish(ready) = false")
	}
	got := b.getTask(tk.ID)
	if got.State != record.TaskReady || got.Attempt != 1 || got.Error != "retry me" || got.LeaseOwner != "" {
		t.Errorf("after retry: %+v", got)
	}
	checkTime(t, "RunAfter", got.RunAfter, later)
	checkTime(t, "FinishedAt of a retry", got.FinishedAt, time.Time{})
	checkTime(t, "LeaseExpires of a retry", got.LeaseExpires, time.Time{})
	if n := b.lease("q", 1, "w", later.Add(-time.Microsecond)); len(n) != 0 {
		t.Errorf("lease before run_after = %v, want none", taskIDs(n))
	}
	again := b.lease("q", 1, "w", later) // run_after <= now
	if len(again) != 1 || again[0].Attempt != 2 {
		t.Fatalf("lease at run_after = %+v, want the task at attempt 2", again)
	}
}

func testTaskGetAvailable(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	var a, c []int64
	for i := range 3 {
		it := b.root(j.ID, i, fmt.Sprintf("%04d", i))
		c = append(c, b.taskIn(b.s, it, "c", "qc").ID)
		a = append(a, b.taskIn(b.s, it, "a", "qa").ID)
	}
	leaseMany := func(queues []string, limits []int, now time.Time) []*record.Task {
		t.Helper()
		return must(b.s.TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: queues, Max: limits, Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute)}))(t)
	}
	got := leaseMany([]string{"qc", "qa", "empty"}, []int{2, 10, 5}, b.now)
	checkIDs(t, "first lease", taskIDs(got), []int64{c[0], c[1], a[0], a[1], a[2]})
	for _, tk := range got {
		if tk.State != record.TaskRunning || tk.Attempt != 1 || tk.LeaseOwner != "w" {
			t.Errorf("leased task = %+v", tk)
		}
		checkTime(t, "LeaseExpires", tk.LeaseExpires, b.now.Add(time.Minute))
		checkTime(t, "StartedAt", tk.StartedAt, b.now)
	}
	later := b.at(time.Minute)
	if !must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: a[0], Attempt: 1, State: record.TaskReady, RunAfter: later, Now: b.now}))(t) {
		t.Fatal("TaskFinish(ready) = false")
	}
	got = leaseMany([]string{"qa", "qc"}, []int{5, 5}, b.now)
	checkIDs(t, "second lease", taskIDs(got), []int64{c[2]})
	got = leaseMany([]string{"qa", "qc"}, []int{5, 5}, later)
	if len(got) != 1 || got[0].ID != a[0] || got[0].Attempt != 2 {
		t.Errorf("lease at run_after = %+v, want task %d at attempt 2", got, a[0])
	}
}

func testTaskFinishGuard(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	finish := func(id int64, attempt int, state record.TaskState, msg string, now time.Time) bool {
		t.Helper()
		return must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: id, Attempt: attempt, State: state, Error: msg, Now: now}))(t)
	}
	tk := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	if finish(tk.ID, 0, record.TaskComplete, "", b.now) {
		t.Error("TaskFinish of a ready task = true")
	}
	b.lease("q", 1, "w", b.now)
	if finish(tk.ID, 2, record.TaskComplete, "", b.now) {
		t.Error("TaskFinish with a future attempt = true")
	}
	if !finish(tk.ID, 1, record.TaskComplete, "", b.at(time.Second)) {
		t.Error("TaskFinish(complete) = false")
	}
	if finish(tk.ID, 1, record.TaskFailed, "late", b.at(time.Hour)) {
		t.Error("second TaskFinish = true")
	}
	got := b.getTask(tk.ID)
	if got.State != record.TaskComplete || got.Attempt != 1 || got.Error != "" || got.LeaseOwner != "" {
		t.Errorf("completed task = %+v", got)
	}
	checkTime(t, "FinishedAt", got.FinishedAt, b.at(time.Second))
	checkTime(t, "LeaseExpires", got.LeaseExpires, time.Time{})

	// A stale attempt (its lease was lost and the task re-leased) cannot finish the new one.
	tk2 := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	b.lease("q", 1, "w1", b.now)
	if !finish(tk2.ID, 1, record.TaskReady, "crashed", b.now) {
		t.Fatal("TaskFinish(ready) = false")
	}
	b.lease("q", 1, "w2", b.now)
	if finish(tk2.ID, 1, record.TaskComplete, "", b.now) {
		t.Error("stale attempt 1 finished attempt 2")
	}
	if !finish(tk2.ID, 2, record.TaskFailed, "gave up", b.at(time.Minute)) {
		t.Error("TaskFinish(failed) of attempt 2 = false")
	}
	got = b.getTask(tk2.ID)
	if got.State != record.TaskFailed || got.Error != "gave up" || got.Attempt != 2 {
		t.Errorf("failed task = %+v", got)
	}
	checkTime(t, "FinishedAt", got.FinishedAt, b.at(time.Minute))
	// Canceled is a final state too.
	tk3 := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	b.lease("q", 1, "w", b.now)
	if !finish(tk3.ID, 1, record.TaskCanceled, "canceled", b.now) || b.getTask(tk3.ID).State != record.TaskCanceled {
		t.Error("TaskFinish(canceled) did not cancel")
	}
}

func testTaskFinishRefund(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "0"), "s")
	b.lease("q", 1, "w", b.now)
	if !must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 1, State: record.TaskReady, RunAfter: b.now, Refund: true, Now: b.now}))(t) {
		t.Fatal("TaskFinish(ready, refund) = false")
	}
	if got := b.getTask(tk.ID); got.State != record.TaskReady || got.Attempt != 0 {
		t.Errorf("after refund: %s attempt %d, want ready 0", got.State, got.Attempt)
	}
	if again := b.lease("q", 1, "w", b.now); len(again) != 1 || again[0].Attempt != 1 {
		t.Fatalf("lease after refund = %+v, want attempt 1 again", again)
	}
	// A refunded attempt number can finish only the attempt that now runs.
	if must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tk.ID, Attempt: 0, State: record.TaskComplete, Now: b.now}))(t) {
		t.Error("TaskFinish with attempt 0 after refund and re-lease = true")
	}
}

func testTaskRenewLeases(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	a1 := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	a2 := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	done := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	bt := b.task(b.s, b.root(j.ID, 3, "3"), "s")
	ready := b.task(b.s, b.root(j.ID, 4, "4"), "s")
	dropped := b.task(b.s, b.root(j.ID, 5, "5"), "s")
	b.lease("q", 3, "A", b.now) // a1, a2, done
	b.lease("q", 3, "B", b.now) // bt, ready, dropped
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: done.ID, Attempt: 1, State: record.TaskComplete, Now: b.now}))(t)
	// ready goes back to ready; dropped stays B's running task, whose id B no longer names.
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: ready.ID, Attempt: 1, State: record.TaskReady, Refund: true, Now: b.now}))(t)
	until := b.at(time.Hour)
	// Only the ids given, of tasks the owner runs: bt is B's, done and ready are not running,
	// and an id nobody has is ignored.
	p := store.TaskRenewLeasesParams{Owner: "A", TaskIDs: []int64{a1.ID, a2.ID, done.ID, bt.ID, ready.ID, 1 << 40}, Until: until}
	if n := must(b.s.TaskRenewLeases(ctx, p))(t); n != 2 {
		t.Errorf("TaskRenewLeases(A) = %d, want 2", n)
	}
	if n := must(b.s.TaskRenewLeases(ctx, store.TaskRenewLeasesParams{Owner: "B", Until: until}))(t); n != 0 {
		t.Errorf("TaskRenewLeases(B, no ids) = %d, want 0: a running task not named is not renewed", n)
	}
	for _, tc := range []struct {
		tk   *record.Task
		want time.Time
	}{{a1, until}, {a2, until}, {bt, b.at(time.Minute)}, {done, time.Time{}}, {ready, time.Time{}}, {dropped, b.at(time.Minute)}} {
		checkTime(t, fmt.Sprintf("LeaseExpires of task %d", tc.tk.ID), b.getTask(tc.tk.ID).LeaseExpires, tc.want)
	}
	if n := must(b.s.TaskRenewLeases(ctx, store.TaskRenewLeasesParams{Owner: "nobody", TaskIDs: []int64{a1.ID}, Until: until}))(t); n != 0 {
		t.Errorf("TaskRenewLeases(nobody) = %d, want 0", n)
	}
}

func testTaskListExpired(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	var ts []*record.Task
	for i := range 5 {
		ts = append(ts, b.task(b.s, b.root(j.ID, i, fmt.Sprint(i)), "s"))
	}
	// Leases expiring at +3m, +1m, +2m, +10m, and one finished.
	for i, until := range []time.Duration{3, 1, 2, 10, 1} {
		leased := must(b.s.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: 1, Owner: "w", Now: b.now, LeaseUntil: b.at(until * time.Minute)}))(t)
		if len(leased) != 1 || leased[0].ID != ts[i].ID {
			t.Fatalf("lease %d = %v", i, taskIDs(leased))
		}
	}
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: ts[4].ID, Attempt: 1, State: record.TaskComplete, Now: b.now}))(t)
	at := b.at(3 * time.Minute) // +3m itself is not expired yet
	checkIDs(t, "TaskListExpired", taskIDs(must(b.s.TaskListExpired(ctx, at, 10))(t)), []int64{ts[1].ID, ts[2].ID})
	checkIDs(t, "TaskListExpired limit 1", taskIDs(must(b.s.TaskListExpired(ctx, at, 1))(t)), []int64{ts[1].ID})
	checkIDs(t, "TaskListExpired later", taskIDs(must(b.s.TaskListExpired(ctx, b.at(time.Hour), 10))(t)), []int64{ts[1].ID, ts[2].ID, ts[0].ID, ts[3].ID})
	checkIDs(t, "TaskListExpired before any", taskIDs(must(b.s.TaskListExpired(ctx, b.now, 10))(t)), nil)
	if got := must(b.s.TaskListExpired(ctx, at, 10))(t); len(got) > 0 && (got[0].State != record.TaskRunning || got[0].LeaseOwner != "w") {
		t.Errorf("expired task = %+v", got[0])
	}
}

func testTaskLists(t *testing.T, b *bundle) {
	ctx := t.Context()
	j, other := b.job(""), b.job("")
	it := b.root(j.ID, 0, "0")
	s1, s2, s3 := b.task(b.s, it, "s1"), b.task(b.s, it, "s2"), b.task(b.s, it, "s3")
	s4 := b.task(b.s, b.root(j.ID, 1, "1"), "s1")
	b.task(b.s, b.root(other.ID, 0, "0"), "s1")
	b.lease("q", 1, "w", b.now) // s1
	leased2 := b.lease("q", 1, "w", b.now)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: leased2[0].ID, Attempt: 1, State: record.TaskComplete, Now: b.now}))(t) // s2

	checkIDs(t, "TaskListByItem", taskIDs(must(b.s.TaskListByItem(ctx, it.ID))(t)), []int64{s1.ID, s2.ID, s3.ID})
	checkIDs(t, "TaskListByJob", taskIDs(must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID}))(t)), []int64{s1.ID, s2.ID, s3.ID, s4.ID})
	checkIDs(t, "TaskListByJob ready", taskIDs(must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, State: record.TaskReady}))(t)), []int64{s3.ID, s4.ID})
	checkIDs(t, "TaskListByJob page", taskIDs(must(b.s.TaskListByJob(ctx, store.TaskListParams{JobID: j.ID, AfterID: s1.ID, Limit: 2}))(t)), []int64{s2.ID, s3.ID})
	stats := must(store.TaskStats(ctx, b.s, j.ID))(t)
	if want := map[record.TaskState]int{record.TaskRunning: 1, record.TaskComplete: 1, record.TaskReady: 2}; !mapsEqual(stats, want) {
		t.Errorf("TaskStats = %v, want %v", stats, want)
	}
	if empty := must(store.TaskStats(ctx, b.s, 1<<40))(t); len(empty) != 0 {
		t.Errorf("TaskStats of a missing job = %v, want empty", empty)
	}
	// Counts by state, step, action and queue, with retries: s3 is given back (its attempt refunded),
	// s4 goes back to ready after a spent attempt; both are leased again.
	if got := b.lease("q", 2, "w", b.now); len(got) != 2 {
		t.Fatalf("leased %d tasks, want s3 and s4", len(got))
	}
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: s3.ID, Attempt: 1, State: record.TaskReady, Refund: true, Now: b.now}))(t)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: s4.ID, Attempt: 1, State: record.TaskReady, Now: b.now}))(t)
	if got := b.lease("q", 2, "w", b.now); len(got) != 2 {
		t.Fatalf("leased %d tasks again, want s3 and s4", len(got))
	}
	// A second step with s1's action counts apart from s1.
	must(b.s.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "s1-again", Action: "act-s1", Queue: "idle", MaxAttempts: 1, SortKey: it.SortKey, Now: b.now}))(t)
	counts := must(b.s.TaskCounts(ctx, j.ID))(t)
	want := []record.TaskCount{
		{State: record.TaskComplete, Step: "s2", Action: "act-s2", Queue: "q", Tasks: 1},
		{State: record.TaskReady, Step: "s1-again", Action: "act-s1", Queue: "idle", Tasks: 1},
		{State: record.TaskRunning, Step: "s1", Action: "act-s1", Queue: "q", Tasks: 2, Retries: 1},
		{State: record.TaskRunning, Step: "s3", Action: "act-s3", Queue: "q", Tasks: 1},
	}
	if !slices.Equal(counts, want) {
		t.Errorf("TaskCounts = %+v, want %+v", counts, want)
	}
}

func testTaskCancelJob(t *testing.T, b *bundle) {
	ctx := t.Context()
	j, other := b.job(""), b.job("")
	running := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	done := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	b.lease("q", 2, "w", b.now)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: done.ID, Attempt: 1, State: record.TaskComplete, Now: b.now}))(t)
	ready := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	otherReady := b.task(b.s, b.root(other.ID, 0, "0"), "s")

	ids := must(b.s.TaskCancelJob(ctx, store.TaskCancelJobParams{JobID: j.ID, Reason: "canceled", Now: b.at(time.Second)}))(t)
	checkIDs(t, "TaskCancelJob running ids", ids, []int64{running.ID})
	got := b.getTask(ready.ID)
	if got.State != record.TaskCanceled || got.Error != "canceled" {
		t.Errorf("canceled task = %s %q", got.State, got.Error)
	}
	checkTime(t, "FinishedAt of canceled", got.FinishedAt, b.at(time.Second))
	for _, tc := range []struct {
		tk   *record.Task
		want record.TaskState
	}{{running, record.TaskRunning}, {done, record.TaskComplete}, {otherReady, record.TaskReady}} {
		if s := b.getTask(tc.tk.ID).State; s != tc.want {
			t.Errorf("task %d after cancel = %s, want %s", tc.tk.ID, s, tc.want)
		}
	}
	// Replaying the cancel changes nothing more.
	checkIDs(t, "second TaskCancelJob", must(b.s.TaskCancelJob(ctx, store.TaskCancelJobParams{JobID: j.ID, Reason: "again", Now: b.at(time.Hour)}))(t), []int64{running.ID})
	if got := b.getTask(ready.ID); got.Error != "canceled" {
		t.Errorf("replayed cancel rewrote the error: %q", got.Error)
	}
}

func testTaskNextRunAfter(t *testing.T, b *bundle) {
	ctx := t.Context()
	checkTime(t, "TaskNextRunAfter with no tasks", must(b.s.TaskNextRunAfter(ctx))(t), time.Time{})
	j := b.job("")
	t1 := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	t2 := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	b.lease("q", 2, "w", b.now)
	checkTime(t, "TaskNextRunAfter with only running tasks", must(b.s.TaskNextRunAfter(ctx))(t), time.Time{})
	for _, tc := range []struct {
		tk *record.Task
		d  time.Duration
	}{{t1, time.Hour}, {t2, time.Minute}} {
		must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: tc.tk.ID, Attempt: 1, State: record.TaskReady, RunAfter: b.at(tc.d), Now: b.now}))(t)
	}
	checkTime(t, "TaskNextRunAfter", must(b.s.TaskNextRunAfter(ctx))(t), b.at(time.Minute))
	b.task(b.s, b.root(j.ID, 2, "2"), "s") // ready at once: not a backoff to wait for
	checkTime(t, "TaskNextRunAfter beside a task due at once", must(b.s.TaskNextRunAfter(ctx))(t), b.at(time.Minute))
}

// testTaskReadyQueues checks the queues a worker would pick from: a ready task due by now
// counts; a running one, one of another queue and one in a backoff until later do not.
func testTaskReadyQueues(t *testing.T, b *bundle) {
	ctx := t.Context()
	queues := []string{"a", "b", "c", "d"}
	check := func(what string, now time.Time, want ...string) {
		t.Helper()
		got := must(b.s.TaskReadyQueues(ctx, queues, now))(t)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("TaskReadyQueues %s = %q, want %q", what, got, want)
		}
	}
	check("with no tasks", b.now)
	j := b.job("")
	b.taskIn(b.s, b.root(j.ID, 0, "0"), "s", "a")
	b.taskIn(b.s, b.root(j.ID, 1, "1"), "s", "b")
	later := b.taskIn(b.s, b.root(j.ID, 2, "2"), "s", "c")
	b.taskIn(b.s, b.root(j.ID, 3, "3"), "s", "other")
	check("with ready tasks", b.now, "a", "b", "c")
	b.lease("b", 1, "w", b.now)
	leased := b.lease("c", 1, "w", b.now)
	if len(leased) != 1 || leased[0].ID != later.ID {
		t.Fatalf("leased %v of c, want task %d", leased, later.ID)
	}
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: later.ID, Attempt: 1, State: record.TaskReady, RunAfter: b.at(time.Minute), Now: b.now}))(t)
	check("with b's task running and c's in a backoff", b.now, "a")
	check("once c's backoff ended", b.at(time.Minute), "a", "c")
}

func testAttempts(t *testing.T, b *bundle) {
	ctx := t.Context()
	tk := b.task(b.s, b.root(b.job("").ID, 0, "0"), "s")
	a2 := store.AttemptInsertParams{TaskID: tk.ID, Attempt: 2, Owner: "w2", StartedAt: b.at(time.Minute), FinishedAt: b.at(2 * time.Minute), Error: "boom", Stack: "goroutine 1"}
	a1 := store.AttemptInsertParams{TaskID: tk.ID, Attempt: 1, Owner: "w1", StartedAt: b.now, FinishedAt: b.at(time.Second), Error: "timeout"}
	mustOK(t, b.s.AttemptInsert(ctx, a2))
	mustOK(t, b.s.AttemptInsert(ctx, a1))
	replay := a1
	replay.Error, replay.Owner = "other", "w9"
	mustOK(t, b.s.AttemptInsert(ctx, replay))
	got := must(b.s.AttemptList(ctx, tk.ID))(t)
	if len(got) != 2 {
		t.Fatalf("AttemptList = %d attempts, want 2", len(got))
	}
	for i, want := range []record.Attempt{a1, a2} {
		g := got[i]
		if g.TaskID != want.TaskID || g.Attempt != want.Attempt || g.Owner != want.Owner || g.Error != want.Error || g.Stack != want.Stack {
			t.Errorf("attempt %d = %+v, want %+v", i, g, want)
		}
		checkTime(t, "StartedAt", g.StartedAt, want.StartedAt)
		checkTime(t, "FinishedAt", g.FinishedAt, want.FinishedAt)
	}
	if none := must(b.s.AttemptList(ctx, 1<<40))(t); len(none) != 0 {
		t.Errorf("AttemptList(missing) = %v", none)
	}
}

func testTaskRetry(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	retry := func(tk *record.Task, max int, now time.Time) bool {
		t.Helper()
		return must(b.s.TaskRetry(ctx, store.TaskRetryParams{ID: tk.ID, MaxAttempts: max, Now: now}))(t)
	}
	failed := b.task(b.s, b.root(j.ID, 0, "0"), "s")
	done := b.task(b.s, b.root(j.ID, 1, "1"), "s")
	running := b.task(b.s, b.root(j.ID, 2, "2"), "s")
	b.lease("q", 3, "w", b.now)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: failed.ID, Attempt: 1, State: record.TaskFailed, Error: "s failed 1 times: boom", Now: b.now}))(t)
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: done.ID, Attempt: 1, State: record.TaskComplete, Now: b.now}))(t)
	canceled := b.task(b.s, b.root(j.ID, 3, "3"), "s")
	other := b.task(b.s, b.root(j.ID, 4, "4"), "s")
	must(b.s.TaskCancelJob(ctx, store.TaskCancelJobParams{JobID: j.ID, Reason: "canceled", Now: b.now}))(t)
	b.task(b.s, b.root(j.ID, 5, "5"), "s") // ready again after the cancel

	later := b.at(time.Hour)
	if !retry(failed, 4, later) {
		t.Fatal("TaskRetry of a failed task = false")
	}
	got := b.getTask(failed.ID)
	if got.State != record.TaskReady || got.Error != "" || got.Attempt != 1 || got.MaxAttempts != 4 || got.LeaseOwner != "" {
		t.Errorf("retried task = %+v, want ready, no error, attempt 1 of 4", got)
	}
	checkTime(t, "RunAfter of a retried task", got.RunAfter, later)
	checkTime(t, "FinishedAt of a retried task", got.FinishedAt, time.Time{})
	if !retry(canceled, 3, later) || b.getTask(canceled.ID).State != record.TaskReady {
		t.Error("TaskRetry of a canceled task did not make it ready")
	}
	for _, tk := range []*record.Task{done, running, failed} {
		before := b.getTask(tk.ID)
		if retry(tk, 9, later) {
			t.Errorf("TaskRetry of a %s task = true", before.State)
		}
		if after := b.getTask(tk.ID); after.State != before.State || after.MaxAttempts != before.MaxAttempts {
			t.Errorf("refused TaskRetry changed task %d: %+v → %+v", tk.ID, before, after)
		}
	}
	if must(b.s.TaskRetry(ctx, store.TaskRetryParams{ID: 1 << 40, MaxAttempts: 3, Now: later}))(t) {
		t.Error("TaskRetry of a missing task = true")
	}
	if got := b.getTask(other.ID); got.State != record.TaskCanceled {
		t.Errorf("a task not retried is %s, want still canceled", got.State)
	}
	// The retried task is leased again at its next attempt number, once run_after has passed.
	if n := b.lease("q", 10, "w", later.Add(-time.Microsecond)); len(n) != 1 {
		t.Errorf("lease before run_after = %v, want only the task made ready after the cancel", taskIDs(n))
	}
	leased := b.lease("q", 10, "w", later)
	checkIDs(t, "leased after retry", taskIDs(leased), []int64{failed.ID, canceled.ID})
	for _, tk := range leased {
		if tk.ID == failed.ID && tk.Attempt != 2 {
			t.Errorf("retried task leased at attempt %d, want 2", tk.Attempt)
		}
	}

	// A complete task goes back to blocked (the collector of a retried item): never leased,
	// then ready again at its attempt, its bound kept when MaxAttempts is 0.
	block := func(tk *record.Task, max int) bool {
		t.Helper()
		return must(b.s.TaskRetry(ctx, store.TaskRetryParams{ID: tk.ID, MaxAttempts: max, Now: later, Blocked: true}))(t)
	}
	if block(running, 5) {
		t.Error("TaskRetry to blocked of a running task = true")
	}
	if !block(done, 5) {
		t.Fatal("TaskRetry to blocked of a complete task = false")
	}
	if got := b.getTask(done.ID); got.State != record.TaskBlocked || got.Attempt != 1 || got.MaxAttempts != 5 {
		t.Errorf("blocked task = %+v, want blocked, attempt 1 of 5", got)
	}
	if n := b.lease("q", 10, "w", later.Add(time.Hour)); len(n) != 0 {
		t.Errorf("leased %v with only a blocked task ready-less", taskIDs(n))
	}
	if !retry(done, 0, later) {
		t.Fatal("TaskRetry of a blocked task = false")
	}
	if got := b.getTask(done.ID); got.State != record.TaskReady || got.MaxAttempts != 5 {
		t.Errorf("unblocked task = %+v, want ready, attempt bound 5 kept", got)
	}
	if leased := b.lease("q", 10, "w", later); len(leased) != 1 || leased[0].ID != done.ID || leased[0].Attempt != 2 {
		t.Errorf("leased after the unblock: %+v, want task %d at attempt 2", leased, done.ID)
	}
}

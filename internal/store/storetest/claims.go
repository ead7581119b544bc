package storetest

import (
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// testItemListByMetadata: items of one job found by a metadata value, JSON types compared
// (the string "1" is not the number 1, true is not 1), other jobs left out.
func testItemListByMetadata(t *testing.T, b *bundle) {
	ctx := t.Context()
	j, other := b.job(""), b.job("other")
	var want []int64
	for i, md := range []string{`{"fs":"a"}`, `{"fs":"b"}`, `{"fs":"a","x":1}`, `{"n":1}`, `{"n":"1"}`, `{"n":true}`, `{}`} {
		it, _, err := b.s.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: i, SortKey: "k", Name: "i", Metadata: []byte(md), Now: b.now})
		mustOK(t, err)
		if i == 0 || i == 2 {
			want = append(want, it.ID)
		}
	}
	_, _, err := b.s.ItemInsert(ctx, store.ItemInsertParams{JobID: other.ID, SortKey: "k", Name: "o", Metadata: []byte(`{"fs":"a"}`), Now: b.now})
	mustOK(t, err)
	ids := func(key, value string) []int64 {
		t.Helper()
		return itemIDs(must(b.s.ItemListByMetadata(ctx, store.ItemMetadataParams{JobID: j.ID, Key: key, Value: []byte(value)}))(t))
	}
	if got := ids("fs", `"a"`); !equalIDs(got, want) {
		t.Errorf("fs=a: %v, want %v", got, want)
	}
	for _, tc := range []struct {
		value string
		n     int
	}{{`1`, 1}, {`"1"`, 1}, {`true`, 1}, {`2`, 0}} {
		if got := ids("n", tc.value); len(got) != tc.n {
			t.Errorf("n=%s: %d items, want %d", tc.value, len(got), tc.n)
		}
	}
	if _, err := b.s.ItemListByMetadata(ctx, store.ItemMetadataParams{JobID: j.ID, Key: "fs", Value: []byte(`{"a":1}`)}); err == nil {
		t.Error("an object value was accepted")
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// testClaims: the first task claims, a second parks (no lease) and is readied when the claim
// is done, then sees the result; a dropped claim readies the parked and is claimed anew; a
// claim whose holder was canceled is taken over.
func testClaims(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	a := b.taskIn(b.s, b.root(j.ID, 0, "0"), "s", "cq")
	c := b.taskIn(b.s, b.root(j.ID, 1, "1"), "s", "cq")
	leased := b.lease("cq", 2, "w", b.now)
	if len(leased) != 2 {
		t.Fatalf("leased %d", len(leased))
	}
	take := func(id int64) *store.Claim {
		t.Helper()
		return must(b.s.ClaimTake(ctx, store.ClaimTakeParams{Key: "k", TaskID: id, Now: b.now}))(t)
	}
	if cl := take(a.ID); cl.Holder != a.ID || cl.State != store.ClaimHeld {
		t.Fatalf("first take %+v", cl)
	}
	if cl := take(a.ID); cl.Holder != a.ID {
		t.Fatalf("the holder's second take %+v", cl)
	}
	if cl := take(c.ID); cl.Holder != a.ID || cl.State != store.ClaimHeld {
		t.Fatalf("second task's take %+v", cl)
	}
	if !must(b.s.ClaimPark(ctx, store.ClaimParkParams{Key: "k", TaskID: c.ID, Attempt: 1, Now: b.now}))(t) {
		t.Fatal("ClaimPark = false")
	}
	if got := b.getTask(c.ID); got.State != record.TaskParked || got.Attempt != 0 || got.LeaseOwner != "" {
		t.Fatalf("parked task %+v", got)
	}
	if got := b.lease("cq", 5, "w", b.at(time.Second)); len(got) != 0 {
		t.Fatalf("leased a parked task: %+v", got)
	}
	// Not done while it holds no claim: a task that reused a result finishes nothing.
	if qs := must(b.s.ClaimFinish(ctx, store.ClaimFinishParams{TaskID: c.ID, Result: []byte(`{}`), Now: b.now}))(t); len(qs) != 0 {
		t.Errorf("ClaimFinish of a non-holder readied %v", qs)
	}
	qs := must(b.s.ClaimFinish(ctx, store.ClaimFinishParams{TaskID: a.ID, Result: []byte(`{"v":1}`), Now: b.at(time.Second)}))(t)
	if len(qs) != 1 || qs[0] != "cq" {
		t.Fatalf("ClaimFinish readied queues %v", qs)
	}
	if got := b.getTask(c.ID); got.State != record.TaskReady {
		t.Fatalf("released task %+v", got)
	}
	got := b.lease("cq", 5, "w", b.at(2*time.Second))
	if len(got) != 1 || got[0].ID != c.ID || got[0].Attempt != 1 {
		t.Fatalf("lease after release %+v", got)
	}
	if cl := take(c.ID); cl.State != store.ClaimDone || string(cl.Result) != `{"v":1}` {
		t.Fatalf("take of a done claim %+v", cl)
	}

	// A dropped claim (its holder failed) readies the parked, and the next take claims it.
	d := b.taskIn(b.s, b.root(j.ID, 2, "2"), "s", "dq")
	e := b.taskIn(b.s, b.root(j.ID, 3, "3"), "s", "dq")
	b.lease("dq", 2, "w", b.now)
	take2 := func(id int64) *store.Claim {
		t.Helper()
		return must(b.s.ClaimTake(ctx, store.ClaimTakeParams{Key: "k2", TaskID: id, Now: b.now}))(t)
	}
	take2(d.ID)
	if cl := take2(e.ID); cl.Holder != d.ID {
		t.Fatalf("take %+v", cl)
	}
	must(b.s.ClaimPark(ctx, store.ClaimParkParams{Key: "k2", TaskID: e.ID, Attempt: 1, Now: b.now}))(t)
	if qs := must(b.s.ClaimFinish(ctx, store.ClaimFinishParams{TaskID: d.ID, Now: b.now}))(t); len(qs) != 1 {
		t.Fatalf("drop readied %v", qs)
	}
	b.lease("dq", 1, "w", b.at(time.Second))
	if cl := take2(e.ID); cl.Holder != e.ID || cl.State != store.ClaimHeld {
		t.Fatalf("take after a drop %+v", cl)
	}

	// A holder canceled with its job (ready, not running) loses its claim; its parked tasks
	// of another job are readied.
	j2, j3 := b.job("j2"), b.job("j3")
	f := b.taskIn(b.s, b.root(j2.ID, 0, "0"), "s", "fq")
	g := b.taskIn(b.s, b.root(j3.ID, 0, "0"), "s", "fq")
	b.lease("fq", 2, "w", b.now)
	must(b.s.ClaimTake(ctx, store.ClaimTakeParams{Key: "k3", TaskID: f.ID, Now: b.now}))(t)
	must(b.s.ClaimTake(ctx, store.ClaimTakeParams{Key: "k3", TaskID: g.ID, Now: b.now}))(t)
	must(b.s.ClaimPark(ctx, store.ClaimParkParams{Key: "k3", TaskID: g.ID, Attempt: 1, Now: b.now}))(t)
	// f goes back to ready (its lease lost), then its job is canceled.
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: f.ID, Attempt: 1, State: record.TaskReady, Now: b.now}))(t)
	must(b.s.TaskCancelJob(ctx, store.TaskCancelJobParams{JobID: j2.ID, Reason: "canceled", Now: b.now}))(t)
	if qs := must(b.s.ClaimReleaseJob(ctx, j2.ID, b.now))(t); len(qs) != 1 {
		t.Fatalf("ClaimReleaseJob readied %v", qs)
	}
	if got := b.getTask(g.ID); got.State != record.TaskReady {
		t.Fatalf("task parked on a canceled holder: %+v", got)
	}
	// A parked task is canceled with its job.
	h := b.taskIn(b.s, b.root(j3.ID, 1, "1"), "s", "hq")
	b.lease("hq", 1, "w", b.now)
	must(b.s.ClaimTake(ctx, store.ClaimTakeParams{Key: "k", TaskID: h.ID, Now: b.now}))(t)
	must(b.s.ClaimPark(ctx, store.ClaimParkParams{Key: "k4", TaskID: h.ID, Attempt: 1, Now: b.now}))(t)
	must(b.s.TaskCancelJob(ctx, store.TaskCancelJobParams{JobID: j3.ID, Reason: "canceled", Now: b.now}))(t)
	if got := b.getTask(h.ID); got.State != record.TaskCanceled {
		t.Errorf("parked task of a canceled job: %+v", got)
	}
}

// testLimits: concurrency counts running tasks only (a slot frees itself when its task ends),
// and a rate spaces starts.
func testLimits(t *testing.T, b *bundle) {
	ctx := t.Context()
	j := b.job("")
	var ts []*record.Task
	for i := range 3 {
		ts = append(ts, b.taskIn(b.s, b.root(j.ID, i, string(rune('a'+i))), "s", "lq"))
	}
	b.lease("lq", 3, "w", b.now)
	acq := func(tk *record.Task, attempt int, now time.Time, conc int, iv time.Duration) store.LimitAcquireResult {
		t.Helper()
		return must(b.s.LimitAcquire(ctx, store.LimitAcquireParams{Key: "h", TaskID: tk.ID, Attempt: attempt, Concurrency: conc, Interval: iv, Now: now}))(t)
	}
	if !acq(ts[0], 1, b.now, 2, 0).OK || !acq(ts[1], 1, b.now, 2, 0).OK {
		t.Fatal("first two slots refused")
	}
	if r := acq(ts[2], 1, b.now, 2, 0); r.OK || !r.Next.IsZero() {
		t.Fatalf("third slot %+v", r)
	}
	if !acq(ts[0], 1, b.now, 2, 0).OK {
		t.Error("a slot holder asking again was refused")
	}
	must(b.s.TaskFinish(ctx, store.TaskFinishParams{ID: ts[0].ID, Attempt: 1, State: record.TaskComplete, Now: b.now}))(t)
	if !acq(ts[2], 1, b.now, 2, 0).OK {
		t.Error("the slot of a finished task was not freed")
	}
	// Rate: 100 ms apart.
	r := must(b.s.LimitAcquire(ctx, store.LimitAcquireParams{Key: "r", TaskID: ts[1].ID, Attempt: 1, Interval: 100 * time.Millisecond, Now: b.now}))(t)
	if !r.OK {
		t.Fatal("first start refused")
	}
	r = must(b.s.LimitAcquire(ctx, store.LimitAcquireParams{Key: "r", TaskID: ts[2].ID, Attempt: 1, Interval: 100 * time.Millisecond, Now: b.at(50 * time.Millisecond)}))(t)
	if r.OK || !r.Next.Equal(b.at(100*time.Millisecond)) {
		t.Fatalf("second start at 50ms: %+v, want next at 100ms", r)
	}
	r = must(b.s.LimitAcquire(ctx, store.LimitAcquireParams{Key: "r", TaskID: ts[2].ID, Attempt: 1, Interval: 100 * time.Millisecond, Now: b.at(100 * time.Millisecond)}))(t)
	if !r.OK {
		t.Fatalf("second start at 100ms refused: %+v", r)
	}
}

package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// epoch is the suite's clock: microsecond precision so values round-trip exactly, and a fixed
// offset zone so drivers must convert to UTC.
var epoch = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.FixedZone("UTC+2", 2*3600))

// bundle is what each subtest starts from: a fresh store and the clock.
type bundle struct {
	t   *testing.T
	s   store.Store
	now time.Time
}

func setup(t *testing.T, open func(t *testing.T) store.Store) *bundle {
	t.Helper()
	return &bundle{t: t, s: open(t), now: epoch}
}

func (b *bundle) at(d time.Duration) time.Time { return b.now.Add(d) }

// must returns v, failing the test on err: must(s.JobGet(ctx, id))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) job(key string) *record.Job {
	b.t.Helper()
	return must(b.s.JobInsert(b.t.Context(), store.JobInsertParams{Key: key, WorkflowName: "wf", WorkflowVersion: 1, Now: b.now}))(b.t)
}

func (b *bundle) root(jobID int64, ordinal int, sortKey string) *record.Item {
	b.t.Helper()
	it, _, err := b.s.ItemInsert(b.t.Context(), store.ItemInsertParams{
		JobID: jobID, Ordinal: ordinal, SortKey: sortKey, Name: fmt.Sprintf("root-%d", ordinal),
		RangeLo: float64(ordinal) * 100, RangeLen: 100, Now: b.now,
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return it
}

func (b *bundle) child(parent *record.Item, step string, ordinal int) *record.Item {
	b.t.Helper()
	it, _, err := b.s.ItemInsert(b.t.Context(), store.ItemInsertParams{
		JobID: parent.JobID, ParentID: parent.ID, RootID: parent.RootID, Step: step, Ordinal: ordinal,
		Depth: parent.Depth + 1, SortKey: fmt.Sprintf("%s/%04d", parent.SortKey, ordinal),
		Name: fmt.Sprintf("%s/%d", parent.Name, ordinal), Now: b.now,
	})
	if err != nil {
		b.t.Fatal(err)
	}
	return it
}

// task inserts a ready task of step on the item in queue "q" and returns it.
func (b *bundle) task(x store.Executor, it *record.Item, step string) *record.Task {
	b.t.Helper()
	return b.taskIn(x, it, step, "q")
}

func (b *bundle) taskIn(x store.Executor, it *record.Item, step, queue string) *record.Task {
	b.t.Helper()
	ctx := b.t.Context()
	if _, err := x.TaskInsert(ctx, store.TaskInsertParams{
		JobID: it.JobID, ItemID: it.ID, Step: step, Action: "act-" + step, Queue: queue,
		MaxAttempts: 3, SortKey: it.SortKey, ProgressWeight: 0.5, Now: b.now,
	}); err != nil {
		b.t.Fatal(err)
	}
	for _, tk := range must(x.TaskListByItem(ctx, it.ID))(b.t) {
		if tk.Step == step {
			return tk
		}
	}
	b.t.Fatalf("task %q of item %d not found after insert", step, it.ID)
	return nil
}

func (b *bundle) lease(queue string, limit int, owner string, now time.Time) []*record.Task {
	b.t.Helper()
	return must(b.s.TaskLease(b.t.Context(), store.TaskLeaseParams{
		Queue: queue, Limit: limit, Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute),
	}))(b.t)
}

func (b *bundle) getTask(id int64) *record.Task {
	b.t.Helper()
	return must(b.s.TaskGet(b.t.Context(), id))(b.t)
}

// move moves one item from one state to another (ItemSetStateMany), reporting whether it moved.
func (b *bundle) move(id int64, from, to record.ItemState) bool {
	b.t.Helper()
	n := must(b.s.ItemSetStateMany(b.t.Context(), store.ItemSetStateManyParams{IDs: []int64{id}, From: from, To: to, Now: b.now}))(b.t)
	return n == 1
}

func (b *bundle) getItem(id int64) *record.Item {
	b.t.Helper()
	return must(b.s.ItemGet(b.t.Context(), id))(b.t)
}

func taskIDs(ts []*record.Task) []int64 {
	out := make([]int64, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func itemIDs(its []*record.Item) []int64 {
	out := make([]int64, 0, len(its))
	for _, it := range its {
		out = append(out, it.ID)
	}
	return out
}

func jobIDs(js []*record.Job) []int64 {
	out := make([]int64, 0, len(js))
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// equalJSON reports whether two JSON texts hold the same value, whatever their formatting or key
// order (Postgres' jsonb normalises both).
func equalJSON(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("stored JSON %q does not parse: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

func checkJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !equalJSON(t, got, want) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if want.IsZero() {
		if !got.IsZero() {
			t.Errorf("%s = %v, want zero", what, got)
		}
		return
	}
	want = want.UTC().Truncate(time.Microsecond)
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("%s = %v, want %v (UTC)", what, got, want)
	}
}

func checkBytes(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !bytes.Equal(got, []byte(want)) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func checkNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("%s: error = %v, want store.ErrNotFound", what, err)
	}
}

func checkIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

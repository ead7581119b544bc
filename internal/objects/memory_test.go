package objects_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// heapPeak samples the live heap (after a collection) and keeps the most it was over a base.
// It is safe for concurrent use.
type heapPeak struct {
	mu         sync.Mutex
	base, peak uint64
}

// reset takes what is live now as the base.
func (h *heapPeak) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.base, h.peak = ms.HeapAlloc, 0
}

func (h *heapPeak) sample() {
	h.mu.Lock()
	defer h.mu.Unlock()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > h.base {
		h.peak = max(h.peak, ms.HeapAlloc-h.base)
	}
}

func (h *heapPeak) get() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

// sampledAction is an action whose output samples the heap after each of its domain writes.
type sampledAction struct {
	action.Action
	heap *heapPeak
}

func (a sampledAction) Policy() action.Policy {
	if p, ok := a.Action.(interface{ Policy() action.Policy }); ok {
		return p.Policy()
	}
	return action.Policy{}
}

func (a sampledAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	return a.Action.Run(ctx, t, sampledOutput{out, a.heap})
}

type sampledOutput struct {
	action.Output
	heap *heapPeak
}

func (o sampledOutput) Write(w action.DomainWrite) error {
	err := o.Output.Write(w)
	o.heap.sample()
	return err
}

// sampledDomain is the objects domain sampling the heap as each batch of writes is applied.
type sampledDomain struct {
	objects.Domain
	heap *heapPeak
}

func (d sampledDomain) Apply(ctx context.Context, x store.DomainSQL, ws []engine.DomainWrite) error {
	d.heap.sample()
	return d.Domain.Apply(ctx, x, ws)
}

// TestValidationMemoryJob validates 10,000- and 50,000-row sheets as their jobs do — the
// validate-sheet action in a worker, its rows' writes kept by the engine until they commit with
// the task's result, in its transaction — and samples the live heap after each of the action's
// writes and as each batch of them is applied: the peak over what was live before is flat, at
// 50,000 rows under 1.5 times that at 10,000 (the writes held in memory would make it about five
// times). Every row is in the sheet's table after, with its errors.
func TestValidationMemoryJob(t *testing.T) {
	heap := &heapPeak{}
	svc := &objects.Service{}
	var actions []action.Action
	for _, a := range append(svc.Actions(), basic.NewPass()) {
		if a.Spec().Name == "objects.validate-sheet" {
			a = sampledAction{a, heap}
		}
		actions = append(actions, a)
	}
	kit := enginetest.StartWith(t, drivertest.OpenSQLite, enginetest.Config{Domains: map[string]engine.Domain{
		objects.Name: sampledDomain{objects.Domain{}, heap}}}, actions...)
	if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
		t.Fatal(err)
	}
	dir := stubFiles(t)
	db := objects.NewStore(kit.Store.DomainSQL())
	peaks := map[int]uint64{}
	for _, n := range []int{10_000, 50_000} {
		heap.reset()
		id, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "generated.csv",
			CSV: &generatedSheet{n: n}, FilesDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s := waitSheet(t, kit, id, objects.StatusRowFail, objects.StatusValid, objects.StatusFileFail)
		peaks[n] = heap.get()
		if s.Status != objects.StatusRowFail || s.RowCount != n {
			t.Fatalf("%d rows: sheet %s with %d rows, want %s", n, s.Status, s.RowCount, objects.StatusRowFail)
		}
		checkStoredRows(t, db, id, n)
		t.Logf("%d rows: peak live heap %d KiB over the start", n, peaks[n]>>10)
	}
	if r := float64(peaks[50_000]) / float64(peaks[10_000]); r > 1.5 {
		t.Errorf("peak heap %d KiB at 50,000 rows, %.2f times the %d KiB at 10,000: want flat (under 1.5 times)",
			peaks[50_000]>>10, r, peaks[10_000]>>10)
	}
}

// checkStoredRows checks that sheet id has its n rows stored in order, and that the rows that
// fail are those the generated sheet makes fail: every seventh names a missing file, and two
// rows in each thousand share an accession.
func checkStoredRows(t *testing.T, db *objects.Store, id int64, n int) {
	t.Helper()
	rows, err := db.ListRows(t.Context(), id, false)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i, r := range rows {
		if r.Row != i+1 {
			t.Fatalf("%d rows: the %dth stored row is row %d", n, i+1, r.Row)
		}
		if r.State == objects.CheckFail {
			failed++
		}
	}
	want := 0
	for i := range n {
		if i%7 == 3 || i%1000 >= 998 {
			want++
		}
	}
	if len(rows) != n || failed != want {
		t.Fatalf("%d rows: %d stored, %d failed, want %d failed", n, len(rows), failed, want)
	}
}

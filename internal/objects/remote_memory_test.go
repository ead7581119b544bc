package objects_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/workerproto/remotetest"
)

// countedOutput samples the heap after each write, and counts the writes and their bytes.
type countedOutput struct {
	action.Output
	heap          *heapPeak
	writes, bytes *atomic.Int64
}

func (o countedOutput) Write(w action.DomainWrite) error {
	b, err := json.Marshal(w.Payload)
	if err != nil {
		return err
	}
	o.writes.Add(1)
	o.bytes.Add(int64(len(b)))
	err = o.Output.Write(w)
	o.heap.sample()
	return err
}

// sampledRemoteAction is an action whose output is a countedOutput, and which samples the heap
// when it returns too.
type sampledRemoteAction struct {
	action.Action
	heap          *heapPeak
	writes, bytes *atomic.Int64
}

func (a sampledRemoteAction) Policy() action.Policy {
	if p, ok := a.Action.(interface{ Policy() action.Policy }); ok {
		return p.Policy()
	}
	return action.Policy{}
}

func (a sampledRemoteAction) Run(ctx context.Context, t *action.Task, out action.Output) error {
	err := a.Action.Run(ctx, t, countedOutput{out, a.heap, a.writes, a.bytes})
	a.heap.sample()
	return err
}

// TestRemoteValidationMemory validates 10,000- and 100,000-row sheets with validate-sheet run by
// a remote worker (the worker protocol, in this process, so that the heap sampled is both
// sides'): the worker sends its rows' writes as it makes them (N.write.json), the server keeps
// them for the task's result (past a megabyte in a temp file), and the result commits them.
// The live heap is sampled after each write, when the action returns and as each batch of
// writes is applied: the peak over what was live before is flat, at 100,000 rows under 1.5
// times that at 10,000 and under half the bytes written (the writes held until one result.json
// carries them made it grow with them: 9 MiB at 10,000 rows, 63 MiB at 100,000). Every row is in the sheet's table after, with its errors.
func TestRemoteValidationMemory(t *testing.T) {
	heap := &heapPeak{}
	var writes, bytes atomic.Int64
	svc := &objects.Service{}
	kit := enginetest.StartWith(t, drivertest.OpenSQLite, enginetest.Config{
		Domains: map[string]engine.Domain{objects.Name: sampledDomain{objects.Domain{}, heap}},
		Engine:  remotetest.Route("objects.validate-sheet")}, append(svc.Actions(), basic.NewPass())...)
	if err := builtin.Apply(t.Context(), kit.Engine, objects.Name); err != nil {
		t.Fatal(err)
	}
	var remote []action.Action
	for _, a := range (&objects.Service{}).Actions() {
		if a.Spec().Name == "objects.validate-sheet" {
			a = sampledRemoteAction{a, heap, &writes, &bytes}
		}
		remote = append(remote, a)
	}
	r := remotetest.Serve(t, kit, remote, 1, "objects.validate-sheet")
	dir := stubFiles(t)
	db := objects.NewStore(kit.Store.DomainSQL())
	peaks := map[int]uint64{}
	written := map[int]int64{}
	for _, n := range []int{10_000, 100_000} {
		heap.reset()
		writes.Store(0)
		bytes.Store(0)
		id, err := objects.Upload(t.Context(), kit.Engine, kit.Blobs, objects.UploadParams{Name: "generated.csv",
			CSV: &generatedSheet{n: n}, FilesDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s := waitSheet(t, kit, id, objects.StatusRowFail, objects.StatusValid, objects.StatusFileFail)
		peaks[n], written[n] = heap.get(), bytes.Load()
		if s.Status != objects.StatusRowFail || s.RowCount != n {
			t.Fatalf("%d rows: sheet %s with %d rows (%v), want %s", n, s.Status, s.RowCount, s.Errors, objects.StatusRowFail)
		}
		checkStoredRows(t, db, id, n)
		t.Logf("%d rows, %d writes of %d KiB: peak live heap %d KiB over the start", n, writes.Load(), bytes.Load()>>10, peaks[n]>>10)
	}
	if r.Ran("objects.validate-sheet") < 2 {
		t.Fatalf("validate-sheet ran %d times remotely, want 2", r.Ran("objects.validate-sheet"))
	}
	if q := float64(peaks[100_000]) / float64(peaks[10_000]); q > 1.5 {
		t.Errorf("peak heap %d KiB at 100,000 rows, %.2f times the %d KiB at 10,000: want flat (under 1.5 times)",
			peaks[100_000]>>10, q, peaks[10_000]>>10)
	}
	if peaks[100_000] > uint64(written[100_000])/2 {
		t.Errorf("peak heap %d KiB at 100,000 rows, over half the %d KiB written: the writes are held", peaks[100_000]>>10, written[100_000]>>10)
	}
}

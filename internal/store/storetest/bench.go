package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// BenchmarkLeaseFinish measures the worker's hot path against a store made by open: with n ready
// tasks inserted (untimed), each iteration leases up to 256 of them and finishes them all as
// complete in one transaction; the queue is refilled, untimed, when it runs dry. It reports
// tasks/s next to ns/op (one op is one batch of 256).
func BenchmarkLeaseFinish(b *testing.B, open func(tb testing.TB) store.Store, n int) {
	const batch = 256
	s := open(b)
	ctx := b.Context()
	now := time.Now().UTC()
	j, err := s.JobInsert(ctx, store.JobInsertParams{WorkflowName: "bench", WorkflowVersion: 1, Now: now})
	if err != nil {
		b.Fatal(err)
	}
	next := 0 // ordinal of the next root
	fill := func() {
		b.Helper()
		err := s.InTx(ctx, func(x store.Executor) error {
			for range n {
				it, _, err := x.ItemInsert(ctx, store.ItemInsertParams{JobID: j.ID, Ordinal: next, SortKey: fmt.Sprintf("%09d", next), Name: "x", Now: now})
				if err != nil {
					return err
				}
				next++
				if _, err := x.TaskInsert(ctx, store.TaskInsertParams{JobID: j.ID, ItemID: it.ID, Step: "s", Action: "a", Queue: "q", MaxAttempts: 3, SortKey: it.SortKey, Now: now}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	fill()
	b.ReportAllocs()
	leased := 0
	start := time.Now()
	var paused time.Duration
	for b.Loop() {
		tasks, err := s.TaskLease(ctx, store.TaskLeaseParams{Queue: "q", Limit: batch, Owner: "bench", Now: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			b.Fatal(err)
		}
		if len(tasks) == 0 {
			b.StopTimer()
			p := time.Now()
			fill()
			paused += time.Since(p)
			b.StartTimer()
			continue
		}
		err = s.InTx(ctx, func(x store.Executor) error {
			for _, t := range tasks {
				ok, err := x.TaskFinish(ctx, store.TaskFinishParams{ID: t.ID, Attempt: t.Attempt, State: record.TaskComplete, Now: now})
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("task %d: lease lost", t.ID)
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		leased += len(tasks)
	}
	if el := time.Since(start) - paused; el > 0 {
		b.ReportMetric(float64(leased)/el.Seconds(), "tasks/s")
	}
}

package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/worker"
)

// TestCacheableSlotFreeBeforeCommit: a cacheable conversion's slot is free once its action has
// returned, before its result commits — the slot is the converter's, the wait for the commit is
// not. It used to be held through the commit: with the committer held here, the slot stayed
// taken; in an ingest of small text files, 32 slots spent most of their time waiting for
// commits (10,000 files: 7.5 s, 5.5–6.3 s now). The conversion's flight lands after the commit
// all the same: the job completes once the committer goes on.
func TestCacheableSlotFreeBeforeCommit(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		started, release := make(chan struct{}), make(chan struct{})
		conv := enginetest.Func("conv", func(ctx context.Context, tk *action.Task, out action.Output) error {
			close(started)
			<-release
			return nil
		}).WithSpec(func(s *action.Spec) { s.Concurrency = 1 }).WithPolicy(action.Policy{Cacheable: true})
		k := enginetest.Start(t, open, conv)
		sha, size, err := k.Blobs.Put(t.Context(), strings.NewReader("a document"))
		if err != nil {
			t.Fatal(err)
		}
		job := k.StartJob(t, "name: conv\nsteps:\n  conv: {action: conv, needs: [start]}\n",
			engine.Root{Name: "a.txt", BlobSHA256: sha, Size: size})
		<-started
		tasks, err := k.Store.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("tasks %v, %v; want the one conv task", tasks, err)
		}
		queue := tasks[0].Queue
		if n := worker.InFlightIn(k.Worker, queue); n != 1 {
			t.Fatalf("%d slots of %s taken while its action runs, want 1", n, queue)
		}
		// Hold the committer: nothing commits until gate closes.
		held, gate := make(chan struct{}), make(chan struct{})
		var opened sync.Once
		letGo := func() { opened.Do(func() { close(gate) }) }
		t.Cleanup(letGo) // before the kit's: the worker stops only once the committer goes on
		doErr := make(chan error, 1)
		go func() {
			doErr <- k.Worker.Do(context.Background(), func(*engine.Tx) error {
				close(held)
				<-gate
				return nil
			})
		}()
		<-held
		close(release)
		poll.Until(t, 10*time.Second, "the slot free while the result waits for its commit", func() (bool, string) {
			n := worker.InFlightIn(k.Worker, queue)
			return n == 0, fmt.Sprintf("%d slots taken", n)
		})
		if tk, err := k.Store.TaskGet(t.Context(), tasks[0].ID); err != nil || tk.State != record.TaskRunning {
			t.Fatalf("task %+v, %v: want it still running, its result not committed", tk, err)
		}
		letGo()
		if err := <-doErr; err != nil {
			t.Fatal(err)
		}
		if j := k.WaitJob(t, job.ID, 30*time.Second); j.State != record.JobComplete {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
	})
}

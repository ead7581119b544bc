package workerproto_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/sqlite"
)

// jobReads counts the reads of a job outside a transaction (store.Store.JobGet): what the
// server reads of a task's job.
type jobReads struct {
	store.Store
	n atomic.Int64
}

func (s *jobReads) JobGet(ctx context.Context, id int64) (*record.Job, error) {
	s.n.Add(1)
	return s.Store.JobGet(ctx, id)
}

// TestJobFactsReadOnce: what never changes of a job (its workflow, its creation time) is read
// once for all its remote tasks; per task the server reads the job only for its state, when the
// worker asks for the task and when it posts the result (session.checkCanceled). Before, the
// task's step and its trace read the job again for each task: 31 reads for 10 tasks here, 13 now.
func TestJobFactsReadOnce(t *testing.T) {
	t.Parallel()
	reads := &jobReads{}
	b := setup(t, opts{open: func(tb testing.TB) store.Store {
		db, err := sqlite.Open(tb.Context(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "sluice.db")})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		reads.Store = db
		return reads
	}})
	const n = 10
	contents := make([]string, n)
	for i := range contents {
		contents[i] = fmt.Sprintf("pdf %d", i)
	}
	job := b.job(t, contents...)
	// The route step runs in process; its tasks (and whatever they read) are done before the
	// count starts.
	waitFor(t, 10*time.Second, "the remote tasks ready", func() bool {
		tasks, err := b.db.TaskListByJob(t.Context(), store.TaskListParams{JobID: job.ID, State: record.TaskReady})
		return err == nil && len(tasks) == n
	})
	before := reads.n.Load()
	for range n {
		th := b.poll(t)
		if err := th.Post(t.Context(), "done", nil); err != nil {
			t.Fatal(err)
		}
	}
	got := reads.n.Load() - before
	if j := enginetest.WaitJob(t, b.e, job.ID, 10*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s", j.State)
	}
	// One read for the facts, and at most the state's checks: one per request that asks.
	if max := int64(1 + 2*n); got > max {
		t.Errorf("%d reads of the job for %d remote tasks, want at most %d", got, n, max)
	}
	t.Logf("%d reads of the job for %d remote tasks", got, n)
}

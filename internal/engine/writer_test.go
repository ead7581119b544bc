package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/record"
)

// countingWriter is a writer that counts what it commits through another.
type countingWriter struct {
	w engine.Writer
	n atomic.Int32
}

func (c *countingWriter) Do(ctx context.Context, fn func(t *engine.Tx) error) error {
	c.n.Add(1)
	return c.w.Do(ctx, fn)
}

// TestRetryWriter checks, on both drivers, that Engine.Retry commits through the attached
// writer while one is attached, and in a transaction of its own once the worker stopped: a
// stopped worker detaches itself, so a retry after it succeeds instead of failing with the
// worker's ErrStopped.
func TestRetryWriter(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver, "r/1", nil)
			j := b.start(t, retryWorkflow("fail"))
			if j.State != record.JobFailed {
				t.Fatalf("job %s (%q) after b failed, want failed", j.State, j.Error)
			}

			cw := &countingWriter{w: b.w}
			b.e.AttachWriter(cw)
			if _, err := b.e.Retry(t.Context(), j.ID); err != nil {
				t.Fatal(err)
			}
			if n := cw.n.Load(); n != 1 {
				t.Fatalf("the attached writer committed %d times, want the retry's 1", n)
			}
			if j = enginetest.WaitJob(t, b.e, j.ID, time.Minute); j.State != record.JobFailed {
				t.Fatalf("retried job %s, want failed again (b still fails)", j.State)
			}
			b.e.AttachWriter(b.w) // as the worker attached itself when it started

			sctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			b.w.Stop(sctx)
			got, err := b.e.Retry(t.Context(), j.ID)
			if err != nil {
				t.Fatalf("retry after the worker stopped: %v", err)
			}
			if got.State != record.JobRunning {
				t.Errorf("job %s after the retry, want running", got.State)
			}
			if n := cw.n.Load(); n != 1 {
				t.Errorf("a detached writer committed: %d times, want 1", n)
			}
		})
	}
}

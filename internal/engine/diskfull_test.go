package engine_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// TestFullDiskIsNotAnAttempt: a result whose commit failed for a full database disk
// (store.ErrFull), or an attempt that failed writing a file to a full disk (ENOSPC), gives its
// attempt back and waits FullBackoff, however many times it happens: a full disk says nothing
// about the input, and used to spend a one-attempt step into an item error at once (the commit
// failure was taken as permanent). So does an attempt that failed because the blob store did
// not answer (blob.ErrUnavailable, an S3 outage), waiting UnavailableBackoff. An ordinary
// commit failure still fails the task.
func TestFullDiskIsNotAnAttempt(t *testing.T) { onBothDrivers(t, fullDiskIsNotAnAttempt) }

func fullDiskIsNotAnAttempt(t *testing.T, driver string) {
	ctx := t.Context()
	db := openStore(t, driver)
	e, job := oneRootJob(t, db, &fn{spec: action.Spec{Name: "b"}}, "one", "name: one\nsteps:\n  b: {action: b, needs: [start], attempts: 1}\n", false)
	lease := func() *record.Task {
		t.Helper()
		// An hour on: past the backoff of the attempt before.
		got := leaseB(t, db, 1, e.Now().Add(time.Hour))
		if len(got) != 1 {
			t.Fatalf("leased %d tasks, want the root's", len(got))
		}
		return got[0]
	}
	dbFull := func(tk *record.Task, at time.Time) *engine.Result {
		return engine.FailedCommit(&engine.Result{Task: tk, Owner: "dead", Started: at}, fmt.Errorf("commit: %w: database or disk is full (13)", store.ErrFull))
	}
	fileFull := func(tk *record.Task, at time.Time) *engine.Result {
		return &engine.Result{Task: tk, Owner: "dead", Started: at, Err: fmt.Errorf("write blob: %w", &os.PathError{Op: "write", Path: "/data/blobs/x", Err: syscall.ENOSPC})}
	}
	blobDown := func(tk *record.Task, at time.Time) *engine.Result {
		return &engine.Result{Task: tk, Owner: "dead", Started: at, Err: fmt.Errorf("set output: put blob: %w: dial tcp 127.0.0.1:9: connect: connection refused", blob.ErrUnavailable)}
	}
	for i, full := range []func(*record.Task, time.Time) *engine.Result{dbFull, fileFull, blobDown, dbFull, blobDown} {
		tk := lease()
		before := e.Now()
		res := full(tk, before)
		backoff := engine.FullBackoff
		if errors.Is(res.Err, blob.ErrUnavailable) {
			backoff = engine.UnavailableBackoff
		}
		if err := e.Apply(ctx, []*engine.Result{res}); err != nil {
			t.Fatal(err)
		}
		cause := res.Err
		got, err := db.TaskGet(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != record.TaskReady || got.Attempt != tk.Attempt-1 {
			t.Fatalf("after full disk %d (%v): task %s at attempt %d, want ready with attempt %d given back", i, cause, got.State, got.Attempt, tk.Attempt-1)
		}
		if wait := got.RunAfter.Sub(before); wait < backoff-time.Second || wait > backoff+time.Minute {
			t.Errorf("after full disk %d: runs again in %v, want about %v", i, wait, backoff)
		}
	}
	tk := lease()
	if err := e.Apply(ctx, []*engine.Result{engine.FailedCommit(&engine.Result{Task: tk, Owner: "dead", Started: e.Now()}, fmt.Errorf("metadata is not JSON"))}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.TaskGet(ctx, tk.ID); err != nil || got.State != record.TaskFailed || !strings.Contains(got.Error, "metadata is not JSON") {
		t.Fatalf("after an ordinary commit failure: %+v, %v; want failed naming it", got, err)
	}
	if j, err := db.JobGet(ctx, job.ID); err != nil || j.State != record.JobComplete {
		t.Errorf("job = %+v, %v; want complete once its one task failed", j, err)
	}
}

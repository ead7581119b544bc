package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-project/sluice"
	"github.com/sluice-project/sluice/action"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store/drivertest"
)

// TestMain fails the package's tests if a goroutine outlives them: Close must stop everything
// Open started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestEngineOnEachDriver runs a workflow with an action of the test's own on an engine opened on
// SQLite and on PostgreSQL, then opens the installation again and finds the job as it ended.
func TestEngineOnEachDriver(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			cfg := sluice.Config{DataDir: t.TempDir(), Actions: []action.Action{wordCount{}}}
			if driver == "postgres" {
				cfg.DatabaseURL = drivertest.DatabaseURL(t)
				cfg.Schema = drivertest.Schema(t)
				t.Cleanup(func() { drivertest.DropSchema(t, cfg.DatabaseURL, cfg.Schema) })
			}
			ctx := t.Context()
			e, err := sluice.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			wf, warnings, err := e.ApplyWorkflow(ctx, []byte("name: words\nsteps:\n  count: {action: wordcount, needs: [start]}\n"))
			if err != nil || wf.Name != "words" || wf.Version != 1 {
				t.Fatalf("apply: %+v %v %v", wf, warnings, err)
			}
			job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "words", Key: "once",
				Files: []sluice.File{{Name: "a.txt", Content: strings.NewReader("one two three")}}})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if job, err = e.Wait(wctx, job.ID); err != nil || job.State != sluice.JobComplete || job.FinishedAt.IsZero() {
				t.Fatalf("wait: %+v %v", job, err)
			}
			again, err := e.StartJob(ctx, sluice.JobParams{Workflow: "words", Key: "once"})
			if err != nil || again.ID != job.ID {
				t.Errorf("a second StartJob with the same key = %+v, %v; want job %d", again, err, job.ID)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}

			e, err = sluice.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			outs, err := e.Outputs(ctx, job.ID, "words")
			if err != nil || len(outs) != 1 || string(outs[0].Value) != `{"words": 3}` {
				t.Fatalf("outputs after reopening: %+v %v", outs, err)
			}
			if _, err := e.Job(ctx, job.ID+1); !errors.Is(err, sluice.ErrNotFound) {
				t.Errorf("a job that does not exist: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestOpenRefusesTakenActionName checks that an action named like a built-in one is refused.
func TestOpenRefusesTakenActionName(t *testing.T) {
	_, err := sluice.Open(t.Context(), sluice.Config{DataDir: t.TempDir(), Actions: []action.Action{taken{}}})
	if err == nil || !strings.Contains(err.Error(), `"noop"`) {
		t.Fatalf("Open with an action named noop: %v", err)
	}
}

type taken struct{ wordCount }

func (taken) Spec() action.Spec { return action.Spec{Name: "noop"} }

// TestBuiltins checks that Config.Builtins stores the named built-in workflows, a job of which
// can start at once, and that an unknown name is refused.
func TestBuiltins(t *testing.T) {
	ctx := t.Context()
	e, err := sluice.Open(ctx, sluice.Config{DataDir: t.TempDir(), Builtins: []string{"documents"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	job, err := e.StartJob(ctx, sluice.JobParams{Workflow: "documents"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if job, err = e.Wait(wctx, job.ID); err != nil || job.State != sluice.JobComplete || job.Workflow != "documents" {
		t.Fatalf("an empty documents job: %+v %v", job, err)
	}
	if _, err := sluice.Open(ctx, sluice.Config{DataDir: t.TempDir(), Builtins: []string{"no-such"}}); err == nil || !strings.Contains(err.Error(), `"no-such"`) {
		t.Errorf("Open with an unknown built-in workflow: %v", err)
	}
}

// TestJobStates checks that the public job states are the store's.
func TestJobStates(t *testing.T) {
	for pub, st := range map[string]record.JobState{sluice.JobRunning: record.JobRunning, sluice.JobComplete: record.JobComplete,
		sluice.JobFailed: record.JobFailed, sluice.JobCanceled: record.JobCanceled} {
		if pub != string(st) {
			t.Errorf("public state %q, store state %q", pub, st)
		}
	}
}

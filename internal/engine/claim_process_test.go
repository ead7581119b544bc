package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// fileResolver is the resolve action of TestClaimInTwoProcesses: its runs are appended to
// dir/runs.log as "PROCESS KEY" lines (O_APPEND: whole lines from both processes), and it waits
// for dir/gate to exist, so both processes' claimers are held while the others park.
func fileResolver(dir, process string) action.Action {
	return enginetest.Func("resolve", func(ctx context.Context, t *action.Task, out action.Output) error {
		pkg, _ := t.Item.Metadata["package"].(string)
		f, err := os.OpenFile(filepath.Join(dir, "runs.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "%s %s\n", process, pkg)
		f.Close()
		for {
			if _, err := os.Stat(filepath.Join(dir, "gate")); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Millisecond):
			}
		}
		out.SetMetadata(map[string]any{"resolved_by": t.Item.Name})
		out.Emit("resolved")
		return out.SetOutput(ctx, "resolution", json.RawMessage(fmt.Sprintf(`{"package":%q}`, pkg)))
	}).WithSpec(func(s *action.Spec) { s.Outcomes = []string{"resolved"}; s.Concurrency = 64 })
}

// claimProcess is the second process of TestClaimInTwoProcesses: a node on the same PostgreSQL
// schema with the same actions, running until its standard input closes.
func claimProcess() int {
	dir := os.Getenv("SLUICE_CLAIM_DIR")
	ctx := context.Background()
	n, err := node.Open(ctx, node.Config{DataDir: filepath.Join(dir, "node-b"), Engine: true, GCInterval: -1,
		OpenStore: func(ctx context.Context) (store.Store, error) {
			return postgres.Open(ctx, postgres.Config{URL: os.Getenv("SLUICE_CLAIM_URL"), Schema: os.Getenv("SLUICE_CLAIM_SCHEMA")})
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n.Catalog.Register(fileResolver(dir, "B"), note())
	n.Start(ctx)
	os.WriteFile(filepath.Join(dir, "b-started"), nil, 0o644)
	io.Copy(io.Discard, os.Stdin) // until the test closes the pipe: time to stop
	n.Stop(5 * time.Second)
	n.Close()
	return 0
}

// TestClaimInTwoProcesses: keyed claims across two operating-system processes on one PostgreSQL
// schema — 100 tasks over 10 keys, both processes leasing them, each key's work done once in all,
// and the parked tasks released promptly after their claimer's commit (logged).
func TestClaimInTwoProcesses(t *testing.T) {
	t.Parallel()
	url := drivertest.DatabaseURL(t)
	schema := drivertest.Schema(t)
	t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
	open := func(tb testing.TB) store.Store {
		db, err := postgres.Open(tb.Context(), postgres.Config{URL: url, Schema: schema})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		return db
	}
	dir := t.TempDir()
	a := enginetest.StartWith(t, open, enginetest.Config{}, fileResolver(dir, "A"), note())
	a.ApplyWorkflow(t, claimWorkflow)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b := exec.Command(self, "-test.run=^$")
	b.Env = append(os.Environ(), "SLUICE_CLAIM_PROCESS=1", "SLUICE_CLAIM_DIR="+dir, "SLUICE_CLAIM_URL="+url, "SLUICE_CLAIM_SCHEMA="+schema)
	var bout strings.Builder
	b.Stdout, b.Stderr = &bout, &bout
	stop, err := b.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Wait() }()
	t.Cleanup(func() {
		stop.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			b.Process.Kill()
		}
	})
	poll.Until(t, 60*time.Second, "the second process to start", func() (bool, string) {
		_, err := os.Stat(filepath.Join(dir, "b-started"))
		return err == nil, bout.String()
	})
	job := a.StartJob(t, claimWorkflow, packageRoots(100, 10)...)
	poll.Until(t, 60*time.Second, "90 tasks parked", func() (bool, string) {
		c := countStates(t, a.Store, job.ID, "resolve")
		return c[record.TaskParked] == 90, fmt.Sprint(c)
	})
	if err := os.WriteFile(filepath.Join(dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if j := a.WaitJob(t, job.ID, 60*time.Second); j.State != record.JobComplete {
		t.Fatalf("job %s (%s)\n%s", j.State, j.Error, bout.String())
	}
	log, err := os.ReadFile(filepath.Join(dir, "runs.log"))
	if err != nil {
		t.Fatal(err)
	}
	perKey, perProcess := map[string]int{}, map[string]int{}
	for _, line := range strings.Fields(strings.ReplaceAll(string(log), " ", "=")) {
		p, k, _ := strings.Cut(line, "=")
		perKey[k]++
		perProcess[p]++
	}
	for i := range 10 {
		if n := perKey[fmt.Sprintf("pkg-%d", i)]; n != 1 {
			t.Errorf("key pkg-%d resolved %d times in all, want once", i, n)
		}
	}
	// Which process wins which claim is the scheduler's affair (one may win them all); the
	// claims raced either way, both processes leasing from the same ready tasks.
	checkClaimResults(t, a.Store, job.ID, 100, 10)
	first, _ := releaseLatency(t, a.Store, job.ID)
	t.Logf("two processes, claims per process %v; claim commit → first parked task leased: median %v, max %v over 10 keys", perProcess, median(first), slices.Max(first))
}

package enginetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/sqlite"
)

// RunChild runs this test binary again as a child process, with env ("NAME=VALUE") added to its
// environment so that its TestMain runs the child's part instead of the tests, in a process
// group of its own. The child prints a line as each action starts and "done" once its job
// ended. With killAfter > 0, RunChild SIGKILLs the child's group when that many actions have
// started and reports false; otherwise it waits for the child to exit and reports whether it
// printed "done". It fails t when the child fails or runs longer than limit.
func RunChild(t testing.TB, env string, killAfter int, limit time.Duration) (finished bool) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	ran := 0
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v", err)
				}
				return finished
			}
			if line == "done" {
				finished = true
				continue
			}
			ran++
			if killAfter > 0 && ran == killAfter {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				for range lines {
				}
				_ = cmd.Wait()
				return false
			}
		case <-deadline.C:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			for range lines {
			}
			_ = cmd.Wait()
			t.Fatalf("child ran %d actions in %s without ending", ran, limit)
		}
	}
}

// ChildStore makes the store a kill test's child process opens: a SQLite file in a temporary
// directory in the "sqlite" subtest of [ForEachDriver], a PostgreSQL schema of its own (dropped
// when t ends) in the "postgres" one. It returns where the store is, to hand to the child
// ([OpenChildStore]), and a function that opens it in the test once the child is done (closed
// when t ends).
func ChildStore(t *testing.T) (where string, reopen func() store.Store) {
	t.Helper()
	if strings.HasSuffix(t.Name(), "/sqlite") {
		where = "sqlite " + filepath.Join(t.TempDir(), "sluice.db")
	} else {
		url, schema := drivertest.DatabaseURL(t), drivertest.Schema(t)
		t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
		where = "postgres " + schema + " " + url
	}
	return where, func() store.Store {
		db, err := OpenChildStore(t.Context(), where)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
}

// OpenChildStore opens the store [ChildStore] described with where.
func OpenChildStore(ctx context.Context, where string) (store.Store, error) {
	f := strings.SplitN(where, " ", 3)
	if f[0] == "sqlite" && len(f) == 2 {
		return sqlite.Open(ctx, sqlite.Config{Path: f[1]})
	}
	if f[0] == "postgres" && len(f) == 3 {
		return postgres.Open(ctx, postgres.Config{URL: f[2], Schema: f[1]})
	}
	return nil, fmt.Errorf("enginetest: no store at %q", where)
}

// AwaitJobEnd waits until the job is no longer running, as a kill test's child process does
// before it exits: it reads the job's state whenever ended receives (the engine's OnJobEnd) and
// at least every 100 ms, since a restarted process may find the job ended already.
func AwaitJobEnd(ctx context.Context, db store.Store, jobID int64, ended <-chan struct{}) error {
	for {
		j, err := db.JobGet(ctx, jobID)
		if err != nil {
			return err
		}
		if j.State != record.JobRunning {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/maintenance"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

// proc is a sluice process of a test.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *poll.Buffer
}

const (
	electedLog   = `msg="maintenance leader elected"`
	reclaimedLog = `msg="reclaimed expired leases"`
)

// startProc starts bin with args and env in a process group of its own, its output captured,
// SIGKILLed when the test ends.
func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	out := &poll.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return &proc{name: name, cmd: cmd, out: out}
}

func (p *proc) leads() bool { return strings.Contains(p.out.String(), electedLog) }

var ownerRE = regexp.MustCompile(`worker (\S+) running`)

// owner returns the lease owner name the worker process printed.
func (p *proc) owner() string {
	m := ownerRE.FindStringSubmatch(p.out.String())
	if m == nil {
		return ""
	}
	return m[1]
}

// TestLeaderKilled runs one job on PostgreSQL + S3 with three worker processes and the process that
// created the job, and SIGKILLs the maintenance leader mid-job while it runs tasks. Another process
// must take over leadership and reclaim the dead leader's tasks, and the job must complete with
// exact counts and no duplicate children or outputs.
func TestLeaderKilled(t *testing.T) {
	sh := newShared(t)
	dir := t.TempDir()
	wf := filepath.Join(dir, "crash.yaml")
	if err := os.WriteFile(wf, []byte(crashWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := filepath.Join(dir, "inputs")
	makeZips(t, inputs, 20, 100) // 20 roots + 2,000 children

	ctx := t.Context()
	start := func(name string, args ...string) *proc {
		return startProc(t, name, binary, sh.env, append(args, "--lease", "3s", "-v", "--log-format", "text")...)
	}
	dump := func(ps ...*proc) string {
		var b strings.Builder
		for _, p := range ps {
			fmt.Fprintf(&b, "--- %s:\n%s\n", p.name, lastLines(p.out.String(), 30))
		}
		return b.String()
	}

	// The first worker becomes the leader before anyone else runs.
	leader := start("worker a", "worker", "--data", filepath.Join(dir, "w", "a"))
	waitFor(t, time.Minute, "the first worker to lead", leader.leads)
	others := []*proc{start("worker b", "worker", "--data", filepath.Join(dir, "w", "b")),
		start("worker c", "worker", "--data", filepath.Join(dir, "w", "c"))}
	run := start("run", "run", "--data", filepath.Join(dir, "run"), wf, inputs)
	others = append(others, run)
	all := append([]*proc{leader}, others...)

	st, err := postgres.Open(ctx, postgres.Config{URL: sh.dbURL, Schema: sh.schema, SkipMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	owner := leader.owner()
	if owner == "" {
		t.Fatalf("the leader did not print its owner name\n%s", dump(leader))
	}
	// Kill the leader mid-job, while it runs tasks.
	waitFor(t, 2*time.Minute, "the job under way with tasks on the leader", func() bool {
		p, err := st.JobProgress(ctx, 1)
		if err != nil || p.Items[record.ItemIngested] < 200 {
			return false
		}
		return len(leased(t, st, owner)) >= 3
	})
	for _, p := range others {
		if p.leads() {
			t.Fatalf("%s leads too\n%s", p.name, dump(all...))
		}
	}
	if n := lockHolders(t, sh.dbURL, sh.schema); n != 1 {
		t.Fatalf("%d sessions hold the maintenance lock, want 1", n)
	}
	if err := syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = leader.cmd.Wait()

	// Another process takes over and reclaims the dead leader's tasks once their leases expire.
	var next *proc
	waitFor(t, 30*time.Second, "a new leader", func() bool {
		for _, p := range others {
			if p.leads() {
				next = p
				return true
			}
		}
		return false
	})
	t.Logf("%s leads %s after the kill", next.name, time.Since(killed).Round(time.Millisecond))
	// The orphans are read only now: a COMMIT the leader sent just before it died still lands,
	// and the server has dropped the dead leader's connections once its lock is free (the new
	// leader holds it), long before the leases expire.
	orphans := leased(t, st, owner)
	if len(orphans) == 0 {
		t.Fatalf("the leader finished all its tasks as it died: nothing to reclaim")
	}
	waitFor(t, 30*time.Second, "the dead leader's tasks to be reclaimed", func() bool {
		return len(leased(t, st, owner)) == 0
	})
	t.Logf("the dead leader's %d tasks were reclaimed %s after the kill", len(orphans), time.Since(killed).Round(time.Millisecond))
	if n := lockHolders(t, sh.dbURL, sh.schema); n != 1 {
		t.Errorf("%d sessions hold the maintenance lock after the take-over, want 1", n)
	}

	done := make(chan error, 1)
	go func() { done <- run.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, dump(all...))
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("job did not finish\n%s", dump(all...))
	}
	checkCrashJob(t, st, 20, 100)

	// Each orphan was put back by the reaper (an attempt lost by the dead owner) and then done.
	for _, tk := range orphans {
		cur, err := st.TaskGet(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := st.AttemptList(ctx, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		lost := false
		for _, a := range atts {
			if a.Attempt == tk.Attempt && a.Owner == owner && strings.Contains(a.Error, "worker lost") {
				lost = true
			}
		}
		if !lost || cur.State != record.TaskComplete || cur.LeaseOwner == owner {
			t.Errorf("orphaned task %d (%s): state %s owner %s, attempts %+v", tk.ID, tk.Step, cur.State, cur.LeaseOwner, atts)
		}
	}
	// Only the leader reaps, so the new leader's log shows the reclaim.
	reapers := 0
	for _, p := range others {
		if strings.Contains(p.out.String(), reclaimedLog) {
			reapers++
			if !p.leads() {
				t.Errorf("%s reclaimed leases without leading\n%s", p.name, dump(p))
			}
		}
	}
	if reapers == 0 {
		t.Errorf("no survivor logged %s\n%s", reclaimedLog, dump(others...))
	}
}

// leased returns the running tasks of job 1 leased by owner.
func leased(t *testing.T, st store.Store, owner string) []*record.Task {
	t.Helper()
	ts, err := st.TaskListByJob(t.Context(), store.TaskListParams{JobID: 1, State: record.TaskRunning, Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	var out []*record.Task
	for _, tk := range ts {
		if tk.LeaseOwner == owner {
			out = append(out, tk)
		}
	}
	return out
}

// lockHolders counts the sessions holding the schema's maintenance lock.
func lockHolders(t *testing.T, dbURL, schema string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, schema+"."+maintenance.LockName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

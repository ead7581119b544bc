package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/poll"
)

// skewedBinary returns a sluice binary whose machine clock is shifted by offset (package
// dbclock's testOffset, set at link time: the packages come from the build cache, where a build
// tag would compile every one of them again — minutes on a fresh CI machine).
func skewedBinary(offset string) (string, error) {
	p := filepath.Join(packageTemp, "sluice-skewed"+offset)
	ld := "-X github.com/sluice-project/sluice/internal/dbclock.testOffset=" + offset
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", p, "../../cmd/sluice").CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the skewed sluice: %v\n%s", err, out)
	}
	return p, nil
}

// TestWorkerClockSkew runs a job on PostgreSQL + S3 whose tasks outlast their lease (renewed),
// with the maintenance leader — the process that reaps expired leases — a `sluice worker` whose
// machine clock is 5 minutes fast or slow, beside a normal worker and the `sluice run` that made
// the job. Leases and deadlines are the database's time, so:
//   - fast: the skewed leader reclaims no live lease of the others (with its own clock it would
//     take every one), and once it is SIGKILLed its own tasks are reclaimed within seconds of
//     their leases' end (with its own clock they would look alive for 5 more minutes);
//   - slow: the normal worker is SIGKILLed and the skewed leader reclaims its tasks within
//     seconds (with its own clock, 5 minutes late).
func TestWorkerClockSkew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset string
	}{
		{name: "fast", offset: "5m"},
		{name: "slow", offset: "-5m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			skewed, err := skewedBinary(tc.offset)
			if err != nil {
				t.Fatal(err)
			}
			sh := newShared(t)
			dir := t.TempDir()
			var inputs []string
			for i := range 20 {
				p := filepath.Join(dir, fmt.Sprintf("in-%03d.txt", i))
				os.WriteFile(p, []byte(fmt.Sprint(i)), 0o644)
				inputs = append(inputs, p)
			}
			wf := filepath.Join(dir, "slow.yaml")
			os.WriteFile(wf, []byte("name: slow\nsteps:\n  wait: {action: exec, needs: [start], success: [waited], with: {command: [sleep, \"3\"]}}\n  note: {action: noop, needs: [waited]}\n"), 0o644)
			ctx := t.Context()
			start := func(name, bin string, env []string, args ...string) *proc {
				return startProc(t, name, bin, env, append(args, "--lease", "2s", "-v", "--log-format", "text")...)
			}
			leader := start("skewed worker", skewed, sh.env, "worker", "--data", filepath.Join(dir, "skewed"))
			waitFor(t, time.Minute, "the skewed worker to lead", leader.leads)
			if !strings.Contains(leader.out.String(), "clock is off the database's") {
				t.Fatalf("the skewed worker did not warn of its clock\n%s", lastLines(leader.out.String(), 20))
			}
			normal := start("worker", binary, sh.env, "worker", "--data", filepath.Join(dir, "normal"))
			run := start("run", binary, sh.env, append([]string{"run", "--data", filepath.Join(dir, "run"), wf}, inputs...)...)
			all := []*proc{leader, normal, run}
			dump := func() string {
				var b strings.Builder
				for _, p := range all {
					fmt.Fprintf(&b, "--- %s:\n%s\n", p.name, lastLines(p.out.String(), 20))
				}
				return b.String()
			}
			victim := leader
			if tc.name == "slow" {
				victim = normal
			}
			owner := victim.owner()
			if owner == "" {
				waitFor(t, 30*time.Second, "the victim's owner name", func() bool { return victim.owner() != "" })
				owner = victim.owner()
			}
			conn, err := pgx.Connect(ctx, sh.dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(ctx, "SET search_path TO "+sh.schema); err != nil {
				t.Fatal(err)
			}
			count := func(q string, args ...any) int {
				var n int
				if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
					return -1
				}
				return n
			}
			// Kill the victim once it runs tasks and the others have finished some (their
			// leases renewed past their first end: the tasks outlast the lease).
			waitFor(t, 2*time.Minute, "tasks running on the victim and some complete", func() bool {
				return count(`SELECT count(*) FROM tasks WHERE state = 'running' AND lease_owner = $1`, owner) >= 1 &&
					count(`SELECT count(*) FROM tasks WHERE step = 'wait' AND state = 'complete'`) >= 4
			})
			if err := syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			orphans := count(`SELECT count(*) FROM tasks WHERE state = 'running' AND lease_owner = $1`, owner)
			// Reclaimed within seconds of the leases' end (2 s, the leader's reap every third
			// of it, a new leader's election within 5 s), not 5 minutes.
			poll.Until(t, 45*time.Second, "the killed worker's tasks reclaimed", func() (bool, string) {
				n := count(`SELECT count(*) FROM tasks WHERE state = 'running' AND lease_owner = $1`, owner)
				return n == 0, fmt.Sprintf("%d still leased to %s", n, owner)
			})
			t.Logf("%d tasks of the killed %s reclaimed %s after the kill", orphans, victim.name, time.Since(killed).Round(100*time.Millisecond))
			done := make(chan error, 1)
			go func() { done <- run.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run: %v\n%s", err, dump())
				}
			case <-time.After(3 * time.Minute):
				t.Fatalf("the job did not finish\n%s", dump())
			}
			// No live process lost a lease: the only attempts lost are the victim's.
			if n := count(`SELECT count(*) FROM attempts WHERE error LIKE '%worker lost%' AND owner <> $1`, owner); n != 0 {
				t.Errorf("%d attempts of live processes were reclaimed as lost (a live lease stolen)\n%s", n, dump())
			}
			if n := count(`SELECT count(*) FROM tasks WHERE state <> 'complete'`); n != 0 {
				t.Errorf("%d tasks not complete\n%s", n, dump())
			}
			if n := count(`SELECT count(*) FROM tasks WHERE step = 'wait'`); n != len(inputs) {
				t.Errorf("%d wait tasks, want %d", n, len(inputs))
			}
		})
	}
}

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/poll"
)

// privatePostgres starts a PostgreSQL cluster of the test's own (initdb in a temp dir, a free
// port), so the test can restart it without disturbing other tests that share the machine's. It
// needs the server binaries and, as root, the postgres user to run them.
func privatePostgres(t *testing.T) (url string, restart func()) {
	t.Helper()
	bin := "/usr/lib/postgresql/15/bin"
	if matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(matches) > 0 {
		bin = filepath.Dir(matches[len(matches)-1])
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		if os.Getenv("SLUICE_TEST_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("PostgreSQL server binaries required: %v", err)
		}
		t.Skipf("PostgreSQL server binaries: %v", err)
	}
	dir := t.TempDir()
	cred := postgresUser(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	pg := filepath.Join(dir, "pg")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	run("initdb", "-D", pg, "-A", "trust", "-U", "postgres", "--no-sync")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir)
	run("pg_ctl", "-D", pg, "-o", opts, "-w", "-l", filepath.Join(dir, "log"), "start")
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(bin, "pg_ctl"), "-D", pg, "-m", "immediate", "-w", "stop")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Run()
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		func() {
			run("pg_ctl", "-D", pg, "-o", opts, "-m", "fast", "-w", "-l", filepath.Join(dir, "log"), "restart")
		}
}

// postgresUser returns, when the test runs as root (PostgreSQL refuses to), the credentials of
// the postgres user to run the server binaries with, and gives that user dir (and a way to it);
// nil otherwise.
func postgresUser(t *testing.T, dir string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chown(dir, uid, gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// TestPostgresRestartMidJob restarts PostgreSQL while a job runs on it: the job completes, every
// item done once, nothing lost and nothing failed.
func TestPostgresRestartMidJob(t *testing.T) {
	t.Parallel()
	url, restart := privatePostgres(t)
	ctx := t.Context()
	dir := t.TempDir()
	const n = 120
	var inputs []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("in-%03d.txt", i))
		os.WriteFile(p, []byte(fmt.Sprint(i)), 0o644)
		inputs = append(inputs, p)
	}
	wf := filepath.Join(dir, "slow.yaml")
	os.WriteFile(wf, []byte("name: slow\nsteps:\n  wait: {action: exec, needs: [start], success: [waited], with: {command: [sleep, \"0.1\"]}}\n  note: {action: noop, needs: [waited]}\n"), 0o644)
	data := filepath.Join(dir, "data")
	if out, err := runSluice(ctx, "migrate", "up", "--database", url).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	cmd := runSluice(ctx, append([]string{"run", "--data", data, "--database", url, wf}, inputs...)...)
	var out poll.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	count := func(state string) int {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return -1
		}
		defer c.Close(context.Background())
		var k int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM tasks WHERE step = 'wait' AND state = $1", state).Scan(&k); err != nil {
			return -1
		}
		return k
	}
	waitFor(t, 60*time.Second, "a quarter of the tasks to complete", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run ended before the restart: %v\n%s", err, lastLines(out.String(), 30))
		default:
		}
		return count("complete") >= n/4
	})
	// The restart must fall in the middle of the job, or the test tests nothing.
	select {
	case err := <-done:
		t.Fatalf("run ended before the restart (%v): make the job longer\n%s", err, lastLines(out.String(), 30))
	default:
	}
	if c := count("complete"); c >= n {
		t.Fatalf("%d of %d tasks complete before the restart: make the job longer", c, n)
	}
	restart()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, lastLines(out.String(), 30))
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the job did not finish after the restart\n%s", lastLines(out.String(), 30))
	}
	if c, f := count("complete"), count("failed"); c != n || f != 0 {
		t.Errorf("after the restart: %d complete, %d failed, want %d and 0\n%s", c, f, n, lastLines(out.String(), 30))
	}
}

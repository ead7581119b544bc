package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/poll"
)

// pgHA is a pg_auto_failover formation of the test's own on loopback: a monitor, a primary and a
// standby, each a `pg_autoctl run` in a process group of its own (SIGKILLing its processes is
// the node's machine dying: its keeper and its postgres at once, see killTree). The machine's
// shared cluster is not touched.
type pgHA struct {
	t       *testing.T
	dir     string
	bin     string // PostgreSQL's server binaries
	cred    *syscall.Credential
	env     []string
	monitor int    // the monitor's port
	ports   [2]int // node1's and node2's
	groups  map[string]*exec.Cmd
}

// haRequired reports whether the failover tests must run (SLUICE_TEST_REQUIRE_HA=1, as `make ha`
// and CI set): they build a three-node formation and ingest the whole corpus, minutes of work, so
// a plain `go test` skips them.
func haRequired(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_TEST_REQUIRE_HA") != "1" {
		t.Skip("PostgreSQL failover: set SLUICE_TEST_REQUIRE_HA=1 (needs pg_autoctl, Debian's postgresql-15-auto-failover)")
	}
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		t.Fatalf("SLUICE_TEST_REQUIRE_HA=1 needs pg_autoctl (apt-get install postgresql-15-auto-failover): %v", err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startPGHA builds the formation and waits until node1 is primary and node2 its secondary.
// Replication is synchronous unless async: pg_auto_failover's default for a standby in the
// replication quorum (synchronous_standby_names = 'ANY 1 (…)').
func startPGHA(t *testing.T, async bool) *pgHA {
	t.Helper()
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		t.Fatal("PostgreSQL server binaries not found under /usr/lib/postgresql")
	}
	h := &pgHA{t: t, dir: t.TempDir(), bin: filepath.Dir(matches[len(matches)-1]), groups: map[string]*exec.Cmd{}}
	h.cred = postgresUser(t, h.dir)
	h.env = []string{"PATH=" + h.bin + ":/usr/bin:/bin", "HOME=" + h.dir, "XDG_CONFIG_HOME=" + filepath.Join(h.dir, "config"),
		"XDG_DATA_HOME=" + filepath.Join(h.dir, "data"), "XDG_RUNTIME_DIR=" + filepath.Join(h.dir, "run"), "LANG=C.UTF-8"}
	h.monitor, h.ports = freePort(t), [2]int{freePort(t), freePort(t)}
	// The whole formation dies with the test: every process of its keepers' groups, of their
	// postgres, and any left running in its directory (see killTree).
	t.Cleanup(func() { h.killAll(h.dir) })
	// Clusters made ahead, without syncs (a test machine's disks are slow and nothing here
	// must outlive an OS crash): pg_autoctl takes an existing data directory as it is.
	for _, d := range []string{"monitor", "node1"} {
		if out, err := h.run(filepath.Join(h.bin, "initdb"), "-D", filepath.Join(h.dir, d), "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
			t.Fatalf("initdb %s: %v\n%s", d, err, out)
		}
		// fsync off for speed; a short checkpoint_timeout so that the standby's base backup
		// (a spread checkpoint) does not wait minutes on a loaded machine.
		conf := "\nfsync = off\ncheckpoint_timeout = 30s\n"
		if d == "monitor" {
			// Failures noticed in seconds, not pg_auto_failover's 20 s default.
			// Not lower: on a test machine at load 80 a 1 s timeout and 3 s of silence failed
			// over a primary that was only slow.
			conf += "pgautofailover.health_check_period = 1000\npgautofailover.health_check_timeout = 2000\n" +
				"pgautofailover.health_check_max_retries = 2\npgautofailover.health_check_retry_delay = 1000\n" +
				"pgautofailover.node_considered_unhealthy_timeout = 5000\n"
		}
		f, err := os.OpenFile(filepath.Join(h.dir, d, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(f, conf)
		f.Close()
	}
	common := []string{"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--ssl-mode", "disable"}
	if out, err := h.run("pg_autoctl", append([]string{"create", "monitor", "--pgdata", filepath.Join(h.dir, "monitor"),
		"--pgport", fmt.Sprint(h.monitor)}, common...)...); err != nil {
		t.Fatalf("pg_autoctl create monitor: %v\n%s", err, out)
	}
	h.start("monitor", "run", "--pgdata", filepath.Join(h.dir, "monitor"))
	mon := fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", h.monitor)
	node := func(n int, extra ...string) {
		name := fmt.Sprintf("node%d", n)
		h.start(name, append(append([]string{"create", "postgres", "--pgdata", filepath.Join(h.dir, name), "--pgport", fmt.Sprint(h.ports[n-1]),
			"--name", name, "--monitor", mon, "--dbname", "test", "--run"}, common...), extra...)...)
	}
	node(1)
	h.waitStates(3*time.Minute, map[string]string{"node1": "single"})
	// Nothing dirty left for the base backup's checkpoint to spread out.
	if c, err := pgx.Connect(t.Context(), h.nodeURL(0)); err == nil {
		_, _ = c.Exec(t.Context(), "CHECKPOINT")
		c.Close(context.Background())
	}
	if async {
		node(2, "--replication-quorum", "false")
	} else {
		node(2)
	}
	h.waitStates(5*time.Minute, map[string]string{"node1": "primary", "node2": "secondary"})
	return h
}

// run runs a command as the postgres user with the formation's environment.
func (h *pgHA) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = h.env
	cmd.Dir = h.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: h.cred}
	return cmd.CombinedOutput()
}

// start starts `pg_autoctl args…` in a process group of its own, logging to <name>.log.
func (h *pgHA) start(name string, args ...string) {
	h.t.Helper()
	log, err := os.Create(filepath.Join(h.dir, name+".log"))
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command("pg_autoctl", args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = h.env, h.dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: h.cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("pg_autoctl %s: %v", name, err)
	}
	h.groups[name] = cmd
}

// kill SIGKILLs node i's keeper and postgres, every process of them at once (the node's
// machine dies).
func (h *pgHA) kill(i int) {
	h.t.Helper()
	name := fmt.Sprintf("node%d", i+1)
	h.killAll(filepath.Join(h.dir, name), name)
}

// killAll SIGKILLs, at once, the keepers named (all when none is) with everything they started,
// and every process working in dir or below it, then reaps the keepers.
func (h *pgHA) killAll(dir string, names ...string) {
	if len(names) == 0 {
		for n := range h.groups {
			names = append(names, n)
		}
	}
	var roots []int
	for _, n := range names {
		if c := h.groups[n]; c != nil {
			roots = append(roots, c.Process.Pid)
		}
	}
	killTree(roots, dir)
	for _, n := range names {
		if c := h.groups[n]; c != nil {
			_ = c.Wait()
			delete(h.groups, n)
		}
	}
}

// killTree SIGKILLs the processes roots, every process whose working directory is dir or
// below it, and all their descendants, at once. A process group's kill is not enough for
// PostgreSQL: each child of a postmaster is a session of its own (the postmaster signals them
// by group), and some outlive a postmaster killed before them (the logger, pg_auto_failover's
// health-check worker), re-parented to init. Each process found is stopped (SIGSTOP) before
// its children are looked for, so none starts one unseen, and none notices the others die
// before it is killed too.
func killTree(roots []int, dir string) {
	dir = filepath.Clean(dir)
	in := func(pid int) bool {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		return err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/"))
	}
	stopped := map[int]bool{}
	for first := true; ; first = false {
		found := false
		for pid, ppid := range procParents() {
			if stopped[pid] || pid == os.Getpid() {
				continue
			}
			if stopped[ppid] || slices.Contains(roots, pid) || first && in(pid) {
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				stopped[pid], found = true, true
			}
		}
		if !found {
			break
		}
	}
	for pid := range stopped {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procParents returns the machine's processes, each with its parent's pid.
func procParents() map[int]int {
	out := map[int]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		st, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses, the last ")" ends it.
		i := strings.LastIndex(string(st), ") ")
		var pid, ppid int
		var state string
		if i < 0 {
			continue
		}
		if _, err := fmt.Sscan(string(st[i+2:]), &state, &ppid); err != nil {
			continue
		}
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid); err != nil {
			continue
		}
		out[pid] = ppid
	}
	return out
}

// URL is the multi-host URL Sluice is given: both nodes, the one that accepts writes chosen.
func (h *pgHA) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/test?sslmode=disable&target_session_attrs=read-write&connect_timeout=10",
		h.ports[0], h.ports[1])
}

func (h *pgHA) nodeURL(i int) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=2", h.ports[i])
}

// states reads the monitor's reported state of each node.
func (h *pgHA) states(ctx context.Context) (map[string]string, error) {
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable&connect_timeout=2", h.monitor))
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	rows, err := c.Query(ctx, `SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for rows.Next() {
		var name, reported, goal string
		if err := rows.Scan(&name, &reported, &goal); err != nil {
			return nil, err
		}
		if reported == goal {
			out[name] = reported
		} else {
			out[name] = reported + "→" + goal
		}
	}
	return out, rows.Err()
}

// waitStates waits until the monitor reports each named node in its state.
func (h *pgHA) waitStates(d time.Duration, want map[string]string) {
	h.t.Helper()
	poll.Until(h.t, d, fmt.Sprint("the formation in states ", want), func() (bool, string) {
		got, err := h.states(h.t.Context())
		if err != nil {
			return false, err.Error() + "\n" + h.logs()
		}
		for n, s := range want {
			if got[n] != s {
				return false, fmt.Sprint(got) + "\n" + h.logs()
			}
		}
		return true, ""
	})
}

// logs returns the last lines of each keeper's log, for a failure message.
func (h *pgHA) logs() string {
	var b strings.Builder
	for _, n := range []string{"monitor", "node1", "node2"} {
		out, _ := os.ReadFile(filepath.Join(h.dir, n+".log"))
		fmt.Fprintf(&b, "--- %s:\n%s\n", n, lastLines(string(out), 8))
	}
	return b.String()
}

// writable reports whether a write commits through the multi-host URL.
func writable(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "SELECT txid_current()")
	return err == nil
}

// child returns the pid of a process of node i's postgres whose command line holds kind
// ("walsender": a primary's process that streams to a standby), 0 if there is none.
func (h *pgHA) child(i int, kind string) int {
	b, err := os.ReadFile(filepath.Join(h.dir, fmt.Sprintf("node%d", i+1), "postmaster.pid"))
	if err != nil {
		return 0
	}
	var postmaster int
	if _, err := fmt.Sscan(string(b), &postmaster); err != nil {
		return 0
	}
	for pid, ppid := range procParents() {
		if ppid != postmaster {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), kind) {
			return pid
		}
	}
	return 0
}

// primary returns the index of the node that accepts writes now (the monitor may have failed
// over a slow primary already), failing the test if neither does.
func (h *pgHA) primary() int {
	h.t.Helper()
	for i := range h.ports {
		c, err := pgx.Connect(h.t.Context(), h.nodeURL(i))
		if err != nil {
			continue
		}
		var standby bool
		err = c.QueryRow(h.t.Context(), "SELECT pg_is_in_recovery()").Scan(&standby)
		c.Close(context.Background())
		if err == nil && !standby {
			return i
		}
	}
	h.t.Fatalf("no node accepts writes\n%s", h.logs())
	return -1
}

package graph_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/module"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/action/basic"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/egress"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/graph"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
	"github.com/sluice-project/sluice/internal/store/sqlite"
	"github.com/sluice-project/sluice/internal/worker"
)

// childEnv carries the child's store ("sqlite PATH" or "postgres SCHEMA URL"); childProxy the
// proxy's URL.
const (
	childEnv   = "SLUICE_GRAPH_CHILD"
	childProxy = "SLUICE_GRAPH_CHILD_PROXY"
	killJobKey = "graph-kill"
)

var killRoots = []string{"example.com/m0@v1.0.0"}

// TestTraversalSurvivesKill runs a request in a child process (this test binary), SIGKILLs it
// three times while it fetches, and runs it to the end, on every driver: the result equals an
// uninterrupted run's, and no module version is fetched again once its resolve has committed
// (the versions in the shared graph at each kill are fetched no more afterwards).
func TestTraversalSurvivesKill(t *testing.T) {
	t.Parallel()
	g, _ := randomGraph(11, 90)
	dir := t.TempDir()
	writeProxy(t, dir, g)
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		proxy := newCountingProxy(t, dir, nil)
		want := startKit(t, open, 8, graph.Config{Egress: loopback(t)}).run(t, graph.Request{Source: proxy.URL, Roots: killRoots})
		proxy = newCountingProxy(t, dir, nil) // counts from zero for the killed runs

		var where string
		var reopen func() store.Store
		if strings.HasSuffix(t.Name(), "/sqlite") {
			path := filepath.Join(t.TempDir(), "sluice.db")
			where = "sqlite " + path
			reopen = func() store.Store {
				db, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
		} else {
			url, schema := drivertest.DatabaseURL(t), drivertest.Schema(t)
			t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
			where = "postgres " + schema + " " + url
			reopen = func() store.Store {
				db, err := postgres.Open(t.Context(), postgres.Config{URL: url, Schema: schema})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				return db
			}
		}
		total := func() int {
			n := 0
			for _, c := range proxy.fetches() {
				n += c
			}
			return n
		}
		// run starts the child; with killAt > 0 it kills it once the proxy has served that many
		// fetches in all, and returns the versions the shared graph held then with their counts.
		run := func(killAt int) map[string]int {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+where, childProxy+"="+proxy.URL)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if killAt == 0 {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("last run: %v", err)
				}
				return nil
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			poll.Until(t, time.Minute, fmt.Sprintf("%d fetches", killAt), func() (bool, string) {
				select {
				case err := <-exited:
					t.Fatalf("the child ended before %d fetches (%d): %v", killAt, total(), err)
				default:
				}
				return total() >= killAt, fmt.Sprint(total())
			})
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			committed := map[string]int{}
			counts := proxy.fetches()
			for _, mv := range committedVersions(t, reopen()) {
				p, v, _ := strings.Cut(mv, "@")
				ep, _ := module.EscapePath(p)
				path := "/" + ep + "/@v/" + v + ".mod"
				committed[path] = counts[path]
			}
			return committed
		}
		var snapshots []map[string]int
		for _, at := range []int{20, 60, 100} {
			snapshots = append(snapshots, run(at))
		}
		run(0)

		final := proxy.fetches()
		for i, snap := range snapshots {
			if len(snap) == 0 {
				t.Errorf("kill %d: no resolve had committed", i+1)
			}
			for path, n := range snap {
				if final[path] != n {
					t.Errorf("%s fetched %d times, %d of them after its resolve committed (kill %d)", path, final[path], final[path]-n, i+1)
				}
			}
		}
		db := reopen()
		job, err := db.JobGetByKey(t.Context(), killJobKey)
		if err != nil {
			t.Fatal(err)
		}
		if job.State != record.JobComplete {
			t.Fatalf("job %s: %s", job.State, job.Error)
		}
		got, err := graph.LoadResult(t.Context(), db, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		got.Counts, want.Counts = graph.Counts{}, graph.Counts{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("result after kills differs from an uninterrupted run:\n%v\n%v", got.Nodes, want.Nodes)
		}
		refetched := 0
		for _, n := range final {
			if n > 1 {
				refetched++
			}
		}
		t.Logf("%d versions, %d fetched more than once (in flight at a kill)", len(final), refetched)
	})
}

// committedVersions lists the gomod versions in the shared graph, "path@version".
func committedVersions(t testing.TB, db store.Store) []string {
	t.Helper()
	rows, err := db.DomainSQL().Query(t.Context(), "SELECT pkg, version FROM graph_versions WHERE type = 'gomod'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p, v string
		if err := rows.Scan(&p, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, p+"@"+v)
	}
	return out
}

// runChild is the child process: it opens the store, starts an engine with the graph and a
// worker, creates (or finds) the request and waits for it to end.
func runChild() int {
	ctx := context.Background()
	f := strings.SplitN(os.Getenv(childEnv), " ", 3)
	var db store.Store
	var err error
	switch f[0] {
	case "sqlite":
		db, err = sqlite.Open(ctx, sqlite.Config{Path: f[1]})
	default:
		db, err = postgres.Open(ctx, postgres.Config{URL: f[2], Schema: f[1]})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer db.Close()
	if err := child(ctx, db, os.Getenv(childProxy)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func child(ctx context.Context, db store.Store, proxy string) error {
	dir, err := os.MkdirTemp("", "graph-child-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	blobs, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		return err
	}
	lo, err := egress.New([]string{"127.0.0.0/8", "::1"}, nil)
	if err != nil {
		return err
	}
	g := graph.New(graph.Config{Egress: lo})
	acts := append(g.Actions(), basic.NewPass())
	conc := map[string]int{}
	for _, a := range acts {
		conc[a.Spec().Name] = 8
	}
	ended := make(chan struct{}, 1)
	var wk *worker.Worker
	e := engine.New(engine.Config{Store: db, Catalog: catalogOf(acts),
		OnReady:  func(qs []string) { wk.Ready(qs) },
		OnJobEnd: func(int64, record.JobState) { ended <- struct{}{} }})
	if err := graph.Register(ctx, e); err != nil {
		return err
	}
	wk = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 20 * time.Millisecond, Concurrency: conc})
	// The previous process is dead (the parent killed and waited for it): its running tasks go
	// back to ready now, as the embedded engine's start does.
	if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wk.Start(wctx)
	defer wk.Stop(context.Background())
	if err := builtin.Apply(ctx, e, "graph"); err != nil {
		return err
	}
	job, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: "graph", Key: killJobKey, Open: true})
	if err != nil {
		return err
	}
	req := map[string]any{"type": "gomod", "source": proxy, "roots": []any{killRoots[0]}}
	if err := e.AddRoots(ctx, job, []engine.Root{{Name: "request", Metadata: map[string]any{"request": req}}}); err != nil {
		return err
	}
	if err := e.Seal(ctx, job.ID); err != nil {
		return err
	}
	return enginetest.AwaitJobEnd(ctx, db, job.ID, ended)
}

func catalogOf(acts []action.Action) *action.Catalog {
	cat := &action.Catalog{}
	cat.Register(acts...)
	return cat
}

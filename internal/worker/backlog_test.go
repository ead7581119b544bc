package worker_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/enginetest"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/worker"
)

// The backlog tests' workflow: fan makes the children of an item whose metadata says how many
// ("children"; its children get "grandchildren" as theirs), slow processes every item.
const backlogWorkflow = `name: backlog
steps:
  fan: {action: fan, needs: [start]}
  slow: {action: slow, needs: [start]}
`

// fanAction makes md["children"] children of an item, and md["grandchildren"] children of each
// of those (it resumes after the children an earlier attempt recorded). started, when set, is
// told of each run.
func fanAction(started func()) *enginetest.FuncAction {
	return enginetest.Func("fan", func(ctx context.Context, t *action.Task, out action.Output) error {
		if started != nil {
			started()
		}
		n := metaInt(t.Item.Metadata["children"])
		md := map[string]any{"children": nil}
		if g := metaInt(t.Item.Metadata["grandchildren"]); g > 0 {
			md = map[string]any{"children": g, "grandchildren": nil}
		}
		for i := action.Resume(out); i < n; i++ {
			if err := out.CreateChild(ctx, action.Child{Name: fmt.Sprintf("c%05d", i), Metadata: md}); err != nil {
				return err
			}
		}
		return nil
	}).WithPolicy(action.Policy{NoTempDir: true})
}

// metaInt is a number of an item's metadata, 0 when it has none.
func metaInt(v any) int {
	n, _ := strconv.Atoi(fmt.Sprint(v))
	return n
}

// unprocessed counts the job's items not yet processed, at any depth, the root included.
func unprocessed(t *testing.T, db store.Store, jobID int64) int {
	t.Helper()
	n, err := db.ItemCountBacklog(t.Context(), store.ItemCountBacklogParams{JobID: jobID, Depth: -1, Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBacklogBoundLocal: a local action that makes 5,000 children while the step that processes
// them is slower (it takes a token per item, which the test hands out) never has more than the
// bound of them unprocessed — the count sampled while it runs; the root, whose step waits, is
// the slack — and waits in its child writer: progress says "waiting for downstream", and it
// goes on as the children drain. Every child is made once.
func TestBacklogBoundLocal(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		const n, bound = 5000, 200
		tokens := make(chan struct{})
		slow := enginetest.Func("slow", func(ctx context.Context, t *action.Task, out action.Output) error {
			if t.Item.Depth == 0 {
				return nil
			}
			select {
			case <-tokens:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}).WithPolicy(action.Policy{NoTempDir: true})
		k := enginetest.StartWith(t, open, enginetest.Config{
			Engine: func(c *engine.Config) { c.MaxBacklog = bound },
			Worker: func(c *worker.Config) { c.Concurrency = map[string]int{"fan": 1, "slow": 4} },
		}, fanAction(nil), slow)
		job := k.StartJob(t, backlogWorkflow, engine.Root{Name: "archive", Metadata: map[string]any{"children": n}})

		// Nothing drains yet: the fan waits at the bound.
		poll.Until(t, 2*time.Minute, "the fan to wait for downstream", func() (bool, string) {
			p, err := k.Engine.Progress(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return p.Downstream, fmt.Sprintf("%+v", p)
		})
		if got := unprocessed(t, k.Store, job.ID); got > bound+1 {
			t.Fatalf("%d items unprocessed while the fan waits, want at most %d (the bound and the root)", got, bound+1)
		}

		// Drain, sampling the backlog as it goes.
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case tokens <- struct{}{}:
				case <-stop:
					return
				}
			}
		}()
		defer close(stop)
		peak, samples := 0, 0
		poll.Until(t, 5*time.Minute, "the job to end", func() (bool, string) {
			peak = max(peak, unprocessed(t, k.Store, job.ID))
			samples++
			j, err := k.Engine.Job(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State != record.JobRunning, string(j.State)
		})
		t.Logf("bound %d: at most %d items unprocessed in %d samples", bound, peak, samples)
		if peak > bound+1 {
			t.Errorf("%d items unprocessed at a sample, want at most %d (the bound and the root)", peak, bound+1)
		}
		checkChildren(t, k.Store, job.ID, n)
	})
}

// checkChildren checks that the job completed with the root's n children, each made once, in
// order, and every item processed.
func checkChildren(t *testing.T, db store.Store, jobID int64, n int) {
	t.Helper()
	ctx := t.Context()
	j, err := db.JobGet(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != record.JobComplete {
		t.Fatalf("job %s (%s), want complete", j.State, j.Error)
	}
	roots, err := db.ItemList(ctx, store.ItemListParams{JobID: jobID, ParentID: new(int64), Limit: 10})
	if err != nil || len(roots) != 1 {
		t.Fatalf("roots %d, %v", len(roots), err)
	}
	kids, err := db.ItemListChildren(ctx, roots[0].ID, "fan")
	if err != nil {
		t.Fatal(err)
	}
	if len(kids) != n || roots[0].NChildren != n {
		t.Fatalf("%d children (n_children %d), want %d", len(kids), roots[0].NChildren, n)
	}
	for i, c := range kids {
		if c.Ordinal != i || c.Name != fmt.Sprintf("c%05d", i) || c.State != record.ItemIngested || c.Error != "" {
			t.Fatalf("child %d: ordinal %d %q %s %q", i, c.Ordinal, c.Name, c.State, c.Error)
		}
	}
}

// TestBacklogNestedOneSlot: archives of archives on a worker with one slot for the fan. The root
// makes more sub-archives than the bound and waits; each sub-archive's fan needs the one slot
// the waiting root's fan took, and waits only for the items below it (the leaves), so nothing
// deadlocks: the job completes with every leaf made once, and the backlog stays within the
// bound at each of the two levels.
func TestBacklogNestedOneSlot(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		const subs, leaves, bound = 150, 20, 100
		var processed atomic.Int64
		slow := enginetest.Func("slow", func(ctx context.Context, t *action.Task, out action.Output) error {
			sum := sha256.Sum256([]byte(t.Item.Name))
			for range 100 {
				sum = sha256.Sum256(sum[:])
			}
			processed.Add(1)
			return nil
		}).WithPolicy(action.Policy{NoTempDir: true})
		k := enginetest.StartWith(t, open, enginetest.Config{
			Engine: func(c *engine.Config) { c.MaxBacklog = bound },
			Worker: func(c *worker.Config) { c.Concurrency = map[string]int{"fan": 1, "slow": 1} },
		}, fanAction(nil), slow)
		job := k.StartJob(t, backlogWorkflow, engine.Root{Name: "archive",
			Metadata: map[string]any{"children": subs, "grandchildren": leaves}})
		peak := 0
		poll.Until(t, 6*time.Minute, "the job to end", func() (bool, string) {
			peak = max(peak, unprocessed(t, k.Store, job.ID))
			j, err := k.Engine.Job(t.Context(), job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State != record.JobRunning, fmt.Sprintf("%s, %d processed", j.State, processed.Load())
		})
		t.Logf("bound %d per level: at most %d items unprocessed", bound, peak)
		if peak > 2*bound+1 {
			t.Errorf("%d items unprocessed at a sample, want at most %d (the bound at each level and the root)", peak, 2*bound+1)
		}
		j, err := k.Store.JobGet(t.Context(), job.ID)
		if err != nil || j.State != record.JobComplete {
			t.Fatalf("job %+v, %v", j, err)
		}
		p, err := k.Store.JobProgress(t.Context(), job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Items[record.ItemIngested]; got != 1+subs+subs*leaves {
			t.Errorf("%d items ingested, want %d", got, 1+subs+subs*leaves)
		}
	})
}

// killEnv carries the kill test's child process its store ("sqlite PATH" or "postgres SCHEMA
// URL").
const killEnv = "SLUICE_BACKLOG_KILL_CHILD"

const (
	killChildren = 3000
	killBound    = 100
	killJobKey   = "backlog-kill"
)

// TestBacklogKillWhileWaiting runs a fan of 3,000 children with a bound of 100 in a child
// process, whose slow step is always behind, and SIGKILLs it three times while the fan waits
// (most of its run is waiting) before a last run ends the job: the children already committed
// stay, the replays make none twice, none is lost — the same set an uninterrupted run makes.
func TestBacklogKillWhileWaiting(t *testing.T) {
	t.Parallel()
	enginetest.ForEachDriver(t, func(t *testing.T, open enginetest.Open) {
		t.Parallel()
		where, reopen := enginetest.ChildStore(t)
		for i, after := range []int{150, 400, 700} {
			if enginetest.RunChild(t, killEnv+"="+where, after, 2*time.Minute) {
				t.Fatalf("the job ended before kill %d", i+1)
			}
			if i == 0 {
				// The fan was at work (waiting, most of its run) when the kill came.
				db, err := enginetest.OpenChildStore(t.Context(), where)
				if err != nil {
					t.Fatal(err)
				}
				var roots []*record.Item
				job, err := db.JobGetByKey(t.Context(), killJobKey)
				if err == nil {
					roots, err = db.ItemList(t.Context(), store.ItemListParams{JobID: job.ID, ParentID: new(int64), Limit: 1})
				}
				db.Close()
				if err != nil || len(roots) != 1 || roots[0].NChildren == 0 || roots[0].NChildren >= killChildren {
					t.Fatalf("after the first kill: roots %v (%v), want one with some of its children", roots, err)
				}
				t.Logf("first kill: %d of %d children made", roots[0].NChildren, killChildren)
			}
		}
		if !enginetest.RunChild(t, killEnv+"="+where, 0, 3*time.Minute) {
			t.Fatal("the last run ended without its job")
		}
		db := reopen()
		job, err := db.JobGetByKey(t.Context(), killJobKey)
		if err != nil {
			t.Fatal(err)
		}
		checkChildren(t, db, job.ID, killChildren)
	})
}

// runKillChild is the kill test's child process: an engine and a worker on the store, the job
// created (or found), a line printed as each slow task starts, "done" once the job ended.
func runKillChild() int {
	ctx := context.Background()
	db, err := enginetest.OpenChildStore(ctx, os.Getenv(killEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer db.Close()
	if err := killChild(ctx, db); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

func killChild(ctx context.Context, db store.Store) error {
	dir, err := os.MkdirTemp("", "backlog-kill-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	blobs, err := blob.NewDir(filepath.Join(dir, "blobs"))
	if err != nil {
		return err
	}
	slow := enginetest.Func("slow", func(ctx context.Context, t *action.Task, out action.Output) error {
		fmt.Println(t.ID)
		sum := sha256.Sum256([]byte(t.Item.Name))
		for range 20000 {
			sum = sha256.Sum256(sum[:])
		}
		return ctx.Err()
	}).WithPolicy(action.Policy{NoTempDir: true})
	cat := &action.Catalog{}
	cat.Register(fanAction(nil), slow)
	ended := make(chan struct{}, 1)
	var wk *worker.Worker
	e := engine.New(engine.Config{Store: db, Catalog: cat, MaxBacklog: killBound,
		OnReady:  func(qs []string) { wk.Ready(qs) },
		OnJobEnd: func(int64, record.JobState) { ended <- struct{}{} }})
	wk = worker.New(worker.Config{Engine: e, Blobs: blobs, TempDir: dir, PollInterval: 20 * time.Millisecond,
		Concurrency: map[string]int{"fan": 1, "slow": 2}})
	if _, err := e.Reclaim(ctx, engine.ReclaimParams{All: true}); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wk.Start(wctx)
	defer wk.Stop(context.Background())
	if _, _, err := e.ApplyWorkflow(ctx, []byte(backlogWorkflow), "backlog.yaml"); err != nil {
		return err
	}
	job, _, err := e.CreateJob(ctx, engine.CreateJobParams{Workflow: "backlog", Key: killJobKey, Open: true})
	if err != nil {
		return err
	}
	if err := e.AddRoots(ctx, job, []engine.Root{{Name: "archive", Metadata: map[string]any{"children": killChildren}}}); err != nil {
		return err
	}
	if err := e.Seal(ctx, job.ID); err != nil {
		return err
	}
	return enginetest.AwaitJobEnd(ctx, db, job.ID, ended)
}

package maintenance_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/maintenance"
	"github.com/sluice-project/sluice/internal/poll"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/store/drivertest"
	"github.com/sluice-project/sluice/internal/store/postgres"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// noop is an action that does nothing; tests lease its tasks by hand.
type noop struct{}

func (noop) Spec() action.Spec { return action.Spec{Name: "noop"} }
func (noop) Run(context.Context, *action.Task, action.Output) error {
	return nil
}

// clock is an engine clock the test moves.
type clock struct{ t atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.set(time.Now())
	return c
}

func (c *clock) now() time.Time      { return time.Unix(0, c.t.Load()) }
func (c *clock) set(t time.Time)     { c.t.Store(t.UnixNano()) }
func (c *clock) add(d time.Duration) { c.set(c.now().Add(d)) }

type bundle struct {
	st    store.Store
	e     *engine.Engine
	clock *clock
	blobs *blob.Dir
}

func setup(t *testing.T, st store.Store) *bundle {
	t.Helper()
	cat := &action.Catalog{}
	cat.Register(noop{})
	c := newClock()
	e := engine.New(engine.Config{Store: st, Catalog: cat, Now: c.now})
	if _, _, err := e.ApplyWorkflow(t.Context(), []byte("name: one\nsteps:\n  n: {action: noop, needs: [start]}\n"), "one.yaml"); err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.NewDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{st: st, e: e, clock: c, blobs: blobs}
}

// lease creates a job with one root and leases its task for owner, with a lease of d.
func (b *bundle) lease(t *testing.T, owner string, d time.Duration) *record.Task {
	t.Helper()
	ctx := t.Context()
	job, _, err := b.e.CreateJob(ctx, engine.CreateJobParams{Workflow: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.e.AddRoots(ctx, job, []engine.Root{{Name: "root"}}); err != nil {
		t.Fatal(err)
	}
	now := b.clock.now().UTC()
	tasks, err := b.st.TaskLease(ctx, store.TaskLeaseParams{Queue: "noop", Limit: 1, Owner: owner, Now: now, LeaseUntil: now.Add(d)})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("lease: %v %v", tasks, err)
	}
	return tasks[0]
}

func start(t *testing.T, cfg maintenance.Config) *maintenance.Loop {
	t.Helper()
	l := maintenance.New(cfg)
	l.Start(context.Background())
	t.Cleanup(l.Stop)
	return l
}

// TestReap: the leader puts a task whose lease expired back to ready, recording the lost attempt,
// and leaves a live lease alone.
func TestReap(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		st := open(t)
		b := setup(t, st)
		dead := b.lease(t, "dead-process", time.Second)
		alive := b.lease(t, "live-process", time.Hour)
		b.clock.add(time.Minute)
		l := start(t, maintenance.Config{Engine: b.e, Locker: st, ReapInterval: 10 * time.Millisecond, ElectInterval: 10 * time.Millisecond})
		poll.Until(t, 10*time.Second, "the expired task to be reclaimed", func() (bool, string) {
			tk, err := st.TaskGet(t.Context(), dead.ID)
			if err != nil {
				t.Fatal(err)
			}
			return tk.State == record.TaskReady, string(tk.State)
		})
		if !l.Leader() {
			t.Error("the only loop is not the leader")
		}
		atts, err := st.AttemptList(t.Context(), dead.ID)
		if err != nil || len(atts) != 1 || atts[0].Owner != "dead-process" || !strings.Contains(atts[0].Error, "worker lost") {
			t.Errorf("attempts of the reclaimed task: %+v %v", atts, err)
		}
		if tk, err := st.TaskGet(t.Context(), alive.ID); err != nil || tk.State != record.TaskRunning || tk.LeaseOwner != "live-process" {
			t.Errorf("task with a live lease: %+v %v", tk, err)
		}
	})
}

// countingLocker counts TryLock calls, so a test can wait for followers to have tried.
type countingLocker struct {
	store.Locker
	tries atomic.Int64
}

func (c *countingLocker) TryLock(ctx context.Context, name string) (store.Lock, bool, error) {
	c.tries.Add(1)
	return c.Locker.TryLock(ctx, name)
}

// TestOneLeader: of three processes sharing a PostgreSQL schema exactly one leads however often
// the others try; when it stops, or its lock's connection is cut, another takes over.
func TestOneLeader(t *testing.T) {
	t.Parallel()
	url := drivertest.DatabaseURL(t)
	schema := drivertest.Schema(t)
	t.Cleanup(func() { drivertest.DropSchema(t, url, schema) })
	type proc struct {
		loop   *maintenance.Loop
		locker *countingLocker
	}
	var procs []*proc
	for range 3 {
		db, err := postgres.Open(t.Context(), postgres.Config{URL: url, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		b := setup(t, db)
		p := &proc{locker: &countingLocker{Locker: db}}
		p.loop = start(t, maintenance.Config{Engine: b.e, Locker: p.locker, Blobs: b.blobs, Tasks: b.st, ReapInterval: 20 * time.Millisecond,
			ElectInterval: 20 * time.Millisecond})
		procs = append(procs, p)
	}
	leaders := func() (n int, who *proc) {
		for _, p := range procs {
			if p.loop.Leader() {
				n++
				who = p
			}
		}
		return n, who
	}
	var leader *proc
	poll.Until(t, 10*time.Second, "a leader", func() (bool, string) {
		n, who := leaders()
		leader = who
		return n == 1, fmt.Sprintf("%d leaders", n)
	})
	// The followers keep trying and keep failing.
	var tries []int64
	for _, p := range procs {
		tries = append(tries, p.locker.tries.Load())
	}
	poll.Until(t, 10*time.Second, "followers to try five more times", func() (bool, string) {
		for i, p := range procs {
			if p != leader && p.locker.tries.Load() < tries[i]+5 {
				return false, fmt.Sprint(p.locker.tries.Load(), " tries")
			}
			if n, _ := leaders(); n != 1 || !leader.loop.Leader() {
				t.Fatalf("%d leaders while the first one lives", n)
			}
		}
		return true, ""
	})

	// A leader that stops hands over.
	leader.loop.Stop()
	poll.Until(t, 10*time.Second, "a new leader after a stop", func() (bool, string) {
		n, who := leaders()
		return n == 1 && who != leader, fmt.Sprintf("%d leaders", n)
	})
	_, leader = leaders()

	// A leader whose connection dies (a network partition, or the server ending the session) steps
	// down; the lock is free for whoever tries first.
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`, schema+"."+maintenance.LockName).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Fatalf("%d sessions held the maintenance lock, want 1", killed)
	}
	poll.Until(t, 10*time.Second, "the cut-off leader to step down", func() (bool, string) {
		return !leader.loop.Leader(), "still leading"
	})
	poll.Until(t, 10*time.Second, "a leader after the cut", func() (bool, string) {
		n, _ := leaders()
		return n == 1, fmt.Sprintf("%d leaders", n)
	})
}

// TestCollectBlobs: blob collection keeps referenced blobs, young blobs, and blobs written since
// the oldest running task started, and deletes the rest.
func TestCollectBlobs(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		ctx := t.Context()
		b := setup(t, open(t))
		put := func(s string) string {
			sha, _, err := b.blobs.Put(ctx, strings.NewReader(s))
			if err != nil {
				t.Fatal(err)
			}
			return sha
		}
		exists := func(sha string) bool {
			_, err := b.blobs.Stat(ctx, sha)
			return err == nil
		}
		l := maintenance.New(maintenance.Config{Engine: b.e, Blobs: b.blobs, Tasks: b.st, GCGrace: time.Hour})
		// A task started a minute ago and still runs.
		b.clock.add(-time.Minute)
		task := b.lease(t, "worker", 3*time.Hour)
		garbage, referenced := put("garbage"), put("referenced")
		job, _, err := b.e.CreateJob(ctx, engine.CreateJobParams{Workflow: "one"})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.e.AddRoots(ctx, job, []engine.Root{{Name: "kept", BlobSHA256: referenced, Size: 10}}); err != nil {
			t.Fatal(err)
		}

		// Young blobs are kept.
		b.clock.set(time.Now())
		if n, _, err := l.CollectBlobs(ctx); err != nil || n != 0 || !exists(garbage) {
			t.Fatalf("collect young blobs: deleted %d, %v; garbage exists %v", n, err, exists(garbage))
		}
		// Two hours later they are past the grace, but the task that has been running since
		// before them may still reference them.
		b.clock.set(time.Now().Add(2 * time.Hour))
		if n, _, err := l.CollectBlobs(ctx); err != nil || n != 0 || !exists(garbage) {
			t.Fatalf("collect during a long task: deleted %d, %v; garbage exists %v", n, err, exists(garbage))
		}
		// Once it finished, only the referenced blob stays.
		if ok, err := b.st.TaskFinish(ctx, store.TaskFinishParams{ID: task.ID, Attempt: task.Attempt, State: record.TaskComplete, Now: b.clock.now()}); err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
		if n, _, err := l.CollectBlobs(ctx); err != nil || n != 1 || exists(garbage) || !exists(referenced) {
			t.Fatalf("collect: deleted %d, %v; garbage exists %v, referenced exists %v", n, err, exists(garbage), exists(referenced))
		}
	})
}

// TestExpireWaits: the leader ends a wait for an external event once its deadline passes, so the
// waiting step is skipped with the deadline error and its item ends.
func TestExpireWaits(t *testing.T) {
	t.Parallel()
	drivertest.ForEach(t, func(t *testing.T, open drivertest.Open) {
		t.Parallel()
		st := open(t)
		b := setup(t, st)
		ctx := t.Context()
		if _, _, err := b.e.ApplyWorkflow(ctx, []byte("name: gate\nexternal: [approved]\nsteps:\n  n: {action: noop, needs: [approved], deadline: 1h}\n"), "gate.yaml"); err != nil {
			t.Fatal(err)
		}
		job, _, err := b.e.CreateJob(ctx, engine.CreateJobParams{Workflow: "gate"})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.e.AddRoots(ctx, job, []engine.Root{{Name: "root"}}); err != nil {
			t.Fatal(err)
		}
		b.clock.add(2 * time.Hour)
		start(t, maintenance.Config{Engine: b.e, Locker: st, ReapInterval: 10 * time.Millisecond, ElectInterval: 10 * time.Millisecond})
		poll.Until(t, 10*time.Second, "the job to end once its wait expired", func() (bool, string) {
			j, err := st.JobGet(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == record.JobComplete, string(j.State)
		})
		tasks, err := st.TaskListByJob(ctx, store.TaskListParams{JobID: job.ID, Limit: 10})
		if err != nil || len(tasks) != 1 || tasks[0].State != record.TaskSkipped || tasks[0].Error != "deadline: waited 1h0m0s for approved" {
			t.Fatalf("tasks %+v, %v; want n skipped with the deadline error", tasks, err)
		}
	})
}

// Package worker runs tasks inside the sluice process: it leases ready tasks per queue up to each
// queue's concurrency limit, runs their actions under a per-attempt timeout with panics recovered,
// renews the process's leases in one batched write, and commits results through one group-commit
// writer (DESIGN §4–5).
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metric"
)

// DefaultLeaseDuration is the task lease of a [Config] that sets none: how soon a dead
// process's tasks are taken over.
const DefaultLeaseDuration = 30 * time.Second

// Config configures a [Worker].
type Config struct {
	Engine *engine.Engine
	Blobs  blob.Store
	Logger *slog.Logger
	// Owner names this process in leases. Defaults to a random id.
	Owner string
	// Queues limits which queues this worker leases from; nil means every action in the catalog.
	Queues []string
	// Concurrency overrides an action's default concurrency by action name.
	Concurrency map[string]int
	// LeaseDuration is how long a lease lasts without renewal. Defaults to [DefaultLeaseDuration];
	// renewed every third of it.
	LeaseDuration time.Duration
	// PollInterval bounds how long an idle worker waits before looking for work that another
	// process (or a retry's run_after) made ready. Defaults to 1s.
	PollInterval time.Duration
	// MaxBatch bounds the writes committed in one transaction. Defaults to 512.
	MaxBatch int
	// CommitLanes is how many transactions of batched writes may be open at once. With a store
	// that takes concurrent writes (Postgres) it defaults to 2: one batch's statements run while
	// the other's commit waits for the disk (+10–25 % tasks/s in `sluice-bench engine`, where 3
	// measured no better). SQLite has one writer: always 1.
	CommitLanes int
	// TempDir is where attempts get their private directories. Defaults to os.TempDir().
	TempDir string
	// Metrics records each attempt's queue wait and run time and each lease renewal. Nil
	// records nothing.
	Metrics *metric.Set
	// Drain is how long running tasks may take to finish when the context given to
	// [Worker.Start] ends (a SIGTERM): then the worker stops as [Worker.Stop] does with a
	// context that ends after Drain. Defaults to 30s.
	Drain time.Duration
}

// Worker leases and runs tasks. Start it once; Stop is idempotent. Its methods are safe for
// concurrent use.
//
// It is made of parts that each guard their own state: the slot scheduler ([slots]: what runs
// per queue, idle queues, wakes, cancel funcs), the leases it renews ([leases]), the conversion
// cache ([convCache]) and the committer (group commit, with [committer.asLane] for brief batches).
// Their locks are never held across I/O, nor one inside another.
type Worker struct {
	cfg    Config
	e      *engine.Engine
	log    *slog.Logger
	commit *committer
	wake   chan struct{}

	// slots schedules: tasks running per queue, brief batches, idle queues (slots.go).
	slots *slots
	// concurrency, when positive, replaces every action's concurrency ([Worker.SetConcurrency]).
	concurrency atomic.Int64
	// leases are the leases renew extends (renew.go).
	leases *leases
	// cache is the conversion cache and its flights (cache.go).
	cache *convCache
	jobs  *jobWorkflows
	stats *actionStats

	// stopDispatch ends the dispatcher (no more leases); stopRenew the renewal of leases, which
	// goes on while running tasks drain; stopTasks cancels the context every task runs under.
	stopDispatch, stopRenew, stopTasks context.CancelFunc
	startOnce                          sync.Once
	drainOnce, stopOnce                sync.Once
	started                            bool // set by Start's once; read after startOnce.Do
	wg                                 sync.WaitGroup
	tasks                              sync.WaitGroup
	// running is what runs, for a stop's account of each task (drain.go).
	running *running
}

// New returns a worker.
func New(cfg Config) *Worker {
	if cfg.Owner == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 512
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 30 * time.Second
	}
	// Tools run with their attempt's directory as working directory: paths under it must not
	// be relative to ours.
	if abs, err := filepath.Abs(cfg.TempDir); err == nil {
		cfg.TempDir = abs
	}
	w := &Worker{cfg: cfg, e: cfg.Engine, log: cfg.Logger, wake: make(chan struct{}, 1),
		slots: newSlots(briefBatches), leases: newLeases(), running: newRunning(), jobs: &jobWorkflows{m: map[int64]jobWF{}}, stats: &actionStats{m: map[string]*ActionStats{}}}
	var linger time.Duration
	lanes := cfg.CommitLanes
	if lanes <= 0 {
		lanes = 2
	}
	if !cfg.Engine.ConcurrentWrites() {
		// One writer (SQLite): a busy committer waits a little to fill its transactions. On
		// Postgres leases go through the committer too, and their latency counts more.
		linger = 5 * time.Millisecond
		lanes = 1
		// A brief batch holds the one writer while it runs: another would only wait for it.
		w.slots.maxBatches = 1
	}
	w.commit = newCommitter(cfg.Engine, cfg.Logger, cfg.MaxBatch, linger, lanes)
	w.cache = &convCache{e: cfg.Engine, commit: w.commit, log: cfg.Logger, stepOf: w.stepOf, flights: map[string]chan struct{}{}}
	return w
}

// ActionStats counts what this worker did for one action since it was created.
type ActionStats struct {
	Runs      int64 // the action actually ran
	CacheHits int64 // a cached result was replayed instead
}

// Stats returns per-action counts of actual runs and cache hits.
func (w *Worker) Stats() map[string]ActionStats {
	w.stats.mu.Lock()
	defer w.stats.mu.Unlock()
	out := make(map[string]ActionStats, len(w.stats.m))
	for k, v := range w.stats.m {
		out[k] = *v
	}
	return out
}

// actionStats are the counts [Worker.Stats] returns. Safe for concurrent use.
type actionStats struct {
	mu sync.Mutex
	m  map[string]*ActionStats
}

func (s *actionStats) count(act string, hit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[act]
	if st == nil {
		st = &ActionStats{}
		s.m[act] = st
	}
	if hit {
		st.CacheHits++
	} else {
		st.Runs++
	}
}

// InFlight returns the number of tasks this worker leased whose outcome is not yet committed.
func (w *Worker) InFlight() int { return w.leases.count() }

// Owner returns the lease owner name of this worker.
func (w *Worker) Owner() string { return w.cfg.Owner }

// Wake tells the worker that tasks may be ready in any queue. Safe to call from any goroutine;
// never blocks.
func (w *Worker) Wake() {
	w.slots.wakeAny()
	w.kick()
}

// WakeQueues tells the worker that tasks became ready in these queues.
func (w *Worker) WakeQueues(queues []string) {
	w.slots.wakeQueues(queues)
	w.kick()
}

// Ready is what an engine's [engine.Config.OnReady] should call: it wakes the queues named, or
// every queue when queues is nil.
func (w *Worker) Ready(queues []string) {
	if queues == nil {
		w.Wake()
		return
	}
	w.WakeQueues(queues)
}

// kick makes the dispatcher look again (a slot is free, or a queue was woken).
func (w *Worker) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// CancelTasks cancels the contexts of running tasks (their job was canceled or failed).
func (w *Worker) CancelTasks(ids []int64) {
	w.slots.cancel(ids)
}

// Do runs fn in the worker's group-commit writer and waits for it to commit. Other components
// (a job's retry, the remote workers' protocol) use it so that all writes of the process share
// one writer: fn's transaction commits while no other transaction of the writer is open.
func (w *Worker) Do(ctx context.Context, fn func(t *engine.Tx) error) error {
	return w.commit.doExclusive(ctx, fn)
}

// Start starts the committer, the dispatcher and the lease renewer. When ctx ends the worker
// stops as [Worker.Stop] does, letting running tasks drain for [Config.Drain]; only Stop waits
// for that. Calling it again does nothing.
func (w *Worker) Start(ctx context.Context) {
	w.startOnce.Do(func() {
		w.started = true
		base := context.WithoutCancel(ctx)
		var dctx, rctx, tctx context.Context
		dctx, w.stopDispatch = context.WithCancel(base)
		rctx, w.stopRenew = context.WithCancel(base)
		tctx, w.stopTasks = context.WithCancel(base)
		w.commit.start(base)
		w.e.AttachWriter(w)
		w.wg.Add(2)
		go func() { defer w.wg.Done(); w.dispatch(dctx, tctx) }()
		go func() { defer w.wg.Done(); w.renew(rctx) }()
		context.AfterFunc(ctx, func() {
			sctx, cancel := context.WithTimeout(context.Background(), w.cfg.Drain)
			defer cancel()
			w.Stop(sctx)
		})
	})
}

// Drain is the first part of [Worker.Stop]: it stops leasing and lets running tasks finish until
// ctx ends, then cancels and releases those still running; but [Worker.Do] goes on working until
// Stop, for the writes of other components that drain alongside (the remote workers' protocol).
// It does nothing before Start, and only once.
func (w *Worker) Drain(ctx context.Context) {
	w.startOnce.Do(func() {}) // never started: it never will be
	if !w.started {
		return
	}
	w.drainOnce.Do(func() {
		w.slots.stop()
		w.stopDispatch()
		w.drain(ctx)
	})
}

// Stop stops the worker and returns once it has stopped; it never waits much longer than ctx.
// It stops leasing at once and lets running tasks finish (their results are committed) until
// ctx ends; then it cancels the tasks still running and releases their leases, without spending
// an attempt, so that another process (or the next start) takes them at once. A task that still
// runs abandonAfter after its cancel is abandoned: its lease is released all the same and
// whatever it does later is never committed. The log tells what became of each task. Stop is
// idempotent; concurrent calls wait for the first.
func (w *Worker) Stop(ctx context.Context) {
	w.stopOnce.Do(func() {
		w.startOnce.Do(func() {}) // never started: it never will be
		if !w.started {
			w.commit.stop()
			return
		}
		w.Drain(ctx)
		w.stopRenew()
		w.wg.Wait()
		w.e.DetachWriter(w)
		w.commit.stop()
		w.stopTasks()
	})
}

// SetConcurrency makes every action run up to n tasks at once in this worker (per queue, as
// an action's own concurrency does), replacing [Config.Concurrency] and the actions' defaults;
// 0 restores them. The worker applies it when it next reads its queues (every 5 s at most).
// `sluice worker --autoscale` sets it from the scaling signal (package scale). It is safe for
// concurrent use.
func (w *Worker) SetConcurrency(n int) { w.concurrency.Store(int64(max(n, 0))) }

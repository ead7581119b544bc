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
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metric"
)

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
	// LeaseDuration is how long a lease lasts without renewal. Defaults to 30s; renewed every third of it.
	LeaseDuration time.Duration
	// PollInterval bounds how long an idle worker waits before looking for work that another
	// process (or a retry's run_after) made ready. Defaults to 1s.
	PollInterval time.Duration
	// MaxBatch bounds the writes committed in one transaction. Defaults to 512.
	MaxBatch int
	// CommitLanes is how many transactions of batched writes may be open at once. With a store
	// that takes concurrent writes (Postgres) it defaults to 2: one batch's statements run while
	// the other's commit waits for the disk (+10–25 % tasks/s in `sluice bench engine`, where 3
	// measured no better). SQLite has one writer: always 1.
	CommitLanes int
	// TempDir is where attempts get their private directories. Defaults to os.TempDir().
	TempDir string
	// Metrics records each attempt's queue wait and run time and each lease renewal. Nil
	// records nothing.
	Metrics *metric.Set
}

// Worker leases and runs tasks. Start it once; Stop is idempotent.
type Worker struct {
	cfg    Config
	e      *engine.Engine
	log    *slog.Logger
	commit *committer
	wake   chan struct{}

	mu       sync.Mutex
	inflight map[string]int
	running  map[int64]context.CancelFunc
	// owned holds the tasks this worker leased whose outcome is not yet committed: running, or
	// with their result queued. renew extends these leases and no others, so a task whose
	// result could not be committed at all is left to expire and be reclaimed.
	owned map[int64]struct{}
	// records holds the ids of the held-lease records of the held batches running (see hold),
	// renewed with the leases.
	records map[int64]struct{}
	flights map[string]chan struct{}
	// landSeq counts landed flights; landRing holds the keys of the last len(landRing), so that
	// a cache answer read in a lease transaction can be told still good (see prefetch).
	landSeq  uint64
	landRing [1024]string
	jobs     map[int64]jobWF
	stats    map[string]*ActionStats
	// idle holds the queues whose last lease found fewer ready tasks than it asked for: lease
	// skips them (a statement each, a round trip each on Postgres) until a wake names them
	// (WakeQueues), any wake does (Wake), or the poll interval passes. wakeAll and wakeQueue
	// count wakes, so that a lease does not mark idle a queue woken while it ran.
	idle      map[string]bool
	held      int // held batches running (see hold)
	wakeAll   uint64
	wakeQueue map[string]uint64

	cancel    context.CancelFunc
	startOnce sync.Once
	stopOnce  sync.Once
	wg        sync.WaitGroup
	tasks     sync.WaitGroup
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
		cfg.LeaseDuration = 30 * time.Second
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
	// Tools run with their attempt's directory as working directory: paths under it must not
	// be relative to ours.
	if abs, err := filepath.Abs(cfg.TempDir); err == nil {
		cfg.TempDir = abs
	}
	w := &Worker{cfg: cfg, e: cfg.Engine, log: cfg.Logger, wake: make(chan struct{}, 1),
		inflight: map[string]int{}, running: map[int64]context.CancelFunc{}, owned: map[int64]struct{}{}, records: map[int64]struct{}{}, flights: map[string]chan struct{}{}, jobs: map[int64]jobWF{}, stats: map[string]*ActionStats{},
		idle: map[string]bool{}, wakeQueue: map[string]uint64{}}
	var linger time.Duration
	lanes := cfg.CommitLanes
	if lanes <= 0 {
		lanes = 2
	}
	if !cfg.Engine.Store().Capabilities().ConcurrentWrites {
		// One writer (SQLite): a busy committer waits a little to fill its transactions. On
		// Postgres leases go through the committer too, and their latency counts more.
		linger = 5 * time.Millisecond
		lanes = 1
	}
	w.commit = newCommitter(cfg.Engine, cfg.Logger, cfg.MaxBatch, linger, lanes)
	return w
}

// ActionStats counts what this worker did for one action since it was created.
type ActionStats struct {
	Runs      int64 // the action actually ran
	CacheHits int64 // a cached result was replayed instead
}

// Stats returns per-action counts of actual runs and cache hits.
func (w *Worker) Stats() map[string]ActionStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]ActionStats, len(w.stats))
	for k, v := range w.stats {
		out[k] = *v
	}
	return out
}

func (w *Worker) count(act string, hit bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats[act]
	if st == nil {
		st = &ActionStats{}
		w.stats[act] = st
	}
	if hit {
		st.CacheHits++
	} else {
		st.Runs++
	}
}

// Owner returns the lease owner name of this worker.
func (w *Worker) Owner() string { return w.cfg.Owner }

// Wake tells the worker that tasks may be ready in any queue. Safe to call from any goroutine;
// never blocks.
func (w *Worker) Wake() {
	w.mu.Lock()
	w.wakeAll++
	clear(w.idle)
	w.mu.Unlock()
	w.kick()
}

// WakeQueues tells the worker that tasks became ready in these queues.
func (w *Worker) WakeQueues(queues []string) {
	w.mu.Lock()
	for _, q := range queues {
		w.wakeQueue[q]++
		delete(w.idle, q)
	}
	w.mu.Unlock()
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
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if c := w.running[id]; c != nil {
			c()
		}
	}
}

// Do runs fn in the worker's group-commit writer and waits for it to commit. Other components
// (a job's retry, the remote workers' protocol) use it so that all writes of the process share
// one writer: fn's transaction commits while no other transaction of the writer is open.
func (w *Worker) Do(ctx context.Context, fn func(t *engine.Tx) error) error {
	return w.commit.doExclusive(ctx, fn)
}

// Start starts the committer, the dispatcher and the lease renewer.
// Calling it again does nothing.
func (w *Worker) Start(ctx context.Context) {
	w.startOnce.Do(func() {
		ctx, w.cancel = context.WithCancel(ctx)
		w.commit.start(ctx)
		w.wg.Add(2)
		go func() { defer w.wg.Done(); w.dispatch(ctx) }()
		go func() { defer w.wg.Done(); w.renew(ctx) }()
	})
}

// Stop stops leasing, waits for running tasks until ctx ends, then cancels the rest, and commits
// what is queued. Tasks cut short are released for another worker without spending an attempt.
func (w *Worker) Stop(ctx context.Context) {
	w.stopOnce.Do(func() {
		started := true
		w.startOnce.Do(func() { started = false })
		if !started {
			return
		}
		w.mu.Lock()
		w.inflight = nil // no more leasing
		w.mu.Unlock()
		done := make(chan struct{})
		go func() { w.tasks.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			w.mu.Lock()
			for _, c := range w.running {
				c()
			}
			w.mu.Unlock()
			<-done
		}
		w.cancel()
		w.wg.Wait()
		w.commit.wait()
	})
}

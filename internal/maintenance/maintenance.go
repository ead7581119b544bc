// Package maintenance runs the housekeeping that one process does on behalf of every process
// sharing a store: it reclaims tasks whose lease expired (their worker died) and deletes blobs
// that no row references. Exactly one process leads at a time: on a store shared by several
// processes (Postgres) the leader holds a [store.Locker] lock, which the database releases when
// the leader dies, and the others try to take it every [Config.ElectInterval]; a store only one
// engine process opens (SQLite behind the data dir's lock) makes that process the leader.
//
// Leadership is an economy, not a safety property: every maintenance step is a transaction that
// is safe to run twice or concurrently, so the short overlap when a leader loses its connection
// before noticing it does no harm.
//
// Sluice keeps jobs, items and outputs for ever: there is no retention setting yet, so there is
// no retention step either.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// LockName names the leader's lock in the store.
const LockName = "sluice.maintenance"

// Config configures a [Loop].
type Config struct {
	Engine *engine.Engine
	// Blobs is the blob store to collect; nil disables blob collection.
	Blobs blob.Store
	// Tasks reads the running tasks, the oldest of which bounds what blob collection may
	// delete: the store Engine writes. Required with Blobs.
	Tasks RunningTasks
	// Locker elects the leader among processes sharing the store. Nil means this process is the
	// only engine on the store and always leads.
	Locker store.Locker
	Logger *slog.Logger
	// ReapInterval is how often the leader puts tasks with expired leases back to ready.
	// Defaults to 10s.
	ReapInterval time.Duration
	// ElectInterval is how often a follower tries to become the leader, and how often the leader
	// checks that its lock still holds: a dead leader is replaced within about this long.
	// Defaults to 5s.
	ElectInterval time.Duration
	// GCInterval is how often the leader deletes unreferenced blobs; the first collection runs
	// one interval after the process becomes leader. Negative disables collection. Defaults to 6h.
	GCInterval time.Duration
	// GCGrace keeps unreferenced blobs younger than this (see [blob.GC]). Blobs written since the
	// oldest running task started are kept too, since that task may still commit a row that
	// references them. Defaults to 1h.
	GCGrace time.Duration
}

// RunningTasks lists tasks by lease: TaskListExpired(ctx, now, limit) returns up to limit
// running tasks whose lease ended before now. A [store.Store] satisfies it.
type RunningTasks interface {
	TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*record.Task, error)
}

// Loop is the maintenance loop of one process. Start it once; Stop is idempotent. Its methods are
// safe for concurrent use.
type Loop struct {
	cfg    Config
	e      *engine.Engine
	log    *slog.Logger
	leader atomic.Bool

	startOnce sync.Once
	stopOnce  sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
}

// New returns a loop; it panics when cfg.Engine is nil, or cfg.Blobs is set without cfg.Tasks.
func New(cfg Config) *Loop {
	if cfg.Engine == nil {
		panic("maintenance: Config.Engine is nil")
	}
	if cfg.Blobs != nil && cfg.Tasks == nil {
		panic("maintenance: Config.Blobs is set without Config.Tasks")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 10 * time.Second
	}
	if cfg.ElectInterval <= 0 {
		cfg.ElectInterval = 5 * time.Second
	}
	if cfg.GCInterval == 0 {
		cfg.GCInterval = 6 * time.Hour
	}
	if cfg.GCGrace <= 0 {
		cfg.GCGrace = time.Hour
	}
	return &Loop{cfg: cfg, e: cfg.Engine, log: cfg.Logger, done: make(chan struct{})}
}

// Leader reports whether this process is the maintenance leader now.
func (l *Loop) Leader() bool { return l.leader.Load() }

// Start starts the loop in the background. Calling it again does nothing.
func (l *Loop) Start(ctx context.Context) {
	l.startOnce.Do(func() {
		ctx, l.cancel = context.WithCancel(ctx)
		go func() {
			defer close(l.done)
			l.run(ctx)
		}()
	})
}

// Stop stops the loop and, if this process leads, gives up leadership. It waits for a blob
// collection in progress to notice.
func (l *Loop) Stop() {
	l.stopOnce.Do(func() {
		started := true
		l.startOnce.Do(func() { started = false })
		if started {
			l.cancel()
			<-l.done
		}
	})
}

// run alternates between following (trying to take the lock) and leading, until ctx ends.
func (l *Loop) run(ctx context.Context) {
	tick := time.NewTicker(l.cfg.ElectInterval)
	defer tick.Stop()
	for {
		lock, ok := l.elect(ctx)
		if ok {
			l.lead(ctx, lock)
			tick.Reset(l.cfg.ElectInterval)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// elect tries once to become the leader.
func (l *Loop) elect(ctx context.Context) (store.Lock, bool) {
	if l.cfg.Locker == nil {
		return nil, true
	}
	lock, ok, err := l.cfg.Locker.TryLock(ctx, LockName)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("take maintenance lock", "error", err)
		}
		return nil, false
	}
	return lock, ok
}

// lead runs maintenance until ctx ends or the lock is lost, then releases the lock.
func (l *Loop) lead(ctx context.Context, lock store.Lock) {
	ctx, cancel := context.WithCancel(ctx)
	var gc sync.WaitGroup
	l.leader.Store(true)
	l.log.Info("maintenance leader elected")
	defer func() {
		cancel()
		gc.Wait()
		l.leader.Store(false)
		if lock != nil {
			lock.Release()
		}
		l.log.Info("maintenance leadership ended")
	}()
	if l.cfg.Blobs != nil && l.cfg.GCInterval > 0 {
		gc.Add(1)
		go func() { defer gc.Done(); l.collectEvery(ctx) }()
	}
	reap := time.NewTicker(l.cfg.ReapInterval)
	defer reap.Stop()
	check := time.NewTicker(l.cfg.ElectInterval)
	defer check.Stop()
	// A new leader may take over from a dead one: reap at once.
	l.reap(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			if lock == nil {
				continue
			}
			if err := lock.Check(ctx); err != nil {
				if ctx.Err() == nil {
					l.log.Warn("maintenance leadership lost", "error", err)
				}
				return
			}
		case <-reap.C:
			l.reap(ctx)
		}
	}
}

// reap reclaims every task whose lease expired.
func (l *Loop) reap(ctx context.Context) {
	const batch = 1000
	total := 0
	for {
		n, err := l.e.Reclaim(ctx, engine.ReclaimParams{Limit: batch})
		if err != nil {
			if ctx.Err() == nil {
				l.log.Error("reclaim expired leases", "error", err)
			}
			break
		}
		total += n
		if n < batch {
			break
		}
	}
	if total > 0 {
		l.log.Info("reclaimed expired leases", "tasks", total)
	}
	l.expireWaits(ctx)
}

// expireWaits ends the waits for external events whose deadline passed (steps that say
// deadline:): so a deadline is met within a reap interval.
func (l *Loop) expireWaits(ctx context.Context) {
	const batch = 1000
	total := 0
	for {
		n, err := l.e.ExpireWaits(ctx, batch)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Error("expire waits", "error", err)
			}
			break
		}
		total += n
		if n < batch {
			break
		}
	}
	if total > 0 {
		l.log.Info("expired waits", "waits", total)
	}
}

func (l *Loop) collectEvery(ctx context.Context) {
	t := time.NewTicker(l.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, _, err := l.CollectBlobs(ctx); err != nil && ctx.Err() == nil {
			l.log.Error("collect blobs", "error", err)
		}
	}
}

// maxRunning bounds the running tasks CollectBlobs looks at to find the oldest; with more it
// skips the collection rather than guess.
const maxRunning = 10_000

// CollectBlobs deletes the blobs no row references that were written before both now minus
// [Config.GCGrace] and the start of the oldest running task, and returns how many it deleted and
// the bytes freed. The leader calls it every [Config.GCInterval]; it is exported for tests and
// safe to call from any process.
func (l *Loop) CollectBlobs(ctx context.Context) (deleted int, freed int64, err error) {
	if l.cfg.Blobs == nil {
		return 0, 0, nil
	}
	now := l.e.Now()
	grace := l.cfg.GCGrace
	// A running task writes its children's and thumbnails' blobs before the transaction that
	// references them, possibly long before (a task may run for hours): keep everything written
	// since the oldest running task started.
	running, err := l.cfg.Tasks.TaskListExpired(ctx, time.Unix(1<<40, 0), maxRunning)
	if err != nil {
		return 0, 0, err
	}
	if len(running) == maxRunning {
		l.log.Warn("skip blob collection: too many running tasks", "tasks", len(running))
		return 0, 0, nil
	}
	for _, t := range running {
		if d := now.Sub(t.StartedAt) + time.Minute; d > grace {
			grace = d
		}
	}
	deleted, freed, err = blob.GC(ctx, l.cfg.Blobs, func(sha string) (bool, error) { return l.e.BlobReferenced(ctx, sha) }, grace, now)
	if deleted > 0 {
		l.log.Info("collected blobs", "blobs", deleted, "bytes", freed)
	}
	return deleted, freed, err
}

// Package worker runs tasks inside the sluice process: it leases ready tasks per queue up to each
// queue's concurrency limit, runs their actions under a per-attempt timeout with panics recovered,
// renews the process's leases in one batched write, and commits results through one group-commit
// writer (DESIGN §4–5).
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/action"
	"github.com/sluice-project/sluice/internal/blob"
	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/metric"
	"github.com/sluice-project/sluice/internal/queue"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/tracing"
	"github.com/sluice-project/sluice/internal/workflow"
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

type queueInfo struct {
	name  string
	limit int
	brief bool // its action is Brief: run in held batches where the store can (see hold)
}

// queues returns the queues this worker serves with their limits: one per action, plus one per
// step that sets its own concurrency.
func (w *Worker) queues(ctx context.Context) []queueInfo {
	cat := w.e.Catalog()
	var out []queueInfo
	seen := map[string]bool{}
	add := func(name, act string, limit int, keyed bool) {
		if _, remote := queue.Name(name).Remote(); seen[name] || remote {
			return // remote workers lease these over HTTP
		}
		if w.cfg.Queues != nil {
			ok := false
			for _, q := range w.cfg.Queues {
				if q == name || q == act {
					ok = true
				}
			}
			if !ok {
				return
			}
		}
		seen[name] = true
		spec, _ := cat.Spec(act)
		// A step's own queue with a claim or a limit is never held: they are checked in
		// transactions of their own before the action runs.
		brief := spec.Brief && w.e.Store().Capabilities().HeldLeases && !keyed
		out = append(out, queueInfo{name: name, limit: limit, brief: brief})
	}
	limitOf := func(act string) int {
		if n := w.cfg.Concurrency[act]; n > 0 {
			return n
		}
		spec, _ := cat.Spec(act)
		if spec.Concurrency > 0 {
			return spec.Concurrency
		}
		return 4
	}
	for _, name := range cat.Names() {
		add(w.e.Queue(&workflow.Definition{}, &workflow.Step{Action: name}), name, limitOf(name), false)
	}
	if wfs, err := w.e.Store().WorkflowList(ctx); err == nil {
		for _, wf := range wfs {
			def, _, err := w.e.Definition(ctx, wf.Name, wf.Version)
			if err != nil {
				continue
			}
			for _, s := range def.Steps {
				if _, ok := cat.Lookup(s.Action); !ok {
					continue
				}
				keyed := s.Claim != nil || s.Limit != nil
				switch {
				case s.Concurrency > 0:
					add(w.e.Queue(def, s), s.Action, min(s.Concurrency, limitOf(s.Action)), keyed)
				case keyed:
					add(w.e.Queue(def, s), s.Action, limitOf(s.Action), true)
				}
			}
		}
	}
	return out
}

func (w *Worker) dispatch(ctx context.Context) {
	queues := w.queues(ctx)
	refresh := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if time.Since(refresh) > 5*time.Second {
			queues, refresh = w.queues(ctx), time.Now()
		}
		// No second look after a lease: a queue that filled its free slots has none left, and
		// one that got fewer tasks than it asked for had no more ready ones. What changes that
		// (a finished task, new ready work) calls Wake, buffered while this leases.
		leased, err := w.lease(ctx, queues)
		leased += w.hold(ctx, queues)
		if err != nil && ctx.Err() == nil {
			w.log.Error("lease tasks", "error", err)
		}
		wait := w.cfg.PollInterval
		// The next backoff's end matters only to a worker that found nothing (the query is
		// milliseconds on Postgres with many ready tasks).
		if leased == 0 {
			if next, err := w.e.Store().TaskNextRunAfter(ctx); err == nil && !next.IsZero() {
				if d := time.Until(next); d > 0 && d < wait {
					wait = d
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
			queues, refresh = w.queues(ctx), time.Now()
			w.mu.Lock()
			clear(w.idle) // a poll: tasks may have become ready elsewhere (another process, a backoff ending)
			w.mu.Unlock()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// lease leases tasks for every queue with free slots that is not idle, in one statement, starts
// them and returns how many.
func (w *Worker) lease(ctx context.Context, queues []queueInfo) (int, error) {
	type want struct {
		q    queueInfo
		free int
	}
	var wants []want
	w.mu.Lock()
	if w.inflight == nil {
		w.mu.Unlock()
		return 0, nil
	}
	for _, q := range queues {
		if q.brief {
			continue // see hold
		}
		// A busy queue waits until a quarter of its slots are free: its running tasks keep the
		// machine busy meanwhile, and one lease (one statement, one turn of the writer) then
		// starts several tasks instead of one per finished task.
		running := w.inflight[q.name]
		if free := q.limit - running; free > 0 && (running == 0 || free*4 >= q.limit) {
			if !w.idle[q.name] {
				wants = append(wants, want{q, free})
			}
		}
	}
	all := w.wakeAll
	gens := make([]uint64, len(wants))
	for i, wt := range wants {
		gens[i] = w.wakeQueue[wt.q.name]
	}
	w.mu.Unlock()
	if len(wants) == 0 {
		return 0, nil
	}
	p := store.TaskLeaseManyParams{Owner: w.cfg.Owner, Queues: make([]string, len(wants)), Limits: make([]int, len(wants))}
	for i, wt := range wants {
		p.Queues[i], p.Limits[i] = wt.q.name, wt.free
	}
	var got []*store.Task
	// With one writer (SQLite) the leased tasks' items and cached conversions are read in the
	// lease's own transaction: a statement there costs less than a read transaction of its own
	// on a reader. On Postgres that would lengthen the one writer's turn; readers run beside it.
	local := !w.e.Store().Capabilities().ConcurrentWrites
	items := map[int64]*store.Item{}
	pre := map[int64]*prefetch{}
	w.mu.Lock()
	seq := w.landSeq
	w.mu.Unlock()
	// Through the writer, on every store: leasing beside it (Postgres) let a worker hold hundreds
	// of tasks while their results queued behind it, and a killed worker's crowd of expired
	// leases, reclaimed while others deadlocked on their items, stalled TestLeaderKilled.
	err := w.commit.do(ctx, func(t *engine.Tx) error {
		p.Now = t.Now() // the transaction's time: after every commit that made these tasks ready
		p.LeaseUntil = p.Now.Add(w.cfg.LeaseDuration)
		var err error
		if got, err = t.Executor().TaskLeaseMany(ctx, p); err != nil || !local || len(got) == 0 {
			return err
		}
		clear(items)
		clear(pre)
		w.prefetch(ctx, t.Executor(), got, seq, items, pre)
		return nil
	})
	if err != nil {
		return 0, err
	}
	counts := map[string]int{}
	for _, t := range got {
		counts[t.Queue]++
	}
	w.mu.Lock()
	if w.wakeAll == all {
		for i, wt := range wants {
			switch {
			case counts[wt.q.name] == wt.free:
				delete(w.idle, wt.q.name) // there may be more
			case w.wakeQueue[wt.q.name] == gens[i]:
				w.idle[wt.q.name] = true
			}
		}
	}
	if w.inflight == nil { // stopping: give them back
		for _, t := range got {
			w.owned[t.ID] = struct{}{}
		}
		w.mu.Unlock()
		for _, t := range got {
			w.release(t)
		}
		return 0, nil
	}
	for _, t := range got {
		w.inflight[t.Queue]++
		w.owned[t.ID] = struct{}{}
	}
	w.mu.Unlock()
	// Read the leased tasks' items in one statement; a task whose item is not here (an error)
	// reads its own.
	if !local && len(got) > 1 {
		ids := make([]int64, len(got))
		for i, t := range got {
			ids[i] = t.ItemID
		}
		its, err := w.e.Store().ItemGetMany(ctx, ids)
		if err != nil {
			w.log.Warn("read leased items", "error", err)
		}
		for _, it := range its {
			items[it.ID] = it
		}
	}
	for _, t := range got {
		w.tasks.Add(1)
		go w.run(ctx, t, items[t.ItemID], pre[t.ID])
	}
	return len(got), nil
}

func (w *Worker) release(t *store.Task) {
	err := w.commit.enqueue(context.Background(), op{fn: func(tx *engine.Tx) error {
		_, err := tx.Executor().TaskFinish(context.Background(), store.TaskFinishParams{ID: t.ID, Attempt: t.Attempt, State: store.TaskReady, Refund: true, Now: tx.Now()})
		return err
	}, after: func(error) { w.disown(t.ID) }})
	if err != nil {
		w.disown(t.ID)
	}
}

// disown forgets a task whose outcome is committed (or given up): its lease is no longer renewed.
func (w *Worker) disown(id int64) {
	w.mu.Lock()
	delete(w.owned, id)
	w.mu.Unlock()
}

// renewal returns what renew extends: the tasks this worker owns and its held batches' records.
func (w *Worker) renewal(until time.Time) store.TaskRenewLeasesParams {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := store.TaskRenewLeasesParams{Owner: w.cfg.Owner, Until: until,
		TaskIDs: make([]int64, 0, len(w.owned)), HeldLeaseIDs: make([]int64, 0, len(w.records))}
	for id := range w.owned {
		p.TaskIDs = append(p.TaskIDs, id)
	}
	for id := range w.records {
		p.HeldLeaseIDs = append(p.HeldLeaseIDs, id)
	}
	return p
}

// renew extends this worker's leases in one statement every third of the lease: those of the
// tasks it owns (running, or with a result waiting to be committed) and of its held batches,
// named by id — never every lease of its owner name, which would keep alive forever a task
// whose result could not be committed. Expired leases are reclaimed by the maintenance leader
// (package maintenance), not here.
func (w *Worker) renew(ctx context.Context) {
	tick := time.NewTicker(w.cfg.LeaseDuration / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := w.renewal(w.e.Now().Add(w.cfg.LeaseDuration))
		if len(p.TaskIDs) == 0 && len(p.HeldLeaseIDs) == 0 {
			continue
		}
		var err error
		if w.e.Store().Capabilities().ConcurrentWrites {
			// Not behind the writer: when its queue is long (results waiting, a deadlock being
			// retried) the leases of tasks whose results wait in it would expire, the leader
			// would reclaim them, and their results would be thrown away — more work, longer
			// queues (TestLeaderKilled saw that storm once).
			_, err = w.e.Store().TaskRenewLeases(ctx, p)
		} else {
			err = w.commit.do(ctx, func(t *engine.Tx) error {
				_, err := t.Executor().TaskRenewLeases(ctx, p)
				return err
			})
		}
		if err != nil && ctx.Err() == nil {
			w.log.Error("renew leases", "error", err)
		} else if err == nil {
			w.cfg.Metrics.LeasesRenewed(len(p.TaskIDs) + len(p.HeldLeaseIDs))
		}
	}
}

func (w *Worker) done(t *store.Task) {
	w.mu.Lock()
	if w.inflight != nil {
		w.inflight[t.Queue]--
	}
	delete(w.running, t.ID)
	w.mu.Unlock()
	w.tasks.Done()
	w.kick() // a slot is free
}

// run runs one leased task (it is the task's item when already read) and queues its result.
func (w *Worker) run(ctx context.Context, t *store.Task, it *store.Item, pf *prefetch) {
	defer w.done(t)
	res := &engine.Result{Task: t, Owner: w.cfg.Owner, Started: w.e.Now()}
	ctx, span := w.traceAttempt(ctx, t)
	defer func() { tracing.End(span, res.Err) }()
	var fin finishing
	begin := time.Now()
	err := w.execute(ctx, t, it, res, &fin, pf)
	if errors.Is(err, errParked) {
		w.disown(t.ID) // parked in the claim's transaction: no lease, nothing to commit
		return
	}
	if errors.Is(err, errStopping) {
		w.release(t)
		if fin.flight != "" {
			w.land(fin.flight)
		}
		return
	}
	setErr(res, err)
	w.observe(t, res, begin)
	if err != nil && ctx.Err() == nil {
		w.log.Debug("task attempt failed", "task_id", t.ID, "job_id", t.JobID, "item_id", t.ItemID, "action", t.Action, "attempt", t.Attempt, "error", err)
	}
	apply := w.applyResult(ctx, res, &fin)
	if fin.flight == "" {
		if err := w.commit.submitAfter(context.WithoutCancel(ctx), apply, func(err error) { w.committed(ctx, res, err) }); err != nil {
			w.committed(ctx, res, err)
		}
		return
	}
	// Waiters for the same conversion read the cache once the flight lands: land after the commit.
	w.committed(ctx, res, w.commit.doLazy(context.WithoutCancel(ctx), apply))
	w.land(fin.flight)
}

// committed ends the worker's part in a result whose transaction ended with err. A result that
// could not be committed (its effects failed to apply: metadata that is not JSON, a
// nondeterministic child; or the batch failed) becomes the task's outcome in a transaction of
// its own: failed with the reason, none of its effects. If even that fails the lease is no
// longer renewed, so the maintenance leader reclaims the task as a lost attempt.
func (w *Worker) committed(ctx context.Context, res *engine.Result, err error) {
	defer w.disown(res.Task.ID)
	if err == nil {
		return
	}
	t := res.Task
	fail := engine.FailedCommit(res, err)
	log := w.log.With("job_id", t.JobID, "item_id", t.ItemID, "task_id", t.ID, "action", t.Action, "attempt", t.Attempt)
	log.Error("commit result; the task fails", "error", err)
	if ferr := w.commit.alone(context.WithoutCancel(ctx), func(tx *engine.Tx) error { return tx.Apply(fail) }); ferr != nil {
		log.Error("commit the failure of a result that could not be committed; its lease will expire", "error", ferr)
	}
}

// observe records an attempt of t that began at begin: how long the task waited, from becoming
// ready (or the end of its retry backoff) to its lease, and how long it ran.
func (w *Worker) observe(t *store.Task, res *engine.Result, begin time.Time) {
	if w.cfg.Metrics == nil {
		return
	}
	ready := t.RunAfter
	if ready.IsZero() {
		ready = t.CreatedAt
	}
	w.cfg.Metrics.TaskAttempt(t.Action, res.Started.Sub(ready), time.Since(begin), res.Err != nil)
}

// setErr records the attempt's error in its result, with the stack of a panic.
func setErr(res *engine.Result, err error) {
	res.Err = err
	var pe *action.PanicError
	if errors.As(err, &pe) {
		res.Stack = pe.Stack
	}
}

// applyResult returns the op that commits a task's result: its cache entry, when it made one,
// ahead of it in the same transaction.
func (w *Worker) applyResult(ctx context.Context, res *engine.Result, fin *finishing) func(tx *engine.Tx) error {
	return func(tx *engine.Tx) error {
		if fin.cacheValue != nil {
			if err := tx.Executor().CachePut(context.WithoutCancel(ctx), fin.flight, fin.cacheValue, tx.Now()); err != nil {
				return err
			}
		}
		return tx.Apply(res)
	}
}

// finishing is what a task's result commits with, filled in by execute.
type finishing struct {
	// flight is the conversion cache key whose flight this task owns, landed after the commit;
	// cacheValue, when set, is the entry cached under it.
	flight     string
	cacheValue []byte
}

var errStopping = errors.New("worker stopping")

func (w *Worker) execute(ctx context.Context, t *store.Task, it *store.Item, res *engine.Result, fin *finishing, pf *prefetch) (err error) {
	act, step, err := w.stepOf(ctx, t)
	if err != nil {
		return err
	}
	if it == nil {
		if it, err = w.e.Store().ItemGet(ctx, t.ItemID); err != nil {
			return err
		}
	}
	if step.Claim != nil || step.Limit != nil {
		if done, err := w.keyed(ctx, t, step, it, res); done || err != nil {
			return err
		}
	}
	spec := act.Spec()
	timeout := time.Duration(step.Timeout)
	if timeout <= 0 {
		timeout = spec.Timeout
	}
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if t.Held {
		// A held batch keeps its tasks' rows locked while each runs: a brief action that
		// hangs gives up within a lease, not the default ten minutes.
		timeout = min(timeout, w.cfg.LeaseDuration)
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w.mu.Lock()
	w.running[t.ID] = cancel
	w.mu.Unlock()

	at := &action.Task{ID: t.ID, JobID: t.JobID, Step: t.Step, Action: t.Action, Attempt: t.Attempt, With: step.With,
		Item: engine.ActionItem(it)}
	if at.With == nil {
		at.With = map[string]any{}
	}
	var tmp string
	at.OpenBlob = func(ctx context.Context) (io.ReadCloser, error) {
		if it.BlobSHA256 == "" {
			return nil, action.Permanentf("item %q has no content", it.Name)
		}
		return w.cfg.Blobs.Open(ctx, it.BlobSHA256)
	}
	at.BlobPath = func(ctx context.Context) (string, error) { return w.blobPath(ctx, it, &tmp) }
	mkTemp := func() (string, error) {
		if tmp == "" {
			d, err := os.MkdirTemp(w.cfg.TempDir, "sluice-task-")
			if err != nil {
				return "", err
			}
			tmp = d
		}
		return tmp, nil
	}
	defer func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}()
	if !spec.NoTempDir {
		if at.TempDir, err = mkTemp(); err != nil {
			return fmt.Errorf("temp dir: %w", err)
		}
	}
	out := &output{w: w, task: t, spec: spec, ctx: tctx, result: res, itemName: it.Name,
		staged: make(chan struct{}, maxStaged)}
	if it.NChildren > 0 {
		kids, err := w.e.Store().ItemListChildren(ctx, it.ID, t.Step)
		if err != nil {
			return err
		}
		out.existing = make(map[int]*store.Item, len(kids))
		for _, k := range kids {
			out.existing[k.Ordinal] = k
		}
	}
	key := ""
	if spec.Cacheable && it.BlobSHA256 != "" {
		key = cacheKey(spec, step, it)
		if hit, err := w.fromCache(tctx, key, out, t.Attempt <= 1, pf); hit || err != nil {
			if hit {
				w.count(t.Action, true)
			}
			if err == nil {
				out.pending.Wait()
				err = out.failed()
			}
			return err
		}
		fin.flight = key // landed by run, after the result commits
		out.record = &effects{Parent: it.Name}
	}
	w.count(t.Action, false)
	err = w.safeRun(tctx, act, at, out)
	out.mu.Lock()
	out.returned = true
	out.mu.Unlock()
	out.pending.Wait()
	slices.SortFunc(out.leftover, func(a, b *engine.NewChild) int { return a.Ordinal - b.Ordinal })
	res.Children = out.leftover
	if cerr := out.failed(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil && tctx.Err() != nil && ctx.Err() == nil {
		if errors.Is(tctx.Err(), context.DeadlineExceeded) {
			res.TimedOut = true
			err = fmt.Errorf("%s timed out after %s", t.Action, timeout)
		}
	}
	if err != nil && ctx.Err() != nil {
		return errStopping
	}
	if key != "" && (err == nil || action.IsPermanent(err)) {
		fin.cacheValue = w.cacheEntry(out, err)
	}
	return err
}

// jobWorkflow returns the job's workflow name and version (immutable, so cached).
func (w *Worker) jobWorkflow(ctx context.Context, jobID int64) (string, int, error) {
	w.mu.Lock()
	jw, ok := w.jobs[jobID]
	w.mu.Unlock()
	if ok {
		return jw.name, jw.version, nil
	}
	job, err := w.e.Store().JobGet(ctx, jobID)
	if err != nil {
		return "", 0, err
	}
	w.mu.Lock()
	if len(w.jobs) > 10000 {
		clear(w.jobs)
	}
	w.jobs[jobID] = jobWF{job.WorkflowName, job.WorkflowVersion, job.CreatedAt}
	w.mu.Unlock()
	return job.WorkflowName, job.WorkflowVersion, nil
}

// stepOf returns the task's action and its step in the job's workflow.
func (w *Worker) stepOf(ctx context.Context, t *store.Task) (action.Action, *workflow.Step, error) {
	act, ok := w.e.Catalog().Lookup(t.Action)
	if !ok {
		return nil, nil, action.Permanentf("unknown action %q", t.Action)
	}
	wfName, wfVersion, err := w.jobWorkflow(ctx, t.JobID)
	if err != nil {
		return nil, nil, err
	}
	def, _, err := w.e.Definition(ctx, wfName, wfVersion)
	if err != nil {
		return nil, nil, err
	}
	step := def.Step(t.Step)
	if step == nil {
		return nil, nil, action.Permanentf("step %q not in workflow %q", t.Step, def.Name)
	}
	return act, step, nil
}

type jobWF struct {
	name    string
	version int
	created time.Time // identifies the job's trace (package tracing)
}

func (w *Worker) safeRun(ctx context.Context, act action.Action, t *action.Task, out *output) error {
	return action.Safe(func() error { return act.Run(ctx, t, out) })
}

func (w *Worker) blobPath(ctx context.Context, it *store.Item, tmp *string) (string, error) {
	if it.BlobSHA256 == "" {
		return "", action.Permanentf("item %q has no content", it.Name)
	}
	if lp, ok := w.cfg.Blobs.(blob.LocalPather); ok {
		return lp.LocalPath(it.BlobSHA256)
	}
	if *tmp == "" {
		d, err := os.MkdirTemp(w.cfg.TempDir, "sluice-task-")
		if err != nil {
			return "", err
		}
		*tmp = d
	}
	f, err := os.CreateTemp(*tmp, "input-*.blob")
	if err != nil {
		return "", err
	}
	defer f.Close()
	r, err := w.cfg.Blobs.Open(ctx, it.BlobSHA256)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if _, err := io.Copy(f, r); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

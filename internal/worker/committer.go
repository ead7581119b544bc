package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/tracing"
)

// op is one unit of work for the committer: fn runs inside a shared transaction. done, when
// non-nil, receives fn's error (or the batch's commit error) after the commit; after, when
// non-nil, is called with it instead, on the committer's goroutine (it must not wait for the
// committer).
type op struct {
	fn func(t *engine.Tx) error
	// result, when set, is the task's result fn commits (fn is its apply): see applyOps.
	result *resultOp
	done   chan error
	after  func(error)
	// lazy marks an op nothing waits on urgently (a task's result, a child): it may wait for
	// the committer's linger. A lease, a renewal or an API write is committed at once.
	lazy bool
	// exclusive commits with no other lane's transaction open (see committer.excl).
	exclusive bool
	// span is the span of whoever queued the op (a task attempt), which its commit links to.
	span trace.SpanContext
}

// committer funnels every write of this process through a few goroutines (lanes) that commit
// them in batches (group commit): while one transaction commits, the next batch accumulates.
// With one SQLite writer (one lane) this turns thousands of small writes per second into a few
// dozen transactions. On Postgres two lanes overlap one batch's statements with the other's
// wait for the disk; ops in flight at once touch different tasks, and two transactions that
// meet on a row (a parent, the job) take turns on its lock.
type committer struct {
	e   *engine.Engine
	log *slog.Logger
	ops chan op
	// first holds ops that go ahead of the queue (lease renewals): a lane takes them before
	// any op of ops, so they commit in the next batch however long the queue.
	first chan op
	max   int
	// linger, when set, is how long a small batch of lazy ops waits for more while the
	// committer is busy (its last commit ended less than busyGap ago): a transaction's fixed
	// cost (the pages every commit writes again, the job's row read) is then shared by more
	// ops. An idle committer never waits, nor does a batch with an urgent op, and an urgent op
	// arriving ends the wait.
	linger time.Duration
	// lanes is how many goroutines commit batches at once: one for SQLite's single writer;
	// several on Postgres, where one batch's statements run while another's commit waits for
	// the disk.
	lanes int
	// excl is held shared by a lane while it runs a batch and exclusively by a batch with an
	// exclusive op: the writes of other components (Worker.Do: a job's retry, the remote
	// workers' protocol) then see no half-done transaction of this process, as with one lane.
	// A retry reopening a failed job's items, for one, must not interleave with a result that
	// read the job as failed and settled an item without its collector.
	excl sync.RWMutex
	wg   sync.WaitGroup

	// Stopping (see stop): once closed is set no op is accepted; closing wakes the senders
	// blocked on a full queue, senders counts those between the check of closed and their
	// send, and stopped is closed once the lanes have exited and every op accepted has been
	// reported. An op is thus either refused or reported: nothing waits on a committer that
	// is gone.
	mu       sync.Mutex
	closed   bool
	closing  chan struct{}
	senders  sync.WaitGroup
	stopped  chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
}

// ErrStopped is the error of a write submitted to a worker that has stopped, or that was
// still queued when it stopped: it was not committed.
var ErrStopped = errors.New("worker stopped: the write was not committed")

// busyGap is how recent the last commit must be for the committer to count as busy.
const busyGap = 20 * time.Millisecond

func newCommitter(e *engine.Engine, log *slog.Logger, maxBatch int, linger time.Duration, lanes int) *committer {
	return &committer{e: e, log: log, ops: make(chan op, maxBatch*2), first: make(chan op, 16), max: maxBatch, linger: linger, lanes: max(lanes, 1),
		closing: make(chan struct{}), stopped: make(chan struct{})}
}

// start starts the lanes. They run until stop, whatever becomes of ctx: a write queued while
// the process shuts down (a result of a task that finished in the drain, a lease released) is
// still committed.
func (c *committer) start(ctx context.Context) {
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for range c.lanes {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.loop(ctx)
		}()
	}
}

// submit queues fn; it blocks when the queue is full (backpressure), or returns ctx's error.
func (c *committer) submit(ctx context.Context, fn func(t *engine.Tx) error, done chan error) error {
	return c.enqueue(ctx, op{fn: fn, done: done})
}

// submitLazy is submit for an op that may wait for the linger (see op.lazy).
func (c *committer) submitLazy(ctx context.Context, fn func(t *engine.Tx) error, done chan error) error {
	return c.enqueue(ctx, op{fn: fn, done: done, lazy: true})
}

// submitAfter queues fn as a lazy op and calls after with its outcome once it committed or
// failed alone (see op.after).
func (c *committer) submitAfter(ctx context.Context, fn func(t *engine.Tx) error, after func(error)) error {
	return c.enqueue(ctx, op{fn: fn, after: after, lazy: true})
}

// submitResult is submitAfter for a task's result.
func (c *committer) submitResult(ctx context.Context, r *resultOp, after func(error)) error {
	return c.enqueue(ctx, op{fn: r.apply, result: r, after: after, lazy: true})
}

// doLazy is do for an op that may wait for the linger.
func (c *committer) doLazy(ctx context.Context, fn func(t *engine.Tx) error) error {
	return c.await(ctx, op{fn: fn, lazy: true})
}

func (c *committer) enqueue(ctx context.Context, o op) error {
	return c.send(ctx, c.ops, o)
}

// send puts o on queue q, unless the committer is stopping ([ErrStopped]) or ctx ends.
func (c *committer) send(ctx context.Context, q chan op, o op) error {
	o.span = trace.SpanContextFromContext(ctx)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrStopped
	}
	c.senders.Add(1)
	c.mu.Unlock()
	defer c.senders.Done()
	select {
	case q <- o:
		return nil
	case <-c.closing:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do queues fn and waits for its commit.
func (c *committer) do(ctx context.Context, fn func(t *engine.Tx) error) error {
	return c.await(ctx, op{fn: fn})
}

// doFirst is do for an op that goes ahead of every queued op: a renewal of leases, which a
// queue long enough (results and children waiting on a loaded machine) would otherwise delay
// past the leases' end.
func (c *committer) doFirst(ctx context.Context, fn func(t *engine.Tx) error) error {
	done := make(chan error, 1)
	if err := c.send(ctx, c.first, op{fn: fn, done: done}); err != nil {
		return err
	}
	return c.wait1(ctx, done)
}

// doExclusive is do for an op that commits with no other lane's transaction open.
func (c *committer) doExclusive(ctx context.Context, fn func(t *engine.Tx) error) error {
	return c.await(ctx, op{fn: fn, exclusive: true})
}

// await queues o and waits for its commit.
func (c *committer) await(ctx context.Context, o op) error {
	done := make(chan error, 1)
	o.done = done
	if err := c.enqueue(ctx, o); err != nil {
		return err
	}
	return c.wait1(ctx, done)
}

// wait1 waits for the outcome of an accepted op. Every accepted op is reported before stopped
// is closed; the check of stopped is a guard, so that no caller can wait forever on a
// committer that is gone.
func (c *committer) wait1(ctx context.Context, done chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stopped:
		select {
		case err := <-done:
			return err
		default:
			return ErrStopped
		}
	}
}

func (c *committer) loop(ctx context.Context) {
	batch := make([]op, 0, c.max)
	var lastEnd time.Time
	var timer *time.Timer
	for {
		var first op
		select {
		case first = <-c.first:
		default:
			select {
			case first = <-c.first:
			case first = <-c.ops:
			case <-ctx.Done():
				c.drain()
				return
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < c.max {
			select {
			case o := <-c.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		lazy := true
		for _, o := range batch {
			lazy = lazy && o.lazy
		}
		if lazy && c.linger > 0 && len(batch) < c.max/4 && time.Since(lastEnd) < busyGap {
			if timer == nil {
				timer = time.NewTimer(c.linger)
			} else {
				timer.Reset(c.linger)
			}
		linger:
			for len(batch) < c.max {
				select {
				case o := <-c.ops:
					batch = append(batch, o)
					if !o.lazy {
						break linger
					}
				case <-timer.C:
					break linger
				case <-ctx.Done():
					break linger
				}
			}
			timer.Stop()
		}
		c.commit(context.WithoutCancel(ctx), batch)
		lastEnd = time.Now()
	}
}

// drain commits what is queued when the committer stops, so finished work is not redone.
func (c *committer) drain() {
	for {
		select {
		case o := <-c.first:
			c.commit(context.Background(), []op{o})
		case o := <-c.ops:
			c.commit(context.Background(), []op{o})
		default:
			return
		}
	}
}

func (c *committer) commit(ctx context.Context, batch []op) {
	exclusive := false
	for _, o := range batch {
		exclusive = exclusive || o.exclusive
	}
	if exclusive {
		c.excl.Lock()
	} else {
		c.excl.RLock()
	}
	err := c.run(ctx, batch)
	if exclusive {
		c.excl.Unlock()
	} else {
		c.excl.RUnlock()
	}
	if err == nil {
		for _, o := range batch {
			o.report(nil)
		}
		return
	}
	if len(batch) == 1 {
		if batch[0].done == nil && batch[0].after == nil {
			c.log.Error("commit", "error", err)
		}
		batch[0].report(err)
		return
	}
	// One op failed the whole batch: isolate it by committing each op on its own. Ops are
	// idempotent writes, so running the good ones again is safe.
	for _, o := range batch {
		c.commit(ctx, []op{o})
	}
}

// report hands the op's outcome to whoever waits for it.
func (o op) report(err error) {
	if o.done != nil {
		o.done <- err
	}
	if o.after != nil {
		o.after(err)
	}
}

// asLane admits a brief batch (see Worker.runBrief) as one of the committer's lanes until it calls
// release: excl is held shared meanwhile, so that an exclusive op (Worker.Do) waits for the
// batch as for a lane's transaction. The batch takes no other lock of the committer and queues
// nothing; it must not wait for the committer's queue while it holds rows.
func (c *committer) asLane() (release func()) {
	c.excl.RLock()
	return c.excl.RUnlock
}

// alone commits fn in a transaction of its own, beside the lanes as a lane would (taking excl
// shared), retrying it as run does. A result whose batch failed commits its fallback so: the
// caller may be a lane, which must not wait for the committer's queue.
func (c *committer) alone(ctx context.Context, fn func(t *engine.Tx) error) error {
	c.excl.RLock()
	defer c.excl.RUnlock()
	return c.run(ctx, []op{{fn: fn}})
}

// run commits the batch in one transaction. A transaction the database aborted for another's
// sake (a deadlock between two lanes or two processes) wrote nothing: it runs the same batch
// again, up to maxRetries times. Ops are idempotent writes.
func (c *committer) run(ctx context.Context, batch []op) (err error) {
	ctx, span := traceCommit(ctx, batch)
	defer func() { tracing.End(span, err) }()
	for try := 0; ; try++ {
		err = c.e.Run(ctx, func(t *engine.Tx) error { return applyOps(t, batch) })
		if err == nil || !errors.Is(err, store.ErrRetry) {
			break
		}
		if errors.Is(err, store.ErrUnavailable) {
			// The database is away (a restart, a failover): wait for it, with backoff, up to
			// unavailableFor in all, instead of failing the batch's tasks.
			if try >= unavailableTries {
				break
			}
			c.log.Warn("database unavailable; the commit waits for it", "ops", len(batch), "try", try+1, "error", err)
			select {
			case <-ctx.Done():
				return err
			case <-time.After(min(100*time.Millisecond<<min(try, 5), 2*time.Second)):
			}
			continue
		}
		if try >= maxRetries {
			break
		}
		c.log.Debug("commit aborted by the database; again", "ops", len(batch), "try", try+1, "error", err)
	}
	return err
}

// applyOps runs the batch's ops in order, except that the results of result ops that follow
// one another are applied together, once the last of them is reached (engine.Tx.ApplyAll: their
// children recorded in one statement, not one or two per result); what each writes ahead of
// its result (a cache entry) is written as it is reached.
func applyOps(t *engine.Tx, batch []op) error {
	var rs []*engine.Result
	for i, o := range batch {
		r := o.result
		if r == nil {
			if err := o.fn(t); err != nil {
				return err
			}
			continue
		}
		if !r.skipped() {
			if r.before != nil {
				if err := r.before(t); err != nil {
					return err
				}
			}
			rs = append(rs, r.res)
		}
		if i+1 < len(batch) && batch[i+1].result != nil {
			continue // the next one is a result too
		}
		if len(rs) > 0 {
			if err := t.ApplyAll(rs); err != nil {
				return err
			}
			rs = rs[:0]
		}
	}
	return nil
}

// maxRetries bounds how many times a batch the database aborted is run again before its ops are
// committed one by one.
const maxRetries = 5

// unavailableTries bounds how many times a batch is run again while the database is unavailable:
// with the backoff (0.1 s doubling to 2 s), about a minute.
const unavailableTries = 35

// stop stops the committer: it refuses new ops, commits those already queued, waits for its lanes
// to exit, and reports [ErrStopped] to any op left. Safe to call more than once, and before start.
func (c *committer) stop() {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.closing)
		c.senders.Wait() // no op can be queued after this
		if c.cancel != nil {
			c.cancel() // the lanes commit what is queued (drain) and exit
		}
		c.wg.Wait()
		for { // left by lanes that never started, or exited on their own
			select {
			case o := <-c.first:
				o.report(ErrStopped)
			case o := <-c.ops:
				o.report(ErrStopped)
			default:
				close(c.stopped)
				return
			}
		}
	})
}

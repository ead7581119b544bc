package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
)

// op is one unit of work for the committer: fn runs inside a shared transaction. done, when
// non-nil, receives fn's error (or the batch's commit error) after the commit.
type op struct {
	fn   func(t *engine.Tx) error
	done chan error
	// lazy marks an op nothing waits on urgently (a task's result, a child): it may wait for
	// the committer's linger. A lease, a renewal or an API write is committed at once.
	lazy bool
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
	max int
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
	wg    sync.WaitGroup
}

// busyGap is how recent the last commit must be for the committer to count as busy.
const busyGap = 20 * time.Millisecond

func newCommitter(e *engine.Engine, log *slog.Logger, maxBatch int, linger time.Duration, lanes int) *committer {
	return &committer{e: e, log: log, ops: make(chan op, maxBatch*2), max: maxBatch, linger: linger, lanes: max(lanes, 1)}
}

func (c *committer) start(ctx context.Context) {
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

// doLazy is do for an op that may wait for the linger.
func (c *committer) doLazy(ctx context.Context, fn func(t *engine.Tx) error) error {
	done := make(chan error, 1)
	if err := c.submitLazy(ctx, fn, done); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) enqueue(ctx context.Context, o op) error {
	select {
	case c.ops <- o:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do queues fn and waits for its commit.
func (c *committer) do(ctx context.Context, fn func(t *engine.Tx) error) error {
	done := make(chan error, 1)
	if err := c.submit(ctx, fn, done); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) loop(ctx context.Context) {
	batch := make([]op, 0, c.max)
	var lastEnd time.Time
	var timer *time.Timer
	for {
		var first op
		select {
		case first = <-c.ops:
		case <-ctx.Done():
			c.drain()
			return
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
		case o := <-c.ops:
			c.commit(context.Background(), []op{o})
		default:
			return
		}
	}
}

func (c *committer) commit(ctx context.Context, batch []op) {
	errs := make([]error, len(batch))
	err := c.e.Run(ctx, func(t *engine.Tx) error {
		for i, o := range batch {
			if errs[i] = o.fn(t); errs[i] != nil {
				return errs[i]
			}
		}
		return nil
	})
	if err == nil {
		for _, o := range batch {
			if o.done != nil {
				o.done <- nil
			}
		}
		return
	}
	if len(batch) == 1 {
		if batch[0].done != nil {
			batch[0].done <- err
		} else {
			c.log.Error("commit", "error", err)
		}
		return
	}
	// One op failed the whole batch: isolate it by committing each op on its own. Ops are
	// idempotent writes, so running the good ones again is safe.
	for _, o := range batch {
		c.commit(ctx, []op{o})
	}
}

func (c *committer) wait() { c.wg.Wait() }

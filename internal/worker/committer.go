package worker

import (
	"context"
	"log/slog"
	"sync"

	"github.com/sluice-project/sluice/internal/engine"
)

// op is one unit of work for the committer: fn runs inside a shared transaction. done, when
// non-nil, receives fn's error (or the batch's commit error) after the commit.
type op struct {
	fn   func(t *engine.Tx) error
	done chan error
}

// committer funnels every write of this process through one goroutine that commits them in
// batches (group commit): while one transaction commits, the next batch accumulates. With one
// SQLite writer this turns thousands of small writes per second into a few dozen transactions.
type committer struct {
	e   *engine.Engine
	log *slog.Logger
	ops chan op
	max int
	wg  sync.WaitGroup
}

func newCommitter(e *engine.Engine, log *slog.Logger, maxBatch int) *committer {
	return &committer{e: e, log: log, ops: make(chan op, maxBatch*2), max: maxBatch}
}

func (c *committer) start(ctx context.Context) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.loop(ctx)
	}()
}

// submit queues fn; it blocks when the queue is full (backpressure), or returns ctx's error.
func (c *committer) submit(ctx context.Context, fn func(t *engine.Tx) error, done chan error) error {
	select {
	case c.ops <- op{fn: fn, done: done}:
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
		c.commit(context.WithoutCancel(ctx), batch)
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

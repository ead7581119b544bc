package cli

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/node"
	"github.com/sluice-project/sluice/internal/store"
)

// progressCounter counts a job's progress in the background for [watchJob]: one count at a time,
// each followed by a pause nine times as long as it took (at least 300ms), so the counting takes
// at most a tenth of one database connection however large the job. Its methods are safe for
// concurrent use.
type progressCounter struct {
	n     *node.Node
	jobID int64
	count func(context.Context) error // more counts of the line's own, after Progress; may be nil

	mu   sync.Mutex
	last *engine.Progress
	err  error
	busy sync.Mutex // held while counting: run and the final count take turns
	done chan struct{}
}

func newProgressCounter(n *node.Node, jobID int64, count func(context.Context) error) *progressCounter {
	return &progressCounter{n: n, jobID: jobID, count: count, done: make(chan struct{})}
}

// run counts until ctx ends.
func (c *progressCounter) run(ctx context.Context) {
	defer close(c.done)
	for {
		t0 := time.Now()
		_, err := c.once(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(300*time.Millisecond, 9*time.Since(t0))):
		}
	}
}

// once counts now and keeps the result as the latest.
func (c *progressCounter) once(ctx context.Context) (*engine.Progress, error) {
	c.busy.Lock()
	defer c.busy.Unlock()
	p, err := c.n.Engine.Progress(ctx, c.jobID)
	if err == nil && c.count != nil {
		err = c.count(ctx)
	}
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.last = p
	c.mu.Unlock()
	cp := *p
	return &cp, nil
}

// latest returns a copy of the latest count (nil before the first) or the error that ended the
// counting.
func (c *progressCounter) latest() (*engine.Progress, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if c.last == nil {
		return nil, nil
	}
	cp := *c.last
	return &cp, nil
}

// Package dbclock keeps a process's clock on the database's time. Leases and deadlines are
// instants written by one process and compared by others (a lease's end against a reaper's
// "now"): read from each machine's own clock, a worker whose clock runs five minutes fast would
// reclaim live leases of the others, and one five minutes slow would keep expired ones alive.
// A [Clock] measures the offset between the local clock and the database's clock_timestamp()
// and adds it to every reading, so every process that shares the database reads one time, to
// within half a round trip.
//
// Times are still passed into SQL from Go (tests control them); only where they come from
// changes.
package dbclock

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Source reads the database's current time. The PostgreSQL store implements it; an embedded
// store, on the machine it runs on, has no other time than the local clock.
type Source interface {
	DatabaseNow(ctx context.Context) (time.Time, error)
}

// Config configures a [Clock].
type Config struct {
	Source Source
	// Local is the machine's clock. Defaults to LocalClock (time.Now, or in a test's skewed
	// build time.Now shifted).
	Local  func() time.Time
	Logger *slog.Logger
	// Interval is how often the offset is measured again while the clock runs, so that a local
	// clock that drifts or is stepped is followed. Defaults to 30s.
	Interval time.Duration
	// Warn is the offset above which a measurement is logged as a warning (the machine's clock
	// needs NTP). Defaults to 2s.
	Warn time.Duration
}

// Clock is the local clock corrected to the database's time. It is safe for concurrent use;
// until its first [Clock.Sync] it reads the local clock unchanged.
type Clock struct {
	cfg       Config
	log       *slog.Logger
	offset    atomic.Int64 // nanoseconds to add to the local clock
	warned    atomic.Bool
	startOnce sync.Once
	stopOnce  sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
}

// New returns a clock reading cfg.Source's time. Call [Clock.Sync] before relying on it.
func New(cfg Config) *Clock {
	if cfg.Local == nil {
		cfg.Local = LocalClock()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Warn <= 0 {
		cfg.Warn = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Clock{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
}

// Now returns the database's current time as this process estimates it, in UTC.
func (c *Clock) Now() time.Time {
	return c.cfg.Local().Add(time.Duration(c.offset.Load())).UTC()
}

// Offset returns the last measured offset: the database's time minus the local clock's.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// samples is how many readings a Sync takes; the one with the shortest round trip wins, as it
// bounds the error best (half its round trip).
const samples = 3

// Sync measures the offset now. It returns the database's error if no reading succeeded, and
// then keeps the previous offset.
func (c *Clock) Sync(ctx context.Context) error {
	var best, rtt time.Duration
	var err error
	ok := false
	for range samples {
		t0 := c.cfg.Local()
		db, e := c.cfg.Source.DatabaseNow(ctx)
		t1 := c.cfg.Local()
		if e != nil {
			err = e
			continue
		}
		rt := t1.Sub(t0)
		if !ok || rt < rtt {
			// The database read its clock somewhere in the round trip: assume the middle.
			best, rtt, ok = db.Sub(t0.Add(rt/2)), rt, true
		}
	}
	if !ok {
		return err
	}
	c.offset.Store(int64(best))
	off := best.Abs() > c.cfg.Warn
	if off && !c.warned.Swap(true) {
		c.log.Warn("this machine's clock is off the database's; leases and deadlines use the database's time (set up NTP)",
			"offset", best.Round(time.Millisecond).String(), "round_trip", rtt.Round(time.Microsecond).String())
	} else if !off {
		c.warned.Store(false)
	}
	return nil
}

// Start measures the offset again every Interval until [Clock.Stop]. Calling it again does
// nothing. A failed measurement keeps the last offset (the database may be failing over).
func (c *Clock) Start(ctx context.Context) {
	c.startOnce.Do(func() {
		ctx, c.cancel = context.WithCancel(ctx)
		go func() {
			defer close(c.done)
			t := time.NewTicker(c.cfg.Interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					_ = c.Sync(ctx)
				}
			}
		}()
	})
}

// Stop stops the measurements Start began and waits for them. It is idempotent.
func (c *Clock) Stop() {
	c.stopOnce.Do(func() {
		c.startOnce.Do(func() { close(c.done) }) // never started: nothing to wait for
		if c.cancel != nil {
			c.cancel()
		}
		<-c.done
	})
}

package scale

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// AutoscalerConfig configures an [Autoscaler].
type AutoscalerConfig struct {
	// Reader reads the queues; Set applies a decision (a worker's SetConcurrency). Required.
	Reader Reader
	Set    func(n int)
	// Min and Max bound the slots; Min is at least 1 and Max at least Min.
	Min, Max int
	// Actions are the actions the worker runs, whose queues count; empty counts every queue.
	Actions []string
	// Interval is how often it decides. Defaults to 5s.
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Autoscaler sets a worker's slots from the scaling signal every Interval: [Decide] of the
// recommendations ([Recommend]) of the queues its actions serve. It starts at Min. It is safe
// for concurrent use.
type Autoscaler struct {
	cfg AutoscalerConfig

	mu      sync.Mutex
	current int
}

// NewAutoscaler returns an autoscaler and applies its first decision, Min.
func NewAutoscaler(cfg AutoscalerConfig) *Autoscaler {
	if cfg.Reader == nil || cfg.Set == nil {
		panic("scale: AutoscalerConfig needs Reader and Set")
	}
	cfg.Min = max(cfg.Min, 1)
	cfg.Max = max(cfg.Max, cfg.Min)
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Autoscaler{cfg: cfg, current: cfg.Min}
	cfg.Set(cfg.Min)
	return a
}

// Current returns the slots last decided.
func (a *Autoscaler) Current() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current
}

// Step reads the queues once and applies the decision, returning it.
func (a *Autoscaler) Step(ctx context.Context) (int, error) {
	qs, err := Read(ctx, a.cfg.Reader, a.cfg.Now().UTC())
	if err != nil {
		return a.Current(), err
	}
	rec := Total(qs, a.cfg.Actions)
	a.mu.Lock()
	prev := a.current
	a.current = Decide(prev, a.cfg.Min, a.cfg.Max, rec)
	next := a.current
	a.mu.Unlock()
	if next != prev {
		a.cfg.Set(next)
		a.cfg.Logger.Info("autoscale", "slots", next, "was", prev, "recommended_workers", rec)
	}
	return next, nil
}

// Run decides every Interval until ctx ends; a failed read is logged and decided on next time.
func (a *Autoscaler) Run(ctx context.Context) {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := a.Step(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("autoscale: read the queues", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

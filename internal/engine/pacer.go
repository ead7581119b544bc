package engine

import (
	"context"
	"sync"
	"time"
)

// pacer spaces the starts of a rate limit's tasks in this process by the limit's interval,
// measured by the process's own monotonic clock when each task starts.
//
// The store grants a start at its transaction's time and moves the key's next start an
// interval on from there, but the task starts only once that transaction has committed. A
// grant whose transaction commits late — a batch with much else in it, a slow disk, a lock
// held elsewhere — and the next grant of the key, an interval later by the store's time but
// committed at once, would otherwise start together: two downloads from one host a few
// microseconds apart under a one-second politeness delay. The store's grants still bound the
// starts across processes; the pacer makes them hold, by the wall clock, within each.
type pacer struct {
	mu sync.Mutex
	// next is the earliest start of each key's next task in this process, once reserved.
	next map[string]time.Time
	// sweepAt is the size of next at which keys whose next start has passed are dropped.
	sweepAt int
}

// minSweep is the least size of pacer.next that is swept.
const minSweep = 1024

// wait reserves the key's next start in this process — now, or an interval after the start
// reserved before it — and waits for it. It returns ctx's error when ctx ends first; the
// reservation is then spent.
func (p *pacer) wait(ctx context.Context, key string, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	at := now
	if n, ok := p.next[key]; ok && n.After(now) {
		at = n
	}
	if p.next == nil {
		p.next = map[string]time.Time{}
	}
	p.next[key] = at.Add(interval)
	if len(p.next) >= max(p.sweepAt, minSweep) {
		for k, n := range p.next {
			if !n.After(now) {
				delete(p.next, k)
			}
		}
		p.sweepAt = 2 * len(p.next)
	}
	p.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

package fileset

import (
	"context"
	"sync"
	"time"
)

// hostTurns spaces one process's downloads from each host: a request to a host is sent only
// once the one sent before it has its response's head (or has failed) and the politeness delay
// has passed since. The engine's limit spaces the download tasks' starts, by the times the
// store grants them; a task starts late after its grant (a commit that comes late, the work
// before its request on a loaded machine), and a request reaches its host a moment after it is
// sent, so starts spaced by the delay do not make requests that arrive the delay apart. A
// response's head comes after its request arrived: counting the delay from it does. Safe for
// concurrent use; the zero value is ready.
type hostTurns struct {
	mu    sync.Mutex
	hosts map[string]*hostTurn
	// sweepAt is the size of hosts at which idle hosts whose delay has passed are dropped.
	sweepAt int
}

// hostTurn is one host's turn: held by the request being sent, from its wait to its head.
type hostTurn struct {
	turn  chan struct{} // capacity 1
	users int           // requests waiting for or holding the turn, guarded by hostTurns.mu
	free  time.Time     // when the next request may be sent; written by the holder of turn
}

// take waits for host's turn and for its delay to pass, and returns the function that gives
// the turn back once the request has its response's head or has failed. It returns ctx's error
// if ctx ends first. A delay of 0 or less takes no turn.
func (h *hostTurns) take(ctx context.Context, host string, delay time.Duration) (release func(), err error) {
	if delay <= 0 {
		return func() {}, nil
	}
	h.mu.Lock()
	if h.hosts == nil {
		h.hosts = map[string]*hostTurn{}
	}
	if len(h.hosts) >= max(h.sweepAt, 1024) {
		now := time.Now()
		for k, t := range h.hosts {
			if t.users == 0 && !t.free.After(now) {
				delete(h.hosts, k)
			}
		}
		h.sweepAt = 2 * len(h.hosts)
	}
	t := h.hosts[host]
	if t == nil {
		t = &hostTurn{turn: make(chan struct{}, 1)}
		h.hosts[host] = t
	}
	t.users++
	h.mu.Unlock()
	leave := func() {
		h.mu.Lock()
		t.users--
		h.mu.Unlock()
	}
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	if d := time.Until(t.free); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			<-t.turn
			leave()
			return nil, ctx.Err()
		}
	}
	return func() {
		t.free = time.Now().Add(delay)
		<-t.turn
		leave()
	}, nil
}

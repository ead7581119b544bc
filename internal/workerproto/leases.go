package workerproto

import (
	"context"
	"sync"

	"github.com/sluice-project/sluice/internal/record"
)

// leaseRounds coalesces the leases of polls that wait at once for a task of the same action as
// the same owner: one round leases a task for each of them in one statement and reads their
// items in one more, where each poll made its own lease and its own read. Remote workers poll
// one task at a time, so a busy action's polls queue at the process's writer; on PostgreSQL a
// one-task lease cost a statement of ~0.2 ms and a round trip each (docs/performance.md,
// session 27). A round runs while polls wait; a poll that comes during a round waits for the
// next. Safe for concurrent use.
type leaseRounds struct {
	mu      sync.Mutex
	waiting map[leaseKey][]*leaseWait
	running map[leaseKey]bool
}

type leaseKey struct{ name, owner string }

// leaseWait is a poll waiting for its round.
type leaseWait struct {
	done chan struct{} // closed once task, item and err are set
	task *record.Task
	item *record.Item
	err  error
}

// maxLeaseRound bounds the polls one round leases for.
const maxLeaseRound = 64

// leaseFunc leases up to n tasks of the action name as owner and reads their items: items[i]
// is tasks[i]'s. An error after the lease comes with the tasks leased, which are given back.
type leaseFunc func(ctx context.Context, name, owner string, n int) (tasks []*record.Task, items []*record.Item, err error)

// take waits for a round to lease a task for this poll and returns it with its item, or no
// task when none was ready. A task leased for a poll that has left meanwhile is returned all
// the same (with ctx's error if nothing else failed): the caller gives it back, as it gives back
// a task it could not hand out.
func (l *leaseRounds) take(ctx context.Context, name, owner string, lease leaseFunc) (*record.Task, *record.Item, error) {
	k := leaseKey{name, owner}
	w := &leaseWait{done: make(chan struct{})}
	l.mu.Lock()
	if l.waiting == nil {
		l.waiting, l.running = map[leaseKey][]*leaseWait{}, map[leaseKey]bool{}
	}
	l.waiting[k] = append(l.waiting[k], w)
	if !l.running[k] {
		l.running[k] = true
		go l.run(context.WithoutCancel(ctx), k, lease)
	}
	l.mu.Unlock()
	select {
	case <-w.done:
		return w.task, w.item, w.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	q := l.waiting[k]
	for i, o := range q {
		if o == w { // not taken into a round yet: leave
			l.waiting[k] = append(q[:i:i], q[i+1:]...)
			l.mu.Unlock()
			return nil, nil, ctx.Err()
		}
	}
	l.mu.Unlock()
	<-w.done // its round is under way: it ends with the statement
	if w.err == nil && w.task != nil {
		return w.task, w.item, ctx.Err()
	}
	return w.task, w.item, w.err
}

// run leases rounds for the polls waiting on k until none waits.
func (l *leaseRounds) run(ctx context.Context, k leaseKey, lease leaseFunc) {
	for {
		l.mu.Lock()
		q := l.waiting[k]
		if len(q) == 0 {
			delete(l.waiting, k)
			delete(l.running, k)
			l.mu.Unlock()
			return
		}
		round := q[:min(len(q), maxLeaseRound)]
		l.waiting[k] = q[len(round):]
		l.mu.Unlock()
		tasks, items, err := lease(ctx, k.name, k.owner, len(round))
		for i, w := range round {
			if i < len(tasks) {
				w.task = tasks[i]
				if i < len(items) {
					w.item = items[i]
				}
			}
			w.err = err
			close(w.done)
		}
	}
}

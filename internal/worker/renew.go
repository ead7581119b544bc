package worker

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// leases is what this worker renews. It is safe for concurrent use.
//
// Its invariant: a task is owned from its lease until its outcome is committed (or given up),
// and only owned tasks are renewed — running, or with a result queued. A task whose result could
// not be committed at all is disowned, so its lease expires and the maintenance leader reclaims
// it. The brief batches that run are renewed with them (by the store, which knows their leases).
type leases struct {
	mu    sync.Mutex
	owned map[int64]struct{}
}

func newLeases() *leases {
	return &leases{owned: map[int64]struct{}{}}
}

// own starts renewing the leases of tasks.
func (l *leases) own(tasks []*record.Task) {
	l.mu.Lock()
	for _, t := range tasks {
		l.owned[t.ID] = struct{}{}
	}
	l.mu.Unlock()
}

// disown stops renewing a task's lease.
func (l *leases) disown(id int64) {
	l.mu.Lock()
	delete(l.owned, id)
	l.mu.Unlock()
}

// count returns the number of tasks owned.
func (l *leases) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.owned)
}

// renewal returns what renew extends: the tasks owned.
func (l *leases) renewal(owner string, until time.Time) store.TaskRenewLeasesParams {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := store.TaskRenewLeasesParams{Owner: owner, Until: until, TaskIDs: make([]int64, 0, len(l.owned))}
	for id := range l.owned {
		p.TaskIDs = append(p.TaskIDs, id)
	}
	return p
}

// renew extends this worker's leases in one statement every third of the lease: those of the
// tasks it owns (running, or with a result waiting to be committed) and of its brief batches,
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
		p := w.leases.renewal(w.cfg.Owner, w.e.Now().Add(w.cfg.LeaseDuration))
		if len(p.TaskIDs) == 0 && !w.slots.briefRunning() {
			continue
		}
		var err error
		if w.e.ConcurrentWrites() {
			// Not behind the writer: when its queue is long (results waiting, a deadlock being
			// retried) the leases of tasks whose results wait in it would expire, the leader
			// would reclaim them, and their results would be thrown away — more work, longer
			// queues (TestLeaderKilled saw that storm once).
			_, err = w.e.RenewLeases(ctx, p)
		} else {
			// Ahead of the writer's queue, and until a lease from when it commits: a renewal
			// that waited behind a long queue (a fan-out's children, thousands of results at a
			// load average of 30–75) let the leases of running tasks expire.
			err = w.commit.doFirst(ctx, func(t *engine.Tx) error {
				p.Until = w.e.Now().Add(w.cfg.LeaseDuration)
				_, err := t.Executor().TaskRenewLeases(ctx, p)
				return err
			})
		}
		if err != nil && ctx.Err() == nil {
			w.log.Error("renew leases", "error", err)
		} else if err == nil {
			w.cfg.Metrics.LeasesRenewed(len(p.TaskIDs))
		}
	}
}

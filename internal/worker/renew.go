package worker

import (
	"context"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
)

// renewal returns what renew extends: the tasks this worker owns and its held batches' records.
func (w *Worker) renewal(until time.Time) store.TaskRenewLeasesParams {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := store.TaskRenewLeasesParams{Owner: w.cfg.Owner, Until: until,
		TaskIDs: make([]int64, 0, len(w.owned)), HeldLeaseIDs: make([]int64, 0, len(w.records))}
	for id := range w.owned {
		p.TaskIDs = append(p.TaskIDs, id)
	}
	for id := range w.records {
		p.HeldLeaseIDs = append(p.HeldLeaseIDs, id)
	}
	return p
}

// renew extends this worker's leases in one statement every third of the lease: those of the
// tasks it owns (running, or with a result waiting to be committed) and of its held batches,
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
		p := w.renewal(w.e.Now().Add(w.cfg.LeaseDuration))
		if len(p.TaskIDs) == 0 && len(p.HeldLeaseIDs) == 0 {
			continue
		}
		var err error
		if w.e.Store().Capabilities().ConcurrentWrites {
			// Not behind the writer: when its queue is long (results waiting, a deadlock being
			// retried) the leases of tasks whose results wait in it would expire, the leader
			// would reclaim them, and their results would be thrown away — more work, longer
			// queues (TestLeaderKilled saw that storm once).
			_, err = w.e.Store().TaskRenewLeases(ctx, p)
		} else {
			err = w.commit.do(ctx, func(t *engine.Tx) error {
				_, err := t.Executor().TaskRenewLeases(ctx, p)
				return err
			})
		}
		if err != nil && ctx.Err() == nil {
			w.log.Error("renew leases", "error", err)
		} else if err == nil {
			w.cfg.Metrics.LeasesRenewed(len(p.TaskIDs) + len(p.HeldLeaseIDs))
		}
	}
}

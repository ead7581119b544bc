package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/tracing"
)

// briefBatches is how many brief batches a worker runs at once, over all its brief queues, so that
// one leases and runs while others commit. In `sluice-bench engine` on Postgres, alternating, 3
// did about 15 % more tasks/s than 2, and 4 no better than 2. Each batch holds a connection and
// briefly takes a second for its record: with the committer's two lanes that is at most 8 of
// the pool's 10 (by default), leaving connections for reads and renewals.
const briefBatches = 3

// briefBatchMax bounds a brief batch (and the queue's concurrency limit bounds it too): 1,000 measured
// +10 % tasks/s over 512 in `sluice-bench engine`.
const briefBatchMax = 1000

// startBriefBatches starts brief batches for the brief queues that are neither idle nor unknown (see slots), up
// to briefBatches running at once, and returns how many it started.
func (w *Worker) startBriefBatches(ctx context.Context, queues []queueInfo) int {
	started := 0
	for _, q := range queues {
		if !q.brief {
			continue
		}
		ok, stop := w.slots.startBrief(q.name)
		if stop {
			break
		}
		if !ok {
			continue
		}
		limit := min(q.limit, briefBatchMax)
		w.tasks.Add(1)
		started++
		go func() {
			defer w.tasks.Done()
			n, err := w.runBrief(ctx, q.name, limit)
			if err != nil && ctx.Err() == nil {
				w.log.Error("held batch", "queue", q.name, "error", err)
			}
			w.slots.endBrief(q.name, err != nil || n >= limit)
			w.kick()
		}()
	}
	return started
}

// runBrief leases up to limit tasks of the queue as a brief batch (store.TaskGetAvailableParams.Brief),
// runs them one after the other and applies their results, all in one transaction: one commit,
// and how the lease is kept until then — and for a process that dies before — is the driver's.
// It returns how many tasks it ran.
func (w *Worker) runBrief(ctx context.Context, queue string, limit int) (int, error) {
	n := 0
	var got []*record.Task
	var flights []string
	// results are the batch's results, applied in its transaction; if that fails for another
	// reason than a stop or the database's retry, they are committed again one by one.
	var results []*engine.Result
	defer func() {
		for _, f := range flights { // after the commit, as run does
			w.cache.land(f)
		}
	}()
	// As a lane of the committer for the whole batch: Worker.Do's exclusive writes wait for it
	// (and a batch never waits for the committer while holding rows).
	release := w.commit.asLane()
	err := w.e.Run(ctx, func(t *engine.Tx) error {
		n = 0
		results = results[:0]
		now := t.Now()
		var err error
		got, err = t.Executor().TaskGetAvailable(ctx, store.TaskGetAvailableParams{Queues: []string{queue}, Max: []int{limit},
			Owner: w.cfg.Owner, Now: now, LeaseUntil: now.Add(w.cfg.LeaseDuration), Brief: true})
		if err != nil || len(got) == 0 {
			return err
		}
		if len(got) == limit {
			w.kick() // there may be more: the next batch can take them while this one runs
		}
		ids := make([]int64, len(got))
		for i, tk := range got {
			ids[i] = tk.ItemID
		}
		// The batch's lease is durable once this, the transaction's next statement, returned.
		its, err := t.LockItems(ids)
		if err != nil {
			return err
		}
		items := make(map[int64]*record.Item, len(its))
		for _, it := range its {
			items[it.ID] = it
		}
		for _, tk := range got {
			res := &engine.Result{Task: tk, Owner: w.cfg.Owner, Started: tk.StartedAt}
			var fin finishing
			begin := time.Now()
			tctx, span := w.traceAttempt(ctx, tk)
			err := w.execute(tctx, tk, items[tk.ItemID], res, &fin, nil)
			tracing.End(span, err)
			w.slots.ran(tk.ID)
			if fin.flight != "" {
				flights = append(flights, fin.flight)
			}
			if errors.Is(err, errStopping) {
				return err
			}
			setErr(res, err)
			w.observe(tk, res, begin)
			if err != nil && ctx.Err() == nil {
				w.log.Debug("task attempt failed", "job_id", tk.JobID, "item_id", tk.ItemID, "task_id", tk.ID, "action", tk.Action, "attempt", tk.Attempt, "error", err)
			}
			if err := w.applyResult(ctx, res, &fin).apply(t); err != nil {
				return err
			}
			results = append(results, res)
		}
		n = len(got)
		return nil
	})
	release()
	if err == nil {
		return n, nil
	}
	// Rolled back: the batch's tasks are leased to this worker, written (or ready again if their
	// lease never became durable). Nothing ran for good; each is finished or given back now.
	fallback := len(results) > 0 && ctx.Err() == nil && !errors.Is(err, errStopping) && !errors.Is(err, store.ErrRetry)
	if fallback {
		// The batch ran but its results could not commit together (one of them cannot be
		// applied). Given back, its tasks would run again and fail so forever: commit each
		// result alone instead, and a result that fails alone as any other result does (see
		// committed).
		w.log.Warn("held batch failed to commit; its results are committed one by one", "queue", queue, "tasks", len(results), "error", err)
		for _, res := range results {
			w.committed(ctx, res, w.commit.alone(context.WithoutCancel(ctx), func(t *engine.Tx) error { return t.Apply(res) }))
		}
	} else {
		results = nil
	}
	if rest := got[len(results):]; len(rest) > 0 {
		if rerr := w.commit.alone(context.WithoutCancel(ctx), func(t *engine.Tx) error {
			for _, tk := range rest {
				if err := t.Release(tk, w.cfg.Owner); err != nil {
					return err
				}
			}
			return nil
		}); rerr != nil {
			err = fmt.Errorf("%w (and giving its tasks back: %w)", err, rerr)
		}
	}
	if fallback {
		return n, nil
	}
	return n, err
}

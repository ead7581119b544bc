package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/tracing"
)

// heldBatches is how many held batches a worker runs at once, over all its brief queues, so that
// one holds and runs while others commit. In `sluice-bench engine` on Postgres, alternating, 3
// did about 15 % more tasks/s than 2, and 4 no better than 2. Each batch holds a connection and
// briefly takes a second for its record: with the committer's two lanes that is at most 8 of
// the pool's 10 (by default), leaving connections for reads and renewals.
const heldBatches = 3

// heldMax bounds a held batch (and the queue's concurrency limit bounds it too): 1,000 measured
// +10 % tasks/s over 512 in `sluice-bench engine`.
const heldMax = 1000

// hold starts held batches for the brief queues that are neither idle nor unknown (see slots), up
// to heldBatches running at once, and returns how many it started.
func (w *Worker) hold(ctx context.Context, queues []queueInfo) int {
	started := 0
	for _, q := range queues {
		if !q.brief {
			continue
		}
		ok, stop := w.slots.startHeld(q.name)
		if stop {
			break
		}
		if !ok {
			continue
		}
		limit := min(q.limit, heldMax)
		w.tasks.Add(1)
		started++
		go func() {
			defer w.tasks.Done()
			n, err := w.runHeld(ctx, q.name, limit)
			if err != nil && ctx.Err() == nil {
				w.log.Error("held batch", "queue", q.name, "error", err)
			}
			w.slots.endHeld(q.name, err != nil || n >= limit)
			w.kick()
		}()
	}
	return started
}

// runHeld leases up to limit tasks of the queue by holding their rows (TaskHoldMany), runs
// them one after the other and applies their results, all in one transaction: one commit, no
// lease written. If the process dies first, the transaction and its locks die with it and the
// tasks are ready again. It returns how many tasks it ran.
//
// The batch's record (HeldLeaseRecord), which keeps a dead process's attempts counted, commits
// before any task runs. On Postgres it commits on a connection of its own while the holding
// transaction is open. With one writer (SQLite) it cannot: the pick commits with its record in a
// transaction of its own first, and the tasks are run and finished in a second one. Nothing
// else of this worker picks ready tasks of a brief queue, and only one held batch runs at a time
// there (slots.heldMax), so no other batch takes them in between; a task that changed meanwhile
// all the same (canceled by another process) fails its held finish, voiding the attempt's
// effects.
func (w *Worker) runHeld(ctx context.Context, queue string, limit int) (int, error) {
	n := 0
	var recorded int64
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
	release := w.commit.hold()
	hold := func(x store.Executor, now time.Time) ([]*store.Task, store.HeldLeaseParams, error) {
		got, err := x.TaskHoldMany(ctx, store.TaskLeaseManyParams{Queues: []string{queue}, Limits: []int{limit},
			Owner: w.cfg.Owner, Now: now, LeaseUntil: now.Add(w.cfg.LeaseDuration)})
		if len(got) == limit {
			w.kick() // there may be more: the next batch can hold them while this one runs
		}
		rec := store.HeldLeaseParams{Owner: w.cfg.Owner, TaskIDs: make([]int64, len(got)), Attempts: make([]int, len(got)),
			Started: now, Until: now.Add(w.cfg.LeaseDuration)}
		for i, tk := range got {
			rec.TaskIDs[i], rec.Attempts[i] = tk.ID, tk.Attempt
		}
		return got, rec, err
	}
	var picked []*store.Task // the pick committed with its record (one writer)
	if !w.e.Store().Capabilities().ConcurrentWrites {
		err := w.e.Run(ctx, func(t *engine.Tx) error {
			got, rec, err := hold(t.Executor(), t.Now())
			if err != nil || len(got) == 0 {
				picked = nil
				return err
			}
			id, err := t.Executor().HeldLeaseRecord(ctx, rec)
			picked, recorded = got, id
			return err
		})
		if err != nil || len(picked) == 0 {
			release()
			return 0, err
		}
		w.leases.record(recorded, true)
	}
	err := w.e.Run(ctx, func(t *engine.Tx) error {
		n = 0
		results = results[:0]
		x := t.Executor()
		got := picked
		itemIDs := func() []int64 {
			ids := make([]int64, len(got))
			for i, tk := range got {
				ids[i] = tk.ItemID
			}
			return ids
		}
		var its []*store.Item
		if picked == nil {
			var rec store.HeldLeaseParams
			var err error
			got, rec, err = hold(x, t.Now())
			if err != nil || len(got) == 0 {
				return err
			}
			// The record commits on a connection of its own, before any task runs, while this
			// transaction locks the tasks' items: one round trip's wait instead of two. Bounded:
			// the pool could be short of connections while this transaction holds rows.
			var id int64
			var rerr error
			recordDone := make(chan struct{})
			go func() {
				defer close(recordDone)
				rctx, cancel := context.WithTimeout(ctx, w.cfg.LeaseDuration/3)
				defer cancel()
				id, rerr = w.e.Store().HeldLeaseRecord(rctx, rec)
			}()
			its, err = t.LockItems(itemIDs())
			<-recordDone
			if rerr != nil {
				return rerr
			}
			recorded = id
			w.leases.record(id, true)
			if err != nil {
				return err
			}
		} else {
			var err error
			if its, err = t.LockItems(itemIDs()); err != nil {
				return err
			}
		}
		if err := x.HeldLeaseDelete(ctx, recorded); err != nil { // with the results
			return err
		}
		items := make(map[int64]*store.Item, len(its))
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
			if err := w.applyResult(ctx, res, &fin)(t); err != nil {
				return err
			}
			results = append(results, res)
		}
		n = len(got)
		return nil
	})
	release()
	if recorded != 0 {
		w.leases.record(recorded, false)
	}
	if err != nil && recorded != 0 {
		// Rolled back, not crashed: the tasks are ready again at their attempt, and nothing
		// ran for good. Without its record, that is not counted as a lost attempt.
		if derr := w.e.Store().HeldLeaseDelete(context.WithoutCancel(ctx), recorded); derr != nil {
			err = fmt.Errorf("%w (and its record: %w)", err, derr)
		}
	}
	if err != nil && len(results) > 0 && ctx.Err() == nil && !errors.Is(err, errStopping) && !errors.Is(err, store.ErrRetry) {
		// The batch ran but its results could not commit together (one of them cannot be
		// applied). Rolled back, its tasks are ready again at their attempt, and would be held
		// and run again forever: commit each result alone instead — a held finish takes the
		// ready row at the attempt before, unless another batch took it meanwhile — and a
		// result that fails alone as any other result does (see committed).
		w.log.Warn("held batch failed to commit; its results are committed one by one", "queue", queue, "tasks", len(results), "error", err)
		for _, res := range results {
			w.committed(ctx, res, w.commit.alone(context.WithoutCancel(ctx), func(t *engine.Tx) error { return t.Apply(res) }))
		}
		return n, nil
	}
	return n, err
}

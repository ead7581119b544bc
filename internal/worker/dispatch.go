package worker

import (
	"context"
	"time"

	"github.com/sluice-project/sluice/internal/engine"
	"github.com/sluice-project/sluice/internal/queue"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

type queueInfo struct {
	name  string
	limit int
	brief bool // its action's policy is Brief: run in brief batches (see Worker.startBriefBatches)
}

// queues returns the queues this worker serves with their limits: one per action, plus one per
// step that sets its own concurrency.
func (w *Worker) queues(ctx context.Context) []queueInfo {
	cat := w.e.Catalog()
	var out []queueInfo
	seen := map[string]bool{}
	add := func(name, act string, limit int, keyed bool) {
		if _, remote := queue.Name(name).Remote(); seen[name] || remote {
			return // remote workers lease these over HTTP
		}
		if w.cfg.Queues != nil {
			ok := false
			for _, q := range w.cfg.Queues {
				if q == name || q == act {
					ok = true
				}
			}
			if !ok {
				return
			}
		}
		seen[name] = true
		// A step's own queue with a claim or a limit is never brief: they are checked in
		// transactions of their own before the action runs.
		brief := cat.Policy(act).Brief && !keyed
		out = append(out, queueInfo{name: name, limit: limit, brief: brief})
	}
	limitOf := func(act string) int {
		if n := w.concurrency.Load(); n > 0 {
			return int(n)
		}
		if n := w.cfg.Concurrency[act]; n > 0 {
			return n
		}
		spec, _ := cat.Spec(act)
		if spec.Concurrency > 0 {
			return spec.Concurrency
		}
		return 4
	}
	for _, name := range cat.Names() {
		add(w.e.Queue(&workflow.Definition{}, &workflow.Step{Action: name}), name, limitOf(name), false)
	}
	if wfs, err := w.e.Workflows(ctx); err == nil {
		for _, wf := range wfs {
			def, _, err := w.e.Definition(ctx, wf.Name, wf.Version)
			if err != nil {
				continue
			}
			for _, s := range def.Steps {
				if _, ok := cat.Lookup(s.Action); !ok {
					continue
				}
				keyed := s.Claim != nil || s.Limit != nil
				switch {
				case s.Concurrency > 0:
					add(w.e.Queue(def, s), s.Action, min(s.Concurrency, limitOf(s.Action)), keyed)
				case keyed:
					add(w.e.Queue(def, s), s.Action, limitOf(s.Action), true)
				}
			}
		}
	}
	return out
}

// dispatch leases tasks until ctx ends, and runs them under run, which outlives ctx while
// running tasks drain (see Worker.Stop).
func (w *Worker) dispatch(ctx, run context.Context) {
	queues := w.queues(ctx)
	refresh := time.Now()
	w.slots.serve(queues, true)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if time.Since(refresh) > 5*time.Second {
			queues, refresh = w.queues(ctx), time.Now()
			w.slots.serve(queues, false)
		}
		// No second look after a lease: a queue that filled its free slots has none left, and
		// one that got fewer tasks than it asked for had no more ready ones. What changes that
		// (a finished task, new ready work) calls Wake, buffered while this leases.
		// Brief batches first: they start at once, in goroutines of their own, while a written
		// lease waits for the committer and its round trips (on a new connection, for the plan
		// of its first pick: 4–8 ms when a worker starts, which brief batches would wait for).
		leased := w.startBriefBatches(run, queues)
		w.check(ctx) // after: the batches take the pool's idle connections first
		n, err := w.lease(ctx, run, queues)
		leased += n
		if err != nil && ctx.Err() == nil {
			w.log.Error("lease tasks", "error", err)
		}
		wait := w.cfg.PollInterval
		// The next backoff's end matters only to a worker that found nothing, and not while a
		// brief batch runs: its end wakes this loop within milliseconds. In a burndown that is
		// every turn, and the query is not free: on Postgres it stepped over the entries finished
		// tasks left in tasks_ready_after until a vacuum (7 ms per brief batch of 1,000 at a
		// backlog of 100,000; since migration 013 only tasks with a backoff have one).
		if leased == 0 && !w.slots.briefRunning() {
			if next, err := w.e.NextRunAfter(ctx); err == nil && !next.IsZero() {
				if d := time.Until(next); d > 0 && d < wait {
					wait = d
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
			queues, refresh = w.queues(ctx), time.Now()
			w.slots.serve(queues, false)
			w.slots.polled()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// check asks, in the background, which unknown brief queues have ready tasks (see slots), and
// wakes the dispatcher when it knows: meanwhile brief batches go to the queues known to have work.
func (w *Worker) check(ctx context.Context) {
	names, mark := w.slots.toCheck()
	if names == nil {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		ready, err := w.e.ReadyQueues(ctx, names)
		if err != nil && ctx.Err() == nil {
			w.log.Warn("check queues for ready tasks", "error", err)
		}
		w.slots.checked(names, mark, ready, err)
		w.kick()
	}()
}

// lease leases tasks for every queue with free slots that is not idle, in one statement, starts
// them and returns how many.
func (w *Worker) lease(ctx, run context.Context, queues []queueInfo) (int, error) {
	wants, mark := w.slots.wants(queues)
	if len(wants) == 0 {
		return 0, nil
	}
	p := store.TaskGetAvailableParams{Owner: w.cfg.Owner, Queues: make([]string, len(wants)), Max: make([]int, len(wants))}
	for i, wt := range wants {
		p.Queues[i], p.Max[i] = wt.q.name, wt.free
	}
	var got []*record.Task
	// With one writer (SQLite) the leased tasks' items and cached conversions are read in the
	// lease's own transaction: a statement there costs less than a read transaction of its own
	// on a reader. On Postgres that would lengthen the one writer's turn; readers run beside it.
	local := !w.e.ConcurrentWrites()
	items := map[int64]*record.Item{}
	pre := map[int64]*prefetch{}
	seq := w.cache.seq()
	// Through the writer, on every store: leasing beside it (Postgres) let a worker hold hundreds
	// of tasks while their results queued behind it, and a killed worker's crowd of expired
	// leases, reclaimed while others deadlocked on their items, stalled TestLeaderKilled.
	err := w.commit.do(ctx, func(t *engine.Tx) error {
		p.Now = t.Now() // the transaction's time: after every commit that made these tasks ready
		p.LeaseUntil = p.Now.Add(w.cfg.LeaseDuration)
		var err error
		if got, err = t.Executor().TaskGetAvailable(ctx, p); err != nil || !local || len(got) == 0 {
			return err
		}
		clear(items)
		clear(pre)
		w.cache.prefetch(ctx, t.Executor(), got, seq, items, pre)
		return nil
	})
	if err != nil {
		return 0, err
	}
	counts := map[string]int{}
	for _, t := range got {
		counts[t.Queue]++
	}
	w.leases.own(got)
	if !w.slots.leased(wants, mark, counts) { // stopping: give them back
		for _, t := range got {
			w.release(t)
		}
		return 0, nil
	}
	// Read the leased tasks' items in one statement; a task whose item is not here (an error)
	// reads its own.
	if !local && len(got) > 1 {
		ids := make([]int64, len(got))
		for i, t := range got {
			ids[i] = t.ItemID
		}
		its, err := w.e.Items(ctx, ids)
		if err != nil {
			w.log.Warn("read leased items", "error", err)
		}
		for _, it := range its {
			items[it.ID] = it
		}
	}
	for _, t := range got {
		w.tasks.Add(1)
		go w.run(run, t, items[t.ItemID], pre[t.ID])
	}
	return len(got), nil
}

func (w *Worker) release(t *record.Task) {
	err := w.commit.enqueue(context.Background(), op{fn: func(tx *engine.Tx) error {
		return tx.Release(t, w.cfg.Owner)
	}, after: func(error) { w.disown(t.ID) }})
	if err != nil {
		w.disown(t.ID)
	}
}

// disown forgets a task whose outcome is committed (or given up): its lease is no longer renewed.
func (w *Worker) disown(id int64) { w.leases.disown(id) }

func (w *Worker) done(t *record.Task) {
	w.slots.done(t.Queue, t.ID)
	w.tasks.Done()
	w.kick() // a slot is free
}

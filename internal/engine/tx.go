package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// tx is the state of one engine transaction: caches and the items to settle at the end.
type tx struct {
	e      *Engine
	ctx    context.Context
	x      store.Executor
	now    time.Time
	jobs   map[int64]*store.Job
	events map[int64]map[string]bool
	items  map[int64]*store.Item // locked in this transaction, kept in step with its writes
	// stale holds the cached items whose row got writes the cache does not mirror (merged
	// metadata, content type, thumbnail, a reopened error): read again before an inline run.
	stale   map[int64]bool
	colored map[int64]bool          // items whose colored progress changed in memory
	busy    map[int64]bool          // items that got a ready task in this transaction: not settling
	dirty   map[int64]int           // item id → depth
	tasks   map[int64][]*store.Task // tasks of the level being settled, read in one statement
	moves   map[int64][2]string     // item → (state in the database, new state), written by flushMoves
	touched map[int64]bool
	// closing holds the jobs this transaction may end: it sealed them or ingested one of their
	// roots (the last item of a job to be ingested is a root).
	closing map[int64]bool
	ready   bool
	// readyQueues are the queues of the tasks made ready, unless readyAll says they are not known.
	readyQueues map[string]bool
	readyAll    bool
	cancel      []int64
	ended       map[int64]string
	results     []*Result // queued by Tx.Apply, applied together in finish
	// pubs are the publications queued for the publisher; published says some were recorded.
	pubs      []Publication
	published bool
	// fresh holds the items created in this transaction, each with the tasks it got here (see
	// pending.go); freshStale says those task states may have changed since (a job's tasks were
	// canceled) and must be read.
	fresh        map[int64][]*store.Task
	kids         map[int64][]*store.Item // parent → its children created in this transaction
	freshStale   bool
	pendTasks    []store.TaskInsertParams
	pendEvents   []store.EventInsertParams
	pendChildren map[int64]childCount
}

func (e *Engine) newTx(ctx context.Context, x store.Executor) *tx {
	return &tx{e: e, ctx: ctx, x: x, now: e.Now(), jobs: map[int64]*store.Job{}, events: map[int64]map[string]bool{}, readyQueues: map[string]bool{}, items: map[int64]*store.Item{}, stale: map[int64]bool{}, colored: map[int64]bool{}, busy: map[int64]bool{},
		dirty: map[int64]int{}, tasks: map[int64][]*store.Task{}, moves: map[int64][2]string{}, touched: map[int64]bool{}, closing: map[int64]bool{}, ended: map[int64]string{},
		fresh: map[int64][]*store.Task{}, kids: map[int64][]*store.Item{}, pendChildren: map[int64]childCount{}}
}

// Run runs fn in one store transaction with engine state, settles what fn touched, and fires
// the in-memory notifications after commit. fn may be called again if the transaction is retried.
func (e *Engine) Run(ctx context.Context, fn func(t *Tx) error) error {
	var t *tx
	err := e.store.InTx(ctx, func(x store.Executor) error {
		t = e.newTx(ctx, x)
		if err := fn(&Tx{t: t}); err != nil {
			return err
		}
		if err := t.finish(); err != nil {
			return err
		}
		if err := t.flushPublications(); err != nil {
			return err
		}
		return t.flushPending()
	})
	if err != nil {
		return err
	}
	t.notify()
	return nil
}

// Tx is the engine's view of one transaction, handed to [Engine.Run] callbacks.
type Tx struct{ t *tx }

// Executor returns the store transaction.
func (t *Tx) Executor() store.Executor { return t.t.x }

// Now is the transaction's time.
func (t *Tx) Now() time.Time { return t.t.now }

// LockItems locks the items (in id order, as results lock them) and returns them. They are the
// transaction's own copies, which applying results updates: read them before [Tx.Apply].
func (t *Tx) LockItems(ids []int64) ([]*store.Item, error) {
	if err := t.t.lockItems(ids); err != nil {
		return nil, err
	}
	out := make([]*store.Item, 0, len(ids))
	for _, id := range ids {
		if it := t.t.items[id]; it != nil {
			out = append(out, it)
		}
	}
	return out, nil
}

func (t *tx) notify() {
	if t.ready {
		var qs []string
		if !t.readyAll {
			qs = make([]string, 0, len(t.readyQueues))
			for q := range t.readyQueues {
				qs = append(qs, q)
			}
		}
		t.e.cfg.OnReady(qs)
	}
	if len(t.cancel) > 0 {
		t.e.cfg.OnCancel(t.cancel)
	}
	for id, st := range t.ended {
		t.e.cfg.OnJobEnd(id, st)
	}
	if t.published {
		t.e.getPublisher().Committed()
	}
}

func (t *tx) job(id int64) (*store.Job, error) {
	if j, ok := t.jobs[id]; ok {
		return j, nil
	}
	j, err := t.x.JobGet(t.ctx, id)
	if err != nil {
		return nil, err
	}
	if j.State == store.JobFailed || j.State == store.JobComplete {
		// A job in a state a retry reopens: decide on it under its lock. Otherwise this
		// transaction could settle an item as a stopped job's (without waiting for its
		// collector) while a retry, in another process, reopens the job and its items, and
		// commit after it: the job would complete without the collector.
		if j, err = t.x.JobLock(t.ctx, id); err != nil {
			return nil, err
		}
	}
	t.jobs[id] = j
	return j, nil
}

func (t *tx) def(jobID int64) (*workflow.Definition, *store.Job, error) {
	j, err := t.job(jobID)
	if err != nil {
		return nil, nil, err
	}
	d, _, err := t.e.Definition(t.ctx, j.WorkflowName, j.WorkflowVersion)
	return d, j, err
}

// lockItems locks and caches the items not yet locked in this transaction, in one call.
func (t *tx) lockItems(ids []int64) error {
	var want []int64
	for _, id := range ids {
		if _, ok := t.items[id]; !ok {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	slices.Sort(want)
	want = slices.Compact(want)
	items, err := t.x.ItemLockMany(t.ctx, want)
	if err != nil {
		return err
	}
	for _, it := range items {
		t.items[it.ID] = it
	}
	return nil
}

// item returns the item, locking it on first use in this transaction.
func (t *tx) item(id int64) (*store.Item, error) {
	if it, ok := t.items[id]; ok {
		return it, nil
	}
	it, err := t.x.ItemLock(t.ctx, id)
	if err != nil {
		return nil, err
	}
	t.items[id] = it
	return it, nil
}

func (t *tx) itemEvents(itemID int64) (map[string]bool, error) {
	if ev, ok := t.events[itemID]; ok {
		return ev, nil
	}
	names, err := t.x.EventListByItem(t.ctx, itemID)
	if err != nil {
		return nil, err
	}
	ev := make(map[string]bool, len(names))
	for _, n := range names {
		ev[n] = true
	}
	t.events[itemID] = ev
	return ev, nil
}

func (t *tx) markDirty(it *store.Item) {
	t.dirty[it.ID] = it.Depth
	t.touched[it.JobID] = true
}

// fire records event on the item and makes ready every step whose needs are now all met.
func (t *tx) fire(it *store.Item, event string) error {
	inserted, err := t.addEvent(it, event)
	if err != nil {
		return err
	}
	if !inserted {
		if event == workflow.EventFail {
			// fail ends a running job even where it fired before: after a retry
			// ([Engine.Retry]), the same failure must fail the job again.
			_, job, err := t.def(it.JobID)
			if err != nil {
				return err
			}
			return t.endJob(job, store.JobFailed, fmt.Sprintf("fail fired on %q", it.Name))
		}
		return nil // events are a set
	}
	t.markDirty(it)
	def, job, err := t.def(it.JobID)
	if err != nil {
		return err
	}
	if err := t.publishEvent(def, job, it, event); err != nil {
		return err
	}
	if event == workflow.EventFail {
		return t.endJob(job, store.JobFailed, fmt.Sprintf("fail fired on %q", it.Name))
	}
	if event == workflow.EventStart {
		// Before anything runs, and whatever the job's state: a retry must find the skips.
		if err := t.decideWhen(def, it); err != nil {
			return err
		}
	}
	if job.State != store.JobRunning {
		return nil
	}
	if event == workflow.EventStart {
		// Steps that need only external events wait from the item's creation.
		for _, s := range t.e.plan(def).waitsFromStart {
			if err := t.startWait(def, it, s); err != nil {
				return err
			}
		}
	}
	for _, s := range def.Consumers(event) {
		if len(s.Needs) > 1 {
			// Only a step with other needs reads the item's events (this one among them).
			ev, err := t.itemEvents(it.ID)
			if err != nil {
				return err
			}
			met := true
			for _, n := range s.Needs {
				if !ev[n] {
					met = false
					break
				}
			}
			if !met {
				if s.Deadline > 0 {
					if err := t.startWait(def, it, s); err != nil {
						return err
					}
				}
				continue
			}
		}
		if s.When != "" || s.Deadline > 0 {
			ok, err := t.applies(it, s.Name)
			if err != nil {
				return err
			}
			if !ok {
				continue // skipped (or its wait expired): it never runs, and never fires its events
			}
		}
		if s.Deadline > 0 {
			if err := t.x.WaitDelete(t.ctx, it.ID, s.Name); err != nil {
				return err
			}
		}
		p := store.TaskInsertParams{
			JobID: it.JobID, ItemID: it.ID, Step: s.Name, Action: s.Action, Queue: t.e.Queue(def, s),
			MaxAttempts: s.MaxAttempts(), SortKey: it.SortKey, ProgressWeight: t.e.weight(s) / float64(len(def.Steps)), Now: t.now,
		}
		if act, spec, ok := t.e.inlineAction(s.Action); ok && s.Claim == nil && s.Limit == nil {
			delete(t.tasks, it.ID)
			ran, err := t.runInline(it, s, act, spec, p)
			if err != nil {
				return err
			}
			if ran {
				continue
			}
		}
		t.addTask(p)
		delete(t.tasks, it.ID)
		t.ready = true
		t.readyQueues[p.Queue] = true
		// A task made ready here cannot also finish in this transaction (it is leased and run
		// after the commit), so the item cannot settle now: skip looking.
		t.busy[it.ID] = true
	}
	return nil
}

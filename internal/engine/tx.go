package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// tx is one engine transaction. Its parts, each with its own invariants:
//   - [unit], the unit of work: the store transaction, the rows read, the writes held back;
//     every read a held-back write could change (tasks, events, items and their states) goes
//     through it and sees every write made before it.
//   - [settler]: the items to settle, deepest level first, and their moves (settle.go).
//   - [closer]: the jobs this transaction may end (close.go).
//   - [notes]: what to tell the process once the transaction commits.
//
// Firing events (below), applying results (task.go), waits, retries and claims work on these.
type tx struct {
	unit
	settler
	closer
	notes
	e       *Engine
	results []*Result // queued by Tx.Apply, applied together in finish
	// pubs are the publications queued for the publisher, handed to it before the commit.
	pubs []Publication
	// recorded are the outputs recorded in this transaction, handed to the domains that follow
	// outputs at its end (followOutputs).
	recorded []store.OutputPutParams
}

func (e *Engine) newTx(ctx context.Context, x store.Executor) *tx {
	return &tx{e: e, unit: newUnit(ctx, x, e.Now()), settler: newSettler(), closer: newCloser(), notes: newNotes()}
}

// Run runs fn in one store transaction with engine state, settles what fn touched, and fires
// the in-memory notifications after commit. fn may be called again if the transaction is retried.
func (e *Engine) Run(ctx context.Context, fn func(t *Tx) error) error {
	fn, committed := noted(ctx, fn)
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
	committed()
	t.notify(e)
	return nil
}

// finish applies the queued results, settles the dirty items deepest first (so a batch of
// children settles before their parent, once), writes the progress colored in memory, ends
// the jobs that have nothing left open, and hands the outputs recorded to the domains that
// follow them.
func (t *tx) finish() error {
	if err := t.applyResults(); err != nil {
		return err
	}
	if err := t.settleDirty(); err != nil {
		return err
	}
	if err := t.writeColors(); err != nil {
		return err
	}
	if err := t.closeJobs(); err != nil {
		return err
	}
	return t.followOutputs()
}

// Tx is the engine's view of one transaction, handed to [Engine.Run] callbacks.
type Tx struct{ t *tx }

// Executor returns the store transaction.
func (t *Tx) Executor() store.Executor { return t.t.x }

// Now is the transaction's time.
func (t *Tx) Now() time.Time { return t.t.now }

// LockItems locks the items (in id order, as results lock them) and returns them. They are the
// transaction's own copies, which applying results updates: read them before [Tx.Apply].
func (t *Tx) LockItems(ids []int64) ([]*record.Item, error) {
	if err := t.t.lockItems(ids); err != nil {
		return nil, err
	}
	out := make([]*record.Item, 0, len(ids))
	for _, id := range ids {
		if it := t.t.items[id]; it != nil {
			out = append(out, it)
		}
	}
	return out, nil
}

// notes is what a transaction tells the process once it commits: queues with new ready tasks
// (to wake workers), running tasks to stop, jobs that ended, publications recorded. Nothing is
// told of a transaction that rolled back.
type notes struct {
	ready bool
	// readyQueues are the queues of the tasks made ready, unless readyAll says they are not known.
	readyQueues map[string]bool
	readyAll    bool
	cancel      []int64
	ended       map[int64]record.JobState
	// published says publications were recorded (see flushPublications).
	published bool
}

func newNotes() notes {
	return notes{readyQueues: map[string]bool{}, ended: map[int64]record.JobState{}}
}

// readyIn notes a task made ready in the queue.
func (n *notes) readyIn(queue string) {
	n.ready = true
	n.readyQueues[queue] = true
}

// readied notes tasks made ready outside fire (released from a claim), to wake workers.
func (n *notes) readied(queues []string) {
	for _, q := range queues {
		n.readyIn(q)
	}
}

func (n *notes) notify(e *Engine) {
	if n.ready {
		var qs []string
		if !n.readyAll {
			qs = make([]string, 0, len(n.readyQueues))
			for q := range n.readyQueues {
				qs = append(qs, q)
			}
		}
		e.cfg.OnReady(qs)
	}
	if len(n.cancel) > 0 {
		e.cfg.OnCancel(n.cancel)
	}
	for id, st := range n.ended {
		e.cfg.OnJobEnd(id, st)
	}
	if n.published {
		e.getPublisher().Committed()
	}
}

func (t *tx) def(jobID int64) (*workflow.Definition, *record.Job, error) {
	j, err := t.job(jobID)
	if err != nil {
		return nil, nil, err
	}
	d, _, err := t.e.Definition(t.ctx, j.WorkflowName, j.WorkflowVersion)
	return d, j, err
}

// markDirty marks the item for settling, and its job for closing.
func (t *tx) markDirty(it *record.Item) {
	t.dirty[it.ID] = it.Depth
	t.touched[it.JobID] = true
}

// fire records event on the item and makes ready every step whose needs are now all met.
func (t *tx) fire(it *record.Item, event string) error {
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
			return t.endJob(job, record.JobFailed, fmt.Sprintf("fail fired on %q", it.Name))
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
		return t.endJob(job, record.JobFailed, fmt.Sprintf("fail fired on %q", it.Name))
	}
	if event == workflow.EventStart {
		// Before anything runs, and whatever the job's state: a retry must find the skips.
		if err := t.decideWhen(def, it); err != nil {
			return err
		}
	}
	if job.State != record.JobRunning {
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
			MaxAttempts: s.MaxAttempts(), SortKey: it.SortKey, ProgressWeight: t.e.weight(s), Now: t.now,
		}
		if act, spec, ok := t.e.inlineAction(s.Action); ok && s.Claim == nil && s.Limit == nil {
			ran, err := t.runInline(it, s, act, spec, p)
			if err != nil {
				return err
			}
			if ran {
				continue
			}
		}
		p.New = true // the last of its needs fired just now, for the first time ([unit.addTask])
		t.addTask(p)
		t.readyIn(p.Queue)
		// A task made ready here cannot also finish in this transaction (it is leased and run
		// after the commit), so the item cannot settle now: skip looking.
		t.busy[it.ID] = true
	}
	return nil
}

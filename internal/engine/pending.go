package engine

import (
	"github.com/sluice-project/sluice/internal/store"
)

// Writes a transaction can hold back and make together, in multi-row statements, instead of one
// statement each as they arise: the tasks it makes ready or runs inline, the events of items
// whose events are cached (whether one is new is known without the database), and child counts.
// The flushes run before anything in the transaction reads what they write, and at its end.
// The tasks of items created in this transaction are known without a read.

// childCount is the held-back n_children and share change of a parent.
type childCount struct {
	n      int
	length float64
}

// addEvent records event on the item if it has not fired and reports whether it had not. An item
// whose events are cached gets the event held back; any other is written at once.
func (t *tx) addEvent(it *store.Item, event string) (bool, error) {
	if ev, ok := t.events[it.ID]; ok {
		if ev[event] {
			return false, nil
		}
		ev[event] = true
		t.pendEvents = append(t.pendEvents, store.EventInsertParams{ItemID: it.ID, Name: event, Now: t.now})
		return true, nil
	}
	return t.x.EventInsert(t.ctx, it.ID, event, t.now)
}

// addTask inserts the task of a step whose needs an event new in this transaction has just met,
// held back until the flush. Such a task cannot exist: events are never removed, so a step's
// needs are met once, by the last of them to fire ([tx.resume] inserts its own). The insert
// still leaves an existing row alone.
func (t *tx) addTask(p store.TaskInsertParams) {
	t.pendTasks = append(t.pendTasks, p)
	if known, ok := t.fresh[p.ItemID]; ok {
		tk := &store.Task{JobID: p.JobID, ItemID: p.ItemID, Step: p.Step, Action: p.Action, Queue: p.Queue, State: store.TaskReady}
		if p.Done != nil {
			tk.State, tk.Error = p.Done.State, p.Done.Error
		}
		t.fresh[p.ItemID] = append(known, tk)
	}
}

// freshTasks returns the tasks of an item created in this transaction, known without a read.
func (t *tx) freshTasks(id int64) ([]*store.Task, bool) {
	if t.freshStale {
		return nil, false
	}
	ts, ok := t.fresh[id]
	return ts, ok
}

// addChild counts a new child on its parent, held back until the flush.
func (t *tx) addChild(parentID int64, length float64) {
	c := t.pendChildren[parentID]
	c.n++
	c.length += length
	t.pendChildren[parentID] = c
}

// flushChildCount writes the held-back child count of the parent, before its row is read.
func (t *tx) flushChildCount(parentID int64) error {
	c, ok := t.pendChildren[parentID]
	if !ok {
		return nil
	}
	delete(t.pendChildren, parentID)
	return t.x.ItemAddChild(t.ctx, parentID, c.n, c.length)
}

// flushTasks writes the held-back tasks, before anything reads or changes tasks in bulk.
func (t *tx) flushTasks() error {
	if len(t.pendTasks) == 0 {
		return nil
	}
	ps := t.pendTasks
	t.pendTasks = nil
	return t.x.TaskInsertMany(t.ctx, ps)
}

// flushPending writes everything held back.
func (t *tx) flushPending() error {
	for id := range t.pendChildren {
		if err := t.flushChildCount(id); err != nil {
			return err
		}
	}
	if err := t.flushTasks(); err != nil {
		return err
	}
	if len(t.pendEvents) > 0 {
		es := t.pendEvents
		t.pendEvents = nil
		if err := t.x.EventInsertMany(t.ctx, es); err != nil {
			return err
		}
	}
	return nil
}

package engine

import (
	"slices"

	"github.com/sluice-project/sluice/internal/record"
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
// whose events are cached, or for which whether this one fired is known ([unit.readFiring]),
// gets the event held back; any other is written at once.
func (u *unit) addEvent(it *record.Item, event string) (bool, error) {
	if ev, ok := u.events[it.ID]; ok {
		if ev[event] {
			return false, nil
		}
		ev[event] = true
		// New: the set is the item's, read under its lock, which this transaction holds.
		u.pendEvents = append(u.pendEvents, store.EventInsertParams{ItemID: it.ID, Name: event, Now: u.now, New: true})
		return true, nil
	}
	if fired, ok := u.named[it.ID][event]; ok {
		if fired {
			return false, nil
		}
		u.named[it.ID][event] = true
		// New as above: whether it had fired was read under the item's lock.
		u.pendEvents = append(u.pendEvents, store.EventInsertParams{ItemID: it.ID, Name: event, Now: u.now, New: true})
		return true, nil
	}
	return u.x.EventInsert(u.ctx, store.EventInsertParams{ItemID: it.ID, Name: event, Now: u.now})
}

// addTask inserts the task of a step whose needs an event new in this transaction has just met,
// held back until the flush, and forgets the item's known tasks. Such a task cannot exist:
// events are never removed, so a step's needs are met once, by the last of them to fire
// ([tx.resume] inserts its own). [tx.fire] marks such a task New, and the driver inserts it
// without looking for an existing row (on PostgreSQL a plain INSERT, cheaper than ON CONFLICT):
// were the reasoning wrong, the transaction would fail on the unique key rather than make a
// second task. The other callers' tasks (skips, inline runs, a wait's expiry) still leave an
// existing row alone.
func (u *unit) addTask(p store.TaskInsertParams) {
	u.pendTasks = append(u.pendTasks, p)
	delete(u.tasks, p.ItemID)
	if known, ok := u.fresh[p.ItemID]; ok {
		tk := &record.Task{JobID: p.JobID, ItemID: p.ItemID, Step: p.Step, Action: p.Action, Queue: p.Queue, State: record.TaskReady}
		if p.Done != nil {
			tk.State, tk.Error = p.Done.State, p.Done.Error
		}
		u.fresh[p.ItemID] = append(known, tk)
	}
}

// freshTasks returns the tasks of an item created in this transaction, known without a read.
func (u *unit) freshTasks(id int64) ([]*record.Task, bool) {
	if u.freshStale {
		return nil, false
	}
	ts, ok := u.fresh[id]
	return ts, ok
}

// addChild counts a new child on its parent, held back until the flush.
func (u *unit) addChild(parentID int64, length float64) {
	c := u.pendChildren[parentID]
	c.n++
	c.length += length
	u.pendChildren[parentID] = c
}

// flushChildCount writes the held-back child count of the parent, before its row is read.
func (u *unit) flushChildCount(parentID int64) error {
	c, ok := u.pendChildren[parentID]
	if !ok {
		return nil
	}
	delete(u.pendChildren, parentID)
	return u.x.ItemAddChild(u.ctx, store.ItemAddChildParams{ParentID: parentID, N: c.n, Length: c.length})
}

// flushTasks writes the held-back tasks, before anything reads or changes tasks in bulk.
func (u *unit) flushTasks() error {
	if len(u.pendTasks) == 0 {
		return nil
	}
	ps := u.pendTasks
	u.pendTasks = nil
	return u.x.TaskInsertMany(u.ctx, ps)
}

// flushPending writes everything held back. The child counts go last: a parent's row is then
// locked (by its update) only for the commit, not while the children's tasks are written, so
// the transactions of a fan-out that meet on the parent wait for each other less.
func (u *unit) flushPending() error {
	if err := u.flushTasks(); err != nil {
		return err
	}
	if len(u.pendEvents) > 0 {
		es := u.pendEvents
		u.pendEvents = nil
		if err := u.x.EventInsertMany(u.ctx, es); err != nil {
			return err
		}
	}
	ids := make([]int64, 0, len(u.pendChildren))
	for id := range u.pendChildren {
		ids = append(ids, id)
	}
	slices.Sort(ids) // in id order, as items are locked
	for _, id := range ids {
		if err := u.flushChildCount(id); err != nil {
			return err
		}
	}
	return nil
}

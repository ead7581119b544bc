package engine

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// unit is one transaction's unit of work: the store transaction, the rows it has read (and
// locked), and the writes it holds back to make together in multi-row statements (pending.go).
// The rest of the engine reads the database through it.
//
// Its invariants:
//   - Reads see the transaction's writes. A read method makes first the held-back writes that
//     its statement could see (tasks before a read of tasks, child counts before a write of
//     item states that colors with the shares they change); writes the cache already mirrors
//     need no flush (a cached item's n_children is counted up in memory, a cached event set
//     holds its new events).
//   - A row is read once. jobs, items and events keep what was read, and the engine keeps them
//     in step with its own writes; where a write is one the cache cannot mirror (metadata merged
//     by the database), the item is marked stale and [unit.itemNow] reads it again.
//   - tasks holds task rows known for a set of items (a level being settled, a one-step result)
//     and forgets an item's as soon as a task of it is added or changed.
type unit struct {
	ctx    context.Context
	x      store.Executor
	now    time.Time
	jobs   map[int64]*record.Job
	events map[int64]map[string]bool
	// named holds, for locked items whose whole event set is not cached, whether each of some
	// events has fired (read by [unit.readFiring], or held back since): enough to tell whether
	// a batch's events are new without reading every event of every item.
	named map[int64]map[string]bool
	items map[int64]*record.Item // locked in this transaction, kept in step with its writes
	// peeked holds parents read without a lock to create their children (see [tx.parentOf]);
	// their child counts are held back, written at the end, and before any lock of them.
	peeked map[int64]*record.Item
	// stale holds the cached items whose row got writes the cache does not mirror (merged
	// metadata, content type, thumbnail, a reopened error): read again before an inline run.
	stale map[int64]bool
	tasks map[int64][]*record.Task // tasks of the level being settled, read in one statement
	// fresh holds the items created in this transaction, each with the tasks it got here (see
	// pending.go); freshStale says those task states may have changed since (a job's tasks were
	// canceled) and must be read.
	fresh        map[int64][]*record.Task
	kids         map[int64][]*record.Item // parent → its children created in this transaction
	freshStale   bool
	pendTasks    []store.TaskInsertParams
	pendEvents   []store.EventInsertParams
	pendChildren map[int64]childCount
}

func newUnit(ctx context.Context, x store.Executor, now time.Time) unit {
	return unit{ctx: ctx, x: x, now: now, jobs: map[int64]*record.Job{}, events: map[int64]map[string]bool{}, named: map[int64]map[string]bool{},
		items: map[int64]*record.Item{}, peeked: map[int64]*record.Item{}, stale: map[int64]bool{}, tasks: map[int64][]*record.Task{},
		fresh: map[int64][]*record.Task{}, kids: map[int64][]*record.Item{}, pendChildren: map[int64]childCount{}}
}

func (u *unit) job(id int64) (*record.Job, error) {
	if j, ok := u.jobs[id]; ok {
		return j, nil
	}
	j, err := u.x.JobGet(u.ctx, id)
	if err != nil {
		return nil, err
	}
	if j.State == record.JobFailed || j.State == record.JobComplete {
		// A job in a state a retry reopens: decide on it under its lock. Otherwise this
		// transaction could settle an item as a stopped job's (without waiting for its
		// collector) while a retry, in another process, reopens the job and its items, and
		// commit after it: the job would complete without the collector.
		if j, err = u.x.JobLock(u.ctx, id); err != nil {
			return nil, err
		}
	}
	u.jobs[id] = j
	return j, nil
}

// lockItems locks and caches the items not yet locked in this transaction, in one call.
func (u *unit) lockItems(ids []int64) error {
	var want []int64
	for _, id := range ids {
		if _, ok := u.items[id]; !ok {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	slices.Sort(want)
	want = slices.Compact(want)
	for _, id := range want {
		if err := u.flushChildCount(id); err != nil { // a peeked parent's
			return err
		}
	}
	items, err := u.x.ItemLockMany(u.ctx, want)
	if err != nil {
		return err
	}
	for _, it := range items {
		u.items[it.ID] = it
	}
	return nil
}

// item returns the item, locking it on first use in this transaction.
func (u *unit) item(id int64) (*record.Item, error) {
	if it, ok := u.items[id]; ok {
		return it, nil
	}
	if err := u.flushChildCount(id); err != nil { // a peeked parent's
		return nil, err
	}
	it, err := u.x.ItemLock(u.ctx, id)
	if err != nil {
		return nil, err
	}
	u.items[id] = it
	return it, nil
}

// itemNow returns the item as its row is now: the cached copy, unless a write this transaction
// made is one the cache does not mirror (it is stale), in which case the row is read again —
// after its held-back child count, which the row must show. The cached copy is not replaced:
// the engine keeps that one in step.
func (u *unit) itemNow(it *record.Item) (*record.Item, error) {
	if !u.stale[it.ID] {
		return it, nil
	}
	if err := u.flushChildCount(it.ID); err != nil {
		return nil, err
	}
	return u.x.ItemLock(u.ctx, it.ID)
}

// created caches an item this transaction inserted: locked, with no events and no tasks yet.
func (u *unit) created(it *record.Item) {
	u.items[it.ID] = it
	u.events[it.ID] = map[string]bool{}
	u.fresh[it.ID] = nil
}

func (u *unit) itemEvents(itemID int64) (map[string]bool, error) {
	ev, err := u.eventsOnce(itemID)
	if err == nil {
		u.events[itemID] = ev
		delete(u.named, itemID) // the whole set holds what it knew
	}
	return ev, err
}

// eventsOnce reads the item's events without caching them (a retry's resume reads every item of
// a job: caching all their events would hold the job in memory). An item whose events are cached
// has its held-back events there.
func (u *unit) eventsOnce(itemID int64) (map[string]bool, error) {
	if ev, ok := u.events[itemID]; ok {
		return ev, nil
	}
	names, err := u.x.EventListByItem(u.ctx, itemID)
	if err != nil {
		return nil, err
	}
	ev := make(map[string]bool, len(names))
	for _, n := range names {
		ev[n] = true
	}
	addNamed(ev, u.named[itemID]) // its held-back events are not in the database yet
	return ev, nil
}

// addNamed adds to the event set the events named says have fired.
func addNamed(ev, named map[string]bool) {
	for n, fired := range named {
		if fired {
			ev[n] = true
		}
	}
}

// readFiring reads, in one statement, whether the events fire[i] have fired on the locked items
// ids[i] whose events are not cached, and keeps the answers in u.named: a batch of results then
// fires its events with no statement per event, and without reading each item's whole set (a
// chain's item has an event per step it ran). As with [unit.readEvents], the items must be
// locked in this transaction.
func (u *unit) readFiring(ids []int64, fire [][]string) error {
	var qIDs []int64
	var qNames []string
	for i, id := range ids {
		if _, ok := u.events[id]; ok || u.items[id] == nil {
			continue
		}
		known := u.named[id]
		for _, n := range fire[i] {
			if _, ok := known[n]; ok {
				continue
			}
			if known == nil {
				known = map[string]bool{}
				u.named[id] = known
			}
			known[n] = false // until the read says otherwise
			qIDs = append(qIDs, id)
			qNames = append(qNames, n)
		}
	}
	if len(qIDs) < 2 {
		// One event costs a statement either way: leave it to addEvent's own insert.
		for i, id := range qIDs {
			delete(u.named[id], qNames[i])
		}
		return nil
	}
	byItem, err := u.x.EventListNamed(u.ctx, qIDs, qNames)
	if err != nil {
		return err
	}
	for id, names := range byItem {
		for _, n := range names {
			u.named[id][n] = true
		}
	}
	return nil
}

// readEvents reads and caches, in one statement, the events of the locked items whose events
// are not cached: a batch of results then fires its events with no statement per event (an
// event new to a cached set is held back and written with the rest, [unit.addEvent]). The
// items must be locked in this transaction: their events are written only under their lock,
// so the cached sets stay true until the commit.
func (u *unit) readEvents(ids []int64) error {
	var need []int64
	for _, id := range ids {
		if _, ok := u.events[id]; !ok && u.items[id] != nil {
			need = append(need, id)
		}
	}
	if len(need) < 2 {
		return nil // one item's first event costs a statement either way
	}
	slices.Sort(need)
	need = slices.Compact(need)
	byItem, err := u.x.EventListByItems(u.ctx, need)
	if err != nil {
		return err
	}
	for _, id := range need {
		ev := make(map[string]bool, len(byItem[id])+1)
		for _, n := range byItem[id] {
			ev[n] = true
		}
		addNamed(ev, u.named[id])
		delete(u.named, id)
		u.events[id] = ev
	}
	return nil
}

// tasksOf returns the item's tasks: known (a level's, or those of an item created in this
// transaction), or read after the held-back tasks are written.
func (u *unit) tasksOf(itemID int64) ([]*record.Task, error) {
	if ts, ok := u.tasks[itemID]; ok {
		return ts, nil
	}
	if ts, ok := u.freshTasks(itemID); ok {
		return ts, nil
	}
	if err := u.flushTasks(); err != nil {
		return nil, err
	}
	return u.x.TaskListByItem(u.ctx, itemID)
}

// jobTasks reads a page of the job's tasks, after the held-back tasks are written.
func (u *unit) jobTasks(p store.TaskListParams) ([]*record.Task, error) {
	if err := u.flushTasks(); err != nil {
		return nil, err
	}
	return u.x.TaskListByJob(u.ctx, p)
}

// jobHasOpenItems reports whether the job has an item not yet ingested in the database. Items
// are inserted at once, and the settler writes its moves before jobs are closed: nothing held
// back changes the answer.
func (u *unit) jobHasOpenItems(jobID int64) (bool, error) {
	return u.x.JobHasOpenItems(u.ctx, jobID)
}

// readTasks reads the tasks of the items whose tasks are not known, in one statement, and keeps
// them (until [unit.forgetTasks]).
func (u *unit) readTasks(ids []int64) error {
	var need []int64
	for _, id := range ids {
		if _, known := u.freshTasks(id); known {
			continue
		}
		if _, known := u.tasks[id]; !known {
			need = append(need, id)
		}
	}
	if len(need) < 2 {
		return nil // settle reads one item's tasks itself
	}
	if err := u.flushTasks(); err != nil {
		return err
	}
	tasks, err := u.x.TaskListByItems(u.ctx, need)
	if err != nil {
		return err
	}
	for _, id := range need {
		u.tasks[id] = nil
	}
	for _, tk := range tasks {
		u.tasks[tk.ItemID] = append(u.tasks[tk.ItemID], tk)
	}
	return nil
}

// forgetTasks forgets the known tasks of every item (their states changed, or a level ended).
func (u *unit) forgetTasks() { clear(u.tasks) }

// cancelJobTasks cancels the job's ready and blocked tasks, the held-back ones with them, with
// the error reason, and returns the ids of its running ones. Every known task state may have
// changed.
func (u *unit) cancelJobTasks(jobID int64, reason string) ([]int64, error) {
	if err := u.flushTasks(); err != nil {
		return nil, err
	}
	u.freshStale = true
	running, err := u.x.TaskCancelJob(u.ctx, store.TaskCancelJobParams{JobID: jobID, Reason: reason, Now: u.now})
	if err != nil {
		return nil, err
	}
	u.forgetTasks()
	return running, nil
}

// setItemStates writes item moves. Ingesting colors an item with its share as the database has
// it: the held-back child counts (which reduce shares) are written first.
func (u *unit) setItemStates(p store.ItemSetStateManyParams) error {
	for id := range u.pendChildren {
		if err := u.flushChildCount(id); err != nil {
			return err
		}
	}
	_, err := u.x.ItemSetStateMany(u.ctx, p)
	return err
}

// hasChildIn reports whether the item has a child in one of the states: from memory when every
// child was created in this transaction (their states are kept in step), else from the database
// (the settler writes a level's moves before it settles the level above).
func (u *unit) hasChildIn(it *record.Item, states []record.ItemState) (bool, error) {
	if it.NChildren == 0 {
		return false, nil
	}
	if kids := u.kids[it.ID]; len(kids) == it.NChildren {
		for _, k := range kids {
			if slices.Contains(states, k.State) {
				return true, nil
			}
		}
		return false, nil
	}
	return u.x.ItemHasChildInState(u.ctx, it.ID, states)
}

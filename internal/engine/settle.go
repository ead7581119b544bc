package engine

import (
	"cmp"
	"encoding/json"
	"slices"
	"sort"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// settler is the part of a transaction that settles items: it moves each item it is told of
// (markDirty) as far along written → processed → ingested as the database allows.
//
// Its invariants:
//   - Deepest level first: a level's items are settled, and their moves written (flushMoves),
//     before any item of the level above is looked at, so a parent sees its children's states
//     and a batch of children settles its parent once.
//   - An item with a task made ready in this transaction (busy) is not settled: that task runs
//     after the commit.
//   - Moves are written in one statement per (from, to) pair, before anything reads item
//     states back (the level above, the job's open items).
//   - Progress colored in memory (colored) is written once, at the end, for the items not
//     ingested by then (ingesting colors all of an item's share).
type settler struct {
	dirty   map[int64]int                 // item id → depth
	busy    map[int64]bool                // items that got a ready task in this transaction: not settling
	moves   map[int64][2]record.ItemState // item → (state in the database, new state), written by flushMoves
	colored map[int64]bool                // items whose colored progress changed in memory
	// uncolored are items ingested without coloring their share: their job was canceled or
	// failed, so their work was not done (see moveItem).
	uncolored map[int64]bool
}

func newSettler() settler {
	return settler{dirty: map[int64]int{}, busy: map[int64]bool{}, moves: map[int64][2]record.ItemState{}, colored: map[int64]bool{}, uncolored: map[int64]bool{}}
}

// settleDirty settles the dirty items, a level at a time, deepest first; settling an item marks
// its parent dirty.
func (t *tx) settleDirty() error {
	for len(t.dirty) > 0 {
		// Sorted with their depths at hand: a map lookup per comparison cost 5 % of a
		// batch of 1,000 results' CPU.
		byDepth := make([][2]int64, 0, len(t.dirty)) // depth, id
		for id, d := range t.dirty {
			byDepth = append(byDepth, [2]int64{int64(d), id})
		}
		slices.SortFunc(byDepth, func(a, b [2]int64) int {
			if a[0] != b[0] {
				return cmp.Compare(b[0], a[0])
			}
			return cmp.Compare(a[1], b[1])
		})
		ids := make([]int64, len(byDepth))
		for i, p := range byDepth {
			ids[i] = p[1]
		}
		// Settle only the deepest level now; parents marked dirty meanwhile join the map.
		depth := t.dirty[ids[0]]
		level := ids[:0]
		for _, id := range ids {
			if t.dirty[id] != depth {
				break
			}
			delete(t.dirty, id)
			level = append(level, id)
		}
		if err := t.loadLevel(level); err != nil {
			return err
		}
		for _, id := range level {
			if err := t.settle(id); err != nil {
				return err
			}
		}
		t.forgetTasks()
		if err := t.flushMoves(); err != nil {
			return err
		}
	}
	return nil
}

// writeColors writes the progress colored in memory, in one statement.
func (t *tx) writeColors() error {
	var cids []int64
	var cvals []float64
	for id := range t.colored {
		it := t.items[id]
		if it == nil || it.State == record.ItemIngested && !t.uncolored[id] {
			continue // ingesting wrote colored = share
		}
		cids, cvals = append(cids, id), append(cvals, it.Colored)
	}
	return t.x.ItemColorMany(t.ctx, cids, cvals)
}

var openStates = []record.ItemState{record.ItemCreated, record.ItemWritten}

var unfinishedStates = []record.ItemState{record.ItemCreated, record.ItemWritten, record.ItemProcessed}

// settle moves an item as far along written → processed → ingested as the database allows.
func (t *tx) settle(id int64) error {
	if t.busy[id] {
		return nil
	}
	it, err := t.item(id)
	if err != nil {
		return err
	}
	def, job, err := t.def(it.JobID)
	if err != nil {
		return err
	}
	if it.State == record.ItemWritten {
		tasks, err := t.tasksOf(id)
		if err != nil {
			return err
		}
		has := make(map[string]bool, len(tasks))
		var blocked []*record.Task
		for _, tk := range tasks {
			if tk.State.Active() {
				return nil // still working
			}
			if tk.State == record.TaskBlocked {
				blocked = append(blocked, tk)
			}
			has[tk.Step] = true
		}
		if err := t.reviseError(it, tasks); err != nil {
			return err
		}
		openChildren, err := t.hasChildIn(it, openStates)
		if err != nil {
			return err
		}
		if job.State == record.JobRunning && len(blocked) > 0 && !openChildren {
			// Collectors a retry blocked: children.done fired before, and holds again.
			creating, err := t.mayCreateChildren(def, it, has)
			if err != nil || creating {
				return err
			}
			return t.unblock(it, blocked)
		}
		if msg := endedError(job.State); msg != "" {
			if err := t.settleEnded(it, msg); err != nil {
				return err
			}
		}
		if job.State == record.JobRunning {
			if def.NeedsChildrenDone() && !openChildren {
				// fire leaves an event that fired alone: only a cached set saves the try.
				if ev, ok := t.events[id]; !ok || !ev[workflow.EventChildrenDone] {
					// Not while a step that may create children can still run.
					creating, err := t.mayCreateChildren(def, it, has)
					if err != nil {
						return err
					}
					if creating {
						return nil // that step waits for an event to come, and holds the item open
					}
					wasReady := t.ready
					t.ready = false
					if err := t.fire(it, workflow.EventChildrenDone); err != nil {
						return err
					}
					madeReady := t.ready
					t.ready = t.ready || wasReady
					if madeReady {
						return nil // a collector is now ready
					}
				}
			}
			if len(has) < len(def.Steps) {
				waiting, err := t.waiting(def, it, has, openChildren)
				if err != nil || waiting {
					return err
				}
			}
		}
		if it.NChildren == 0 {
			// No children: processed and ingested at once, in one write.
			return t.moveItem(it, record.ItemIngested)
		}
		if err := t.moveItem(it, record.ItemProcessed); err != nil {
			return err
		}
	}
	if it.State == record.ItemProcessed {
		open, err := t.hasChildIn(it, unfinishedStates)
		if err != nil || open {
			return err
		}
		return t.moveItem(it, record.ItemIngested)
	}
	return nil
}

// reviseError replaces an item's error that none of its ended tasks carries any more: a retry
// re-ran the task that left it, and it ended without that error. The item gets the error of its
// first task that ended with one (failed, canceled, or skipped past its deadline), or none, and
// its error output is superseded in the same transaction: a new one is written by whatever
// writes them (the documents workflow's ingest, which runs after this), never two at once.
func (t *tx) reviseError(it *record.Item, tasks []*record.Task) error {
	if it.Error == "" {
		return nil
	}
	next := ""
	for _, tk := range tasks {
		if tk.Error == "" || tk.State != record.TaskFailed && tk.State != record.TaskCanceled && tk.State != record.TaskSkipped {
			continue
		}
		if tk.Error == it.Error {
			return nil
		}
		if next == "" {
			next = tk.Error
		}
	}
	if err := t.x.ItemUpdate(t.ctx, store.ItemUpdateParams{ID: it.ID, Error: next, ReplaceError: true}); err != nil {
		return err
	}
	t.stale[it.ID] = true
	it.Error = next
	_, err := t.x.OutputSupersede(t.ctx, store.OutputSupersedeParams{ItemID: it.ID, Kind: ErrorOutputKind, Now: t.now})
	return err
}

// unblock makes ready the collectors of the item that a retry blocked: the item's other tasks
// have ended again and its children are done.
func (t *tx) unblock(it *record.Item, blocked []*record.Task) error {
	for _, tk := range blocked {
		ok, err := t.x.TaskRetry(t.ctx, store.TaskRetryParams{ID: tk.ID, Now: t.now})
		if err != nil {
			return err
		}
		if ok {
			t.readyIn(tk.Queue)
		}
	}
	delete(t.tasks, it.ID)
	t.busy[it.ID] = true
	return nil
}

// settleEnded settles, as an ordinary result, a written item of a job that was canceled or
// failed: the item gets the error msg ([CanceledError], [JobFailedError]) unless it has an
// error of its own, and the error output the documents workflow's ingest would write for it,
// and it is not colored as done when it moves on, so that the job's progress says how much was
// done.
func (t *tx) settleEnded(it *record.Item, msg string) error {
	if it.Error == "" {
		if err := t.x.ItemUpdate(t.ctx, store.ItemUpdateParams{ID: it.ID, Error: msg}); err != nil {
			return err
		}
		t.stale[it.ID] = true
		it.Error = msg
	}
	v, err := json.Marshal(store.ErrorValue{Name: it.Name, Message: it.Error})
	if err != nil {
		return err
	}
	if err := t.x.OutputPut(t.ctx, store.OutputPutParams{ItemID: it.ID, JobID: it.JobID, Kind: ErrorOutputKind, Value: v, Now: t.now}); err != nil {
		return err
	}
	t.uncolored[it.ID] = true
	return nil
}

// moveItem moves the item to state (coloring all of its share when ingested) and marks its parent
// for settling, since a child's progress may let the parent move too.
// The write is queued and made for the whole level at once by flushMoves, before anything reads
// these items' states back (the parent level, the job's open items).
func (t *tx) moveItem(it *record.Item, state record.ItemState) error {
	m, ok := t.moves[it.ID]
	if !ok {
		m[0] = it.State
	}
	m[1] = state
	t.moves[it.ID] = m
	it.State = state
	if state == record.ItemIngested {
		if j := t.jobs[it.JobID]; j != nil && j.State != record.JobRunning && j.State != record.JobComplete {
			// Settled because its job was canceled or failed, not because its work was done:
			// it keeps what its tasks colored, so the job's progress is the work really done.
			t.uncolored[it.ID] = true
		}
		if !t.uncolored[it.ID] {
			it.Colored = it.Share
		}
		t.touched[it.JobID] = true
	}
	if state == record.ItemIngested && it.ParentID == 0 {
		t.closing[it.JobID] = true
	}
	if it.ParentID != 0 {
		t.dirty[it.ParentID] = it.Depth - 1
	}
	return nil
}

// flushMoves writes the queued item moves, one statement per (from, to) pair.
func (t *tx) flushMoves() error {
	if len(t.moves) == 0 {
		return nil
	}
	// uncolored: an ingest that colors nothing (see moveItem)
	type move struct {
		from, to  record.ItemState
		uncolored bool
	}
	groups := map[move][]int64{}
	var keys []move
	for id, m := range t.moves {
		k := move{m[0], m[1], m[1] == record.ItemIngested && t.uncolored[id]}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], id)
	}
	clear(t.moves)
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		return a.from < b.from || a.from == b.from && (a.to < b.to || a.to == b.to && !a.uncolored && b.uncolored)
	})
	for _, key := range keys {
		ids := groups[key]
		slices.Sort(ids)
		p := store.ItemSetStateManyParams{IDs: ids, From: key.from, To: key.to, Now: t.now, ColorAll: key.to == record.ItemIngested && !key.uncolored}
		if err := t.setItemStates(p); err != nil {
			return err
		}
	}
	return nil
}

// loadLevel reads what settling a level needs in a few statements: the items not yet read, and
// the tasks of those still written.
func (t *tx) loadLevel(level []int64) error {
	if len(level) < 2 {
		return nil
	}
	if err := t.lockItems(level); err != nil {
		return err
	}
	var written, collecting []int64
	for _, id := range level {
		if it := t.items[id]; it != nil && it.State == record.ItemWritten && !t.busy[id] {
			written = append(written, id)
			def, _, err := t.def(it.JobID)
			if err != nil {
				return err
			}
			if def.NeedsChildrenDone() {
				collecting = append(collecting, id)
			}
		}
	}
	if err := t.readTasks(written); err != nil {
		return err
	}
	// Settling such an item fires children.done on it once its children are done (a leaf's at
	// once): with its events cached, each is held back, not a statement of its own.
	return t.readEvents(collecting)
}

// waiting reports whether a step of the item that has not run could still be unblocked by an
// event to come: a declared external event, or children.done while children are open.
func (t *tx) waiting(def *workflow.Definition, it *record.Item, has map[string]bool, openChildren bool) (bool, error) {
	// A need can only be waited for if it is external, or children.done with children open: a
	// step with no such need can never be unblocked, whatever the item's events (and they are
	// read only when some step has one).
	var ev map[string]bool
	for _, s := range def.Steps {
		if has[s.Name] {
			continue
		}
		waitable := false
		for _, n := range s.Needs {
			if def.IsExternal(n) || (n == workflow.EventChildrenDone && openChildren) {
				waitable = true
				break
			}
		}
		if !waitable {
			continue
		}
		if ev == nil {
			var err error
			if ev, err = t.itemEvents(it.ID); err != nil {
				return false, err
			}
		}
		possible := true
		missing := 0
		for _, n := range s.Needs {
			if ev[n] {
				continue
			}
			missing++
			switch {
			case def.IsExternal(n):
			case n == workflow.EventChildrenDone && openChildren:
			default:
				possible = false
			}
		}
		if possible && missing > 0 {
			return true, nil
		}
	}
	return false, nil
}

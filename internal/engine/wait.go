package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// startWait records the wait of a step with a deadline once every need it still misses is an
// external event: its deadline counts from then (a wait already recorded keeps its own).
func (t *tx) startWait(def *workflow.Definition, it *record.Item, s *workflow.Step) error {
	ev, err := t.itemEvents(it.ID)
	if err != nil {
		return err
	}
	missing := false
	for _, n := range s.Needs {
		if ev[n] {
			continue
		}
		if !def.IsExternal(n) {
			return nil // not waiting for the outside yet
		}
		missing = true
	}
	if !missing {
		return nil
	}
	if s.When != "" {
		ok, err := t.applies(it, s.Name)
		if err != nil || !ok {
			return err
		}
	}
	return t.x.WaitInsert(t.ctx, store.Wait{JobID: it.JobID, ItemID: it.ID, Step: s.Name, Due: t.now.Add(time.Duration(s.Deadline))})
}

// ExpireWaits ends up to limit waits whose deadline has passed, in one transaction, and returns
// how many it ended. A step still waiting for its external events is skipped with the error
// "deadline: waited D for E", which becomes its item's error, and fires its failure events; it
// will not run if the event comes later. A wait whose step has run meanwhile, or whose job is not
// running, is only deleted (a failed job's retry does not restart it). The maintenance leader
// calls it every third of the lease.
func (e *Engine) ExpireWaits(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		limit = 1000
	}
	n := 0
	err := e.Run(ctx, func(tx *Tx) error {
		t := tx.t
		waits, err := t.x.WaitListDue(t.ctx, t.now, limit)
		if err != nil {
			return err
		}
		n = 0
		for _, w := range waits {
			if err := t.x.WaitDelete(t.ctx, w.ItemID, w.Step); err != nil {
				return err
			}
			expired, err := t.expire(w)
			if err != nil {
				return err
			}
			if expired {
				n++
			}
		}
		return nil
	})
	return n, err
}

// expire ends one due wait, reporting whether its step was still waiting.
func (t *tx) expire(w store.Wait) (bool, error) {
	it, err := t.item(w.ItemID)
	if err != nil {
		return false, err
	}
	def, job, err := t.def(it.JobID)
	if err != nil {
		return false, err
	}
	s := def.Step(w.Step)
	if s == nil || job.State != record.JobRunning {
		return false, nil
	}
	tasks, err := t.tasksOf(it.ID)
	if err != nil {
		return false, err
	}
	if slices.ContainsFunc(tasks, func(tk *record.Task) bool { return tk.Step == s.Name }) {
		return false, nil // it ran (or was skipped) meanwhile
	}
	ev, err := t.itemEvents(it.ID)
	if err != nil {
		return false, err
	}
	var missing []string
	for _, n := range s.Needs {
		if !ev[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return false, nil
	}
	msg := fmt.Sprintf("deadline: waited %s for %s", s.Deadline, strings.Join(missing, ", "))
	t.addTask(store.TaskInsertParams{
		JobID: it.JobID, ItemID: it.ID, Step: s.Name, Action: s.Action, Queue: t.e.Queue(def, s),
		MaxAttempts: s.MaxAttempts(), SortKey: it.SortKey, ProgressWeight: t.e.weight(s), Now: t.now,
		Done: &store.TaskDone{State: record.TaskSkipped, Error: msg},
	})
	t.markDirty(it)
	if it.Error == "" {
		if err := t.x.ItemUpdate(t.ctx, store.ItemUpdateParams{ID: it.ID, Error: msg}); err != nil {
			return false, err
		}
		t.stale[it.ID] = true
		it.Error = msg
	}
	for _, ev := range s.Failure {
		if err := t.fire(it, ev); err != nil {
			return false, err
		}
	}
	return true, nil
}

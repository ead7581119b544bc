package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/record"
)

// forgive decides whether a task's lost attempt counts against its bound. It does not when the
// attempt made durable progress (it committed children: an unpack resumes after them, so a task
// longer than the interval between crashes still finishes), nor when the task was only a suspect
// (others ran beside it when the process died) and has been forgiven that fewer than
// [SuspectAllowance] times. It returns the note for the attempt's error and how many lost
// attempts of the task, this one included, are forgiven.
func (tt *tx) forgive(task *record.Task, suspect bool, running int) (string, int, error) {
	atts, err := tt.x.AttemptList(tt.ctx, task.ID)
	if err != nil {
		return "", 0, err
	}
	forgiven, suspected := 0, 0
	for _, a := range atts {
		if i := strings.Index(a.Error, forgivenMark); i >= 0 {
			forgiven++
			if strings.Contains(a.Error[i:], "a suspect") {
				suspected++
			}
		}
	}
	// A page at a time: a fan-out of 100,000 children is not held in memory to be counted.
	made := 0
	for from := 0; ; {
		kids, err := tt.x.ItemListChildrenFrom(tt.ctx, task.ItemID, task.Step, from, 1000)
		if err != nil {
			return "", 0, err
		}
		for _, k := range kids {
			if !k.CreatedAt.Before(task.StartedAt) {
				made++
			}
		}
		if len(kids) < 1000 {
			break
		}
		from = kids[len(kids)-1].Ordinal + 1
	}
	switch {
	case made > 0:
		return fmt.Sprintf("%sit committed %d children first", forgivenMark, made), forgiven + 1, nil
	case suspect && suspected < SuspectAllowance:
		return fmt.Sprintf("%s%d tasks were running when the process died, so it is a suspect", forgivenMark, running), forgiven + 1, nil
	}
	return "", forgiven, nil
}

// ReclaimParams configures [Engine.Reclaim].
type ReclaimParams struct {
	// All reclaims every running task, not only expired ones: used by the embedded engine at
	// start, when the data-dir lock proves no other process runs them.
	All   bool
	Limit int
}

// Reclaim puts running tasks whose lease expired back to ready (their worker is gone), or fails
// them with a specific error once their attempts are spent (DESIGN §4.4). It returns how many
// tasks it reclaimed.
func (e *Engine) Reclaim(ctx context.Context, p ReclaimParams) (int, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	now := e.Now()
	cutoff := now
	if p.All {
		cutoff = time.Unix(1<<40, 0) // every running task
	}
	n := 0
	err := e.Run(ctx, func(t *Tx) error {
		tasks, err := t.t.x.TaskGetStuck(t.t.ctx, cutoff, p.Limit)
		if err != nil {
			return err
		}
		n = len(tasks)
		// The embedded engine's restart reclaims everything its dead process ran: each of those
		// tasks is a suspect, not the culprit, when others ran beside it.
		suspects := p.All && len(tasks) > 1
		for _, task := range tasks {
			r := &Result{Task: task, Owner: task.LeaseOwner, Started: task.StartedAt, Lost: true}
			why, forgiven, err := t.t.forgive(task, suspects, len(tasks))
			if err != nil {
				return err
			}
			r.Forgiven = forgiven
			r.Err = fmt.Errorf("worker lost (lease of %s expired)%s", task.LeaseOwner, why)
			if err := t.Apply(r); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

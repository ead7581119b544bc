package engine

import (
	"github.com/sluice-project/sluice/internal/store"
)

// endJob moves a running job to a final state, canceling its ready tasks and asking running ones to stop.
func (t *tx) endJob(job *store.Job, state, reason string) error {
	ok, err := t.x.JobSetState(t.ctx, store.JobSetStateParams{ID: job.ID, State: state, Error: reason, Now: t.now})
	if err != nil || !ok {
		return err
	}
	job.State = state
	t.ended[job.ID] = state
	if state == store.JobComplete {
		return nil
	}
	// The held-back tasks are canceled with the others, and the known ones change state.
	if err := t.flushTasks(); err != nil {
		return err
	}
	t.freshStale = true
	running, err := t.x.TaskCancelJob(t.ctx, job.ID, "canceled", t.now)
	if err != nil {
		return err
	}
	clear(t.tasks) // their states changed
	t.cancel = append(t.cancel, running...)
	return t.releaseJobClaims(t.ctx, job.ID)
}

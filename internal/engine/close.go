package engine

import (
	"fmt"
	"sort"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// closer is the part of a transaction that ends jobs: a job completes when it is sealed, running,
// and has no item left that is not ingested; [tx.endJob] also fails and cancels jobs.
//
// Its invariants:
//   - Only a job this transaction touched (an item of it settled or changed, it was sealed or
//     retried) is looked at, after every item is settled.
//   - A job this transaction may close — it sealed the job or ingested one of its roots (the
//     last item of a job to be ingested is a root) — is decided on under the job's row lock
//     once it is sealed: two transactions that each close the job's last open items then cannot
//     both miss the other's writes. While it may be unsealed, a transaction that ingested one of
//     its roots reads it under its ingest lock, shared ([store.Executor.JobIngestLock]), which
//     the seal takes exclusive: read unsealed, the job cannot end in this transaction, and its
//     seal looks for open items after this transaction committed; read sealed, the seal has
//     committed and the row lock decides. Transactions ingesting roots of a job that still gets
//     roots then do not take turns on its row with each other, nor with the inserts of its
//     roots (which add to its total).
//   - Ending a job other than by completing it cancels its ready, blocked and held-back tasks in
//     the same transaction; the running ones are asked to stop once it commits.
type closer struct {
	touched map[int64]bool
	// closing holds the jobs this transaction may end: it sealed them or ingested one of their
	// roots.
	closing map[int64]bool
}

func newCloser() closer {
	return closer{touched: map[int64]bool{}, closing: map[int64]bool{}}
}

// mayClose notes that this transaction may end the job (it sealed it, or ingested a root).
func (c *closer) mayClose(jobID int64) {
	c.touched[jobID] = true
	c.closing[jobID] = true
}

// closeJobs completes the touched jobs that are sealed and have nothing left open.
func (t *tx) closeJobs() error {
	jobs := make([]int64, 0, len(t.touched))
	for id := range t.touched {
		jobs = append(jobs, id)
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i] < jobs[j] })
	for _, id := range jobs {
		job, err := t.job(id)
		if err != nil {
			return err
		}
		if t.closing[id] && job.State == record.JobRunning {
			// Without the locks two transactions that each close the job's last open items (or
			// one that seals it and one that ingests its last root) could each miss the other's
			// uncommitted writes, and the job would never end (Postgres, READ COMMITTED).
			if !job.Sealed { // as read before: a job once sealed stays so
				read, err := t.x.JobIngestLock(t.ctx, id)
				if err != nil {
					return err
				}
				*job = *read
				if job.State != record.JobRunning || !job.Sealed {
					continue // it may still get roots; its seal sees this transaction's writes
				}
			}
			locked, err := t.x.JobLock(t.ctx, id)
			if err != nil {
				return err
			}
			*job = *locked
		}
		if job.State != record.JobRunning || !job.Sealed {
			continue // an unsealed job may still get roots
		}
		open := false
		for _, it := range t.items {
			if it.JobID == id && it.State != record.ItemIngested {
				open = true // one of its items, locked here, is still open
				break
			}
		}
		if !open {
			if open, err = t.jobHasOpenItems(id); err != nil {
				return err
			}
		}
		if !open {
			if err := t.endJob(job, record.JobComplete, ""); err != nil {
				return err
			}
		}
	}
	return nil
}

// endJob moves a running job to a final state, canceling its ready tasks and asking running ones to stop.
func (t *tx) endJob(job *record.Job, state record.JobState, reason string) error {
	ok, err := t.x.JobSetState(t.ctx, store.JobSetStateParams{ID: job.ID, State: state, Error: reason, Now: t.now})
	if err != nil || !ok {
		return err
	}
	job.State = state
	t.ended[job.ID] = state
	if state == record.JobComplete {
		return nil
	}
	running, err := t.cancelJobTasks(job.ID, endedError(state))
	if err != nil {
		return err
	}
	t.cancel = append(t.cancel, running...)
	if err := t.releaseJobClaims(t.ctx, job.ID); err != nil {
		return err
	}
	return t.settleOpenItems(job.ID)
}

// settleOpenItems marks every written item of the job for settling: in a canceled or failed job
// each settles with its error (see [tx.settleEnded]), or once its running task's result comes in.
func (t *tx) settleOpenItems(jobID int64) error {
	const page = 1000
	for after := ""; ; {
		items, err := t.x.ItemList(t.ctx, store.ItemListParams{JobID: jobID, States: openStates, AfterSort: after, Limit: page})
		if err != nil {
			return fmt.Errorf("settle the open items of job %d: %w", jobID, err)
		}
		for _, it := range items {
			t.markDirty(it)
		}
		if len(items) < page {
			return nil
		}
		after = items[len(items)-1].SortKey
	}
}

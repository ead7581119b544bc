package sqlite

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// A brief batch (TaskGetAvailable with Brief, in a transaction) is leased without writing its
// tasks: their rows stay ready at the attempt before until the finishes, the batch's only write
// of them. A record of the batch (held_leases) keeps the attempts of a process that dies counted:
// TaskGetStuck turns an expired record's tasks into expired leases. With one writer the record
// cannot commit beside the transaction that holds the batch, as on Postgres: the pick commits
// with its record, and the transaction goes on in a new one on the same connection, which
// deletes the record and commits it with the finishes. The writer is never let go in between,
// so nothing else changes the tasks; and while the batch runs nothing else writes at all, so
// nothing expires its record before it ends (it needs no renewal). A transaction that rolls
// back leaves the record, which then becomes written leases (releaseBrief).

// taskHoldCols are the columns of a held pick (qTaskHold): taskCols but those hold sets (state,
// lease_owner, lease_expires, started_at). Each column read costs the driver two or three calls
// into SQLite, each taking and releasing the connection's mutex: the four saved 1.3 µs of the
// pick's 6.5 per task.
const taskHoldCols = `id, job_id, item_id, step, action, queue, attempt, max_attempts, run_after, error, sort_key, progress_weight, created_at, finished_at`

// scanHeldTask reads a row of taskHoldCols, a ready task.
func scanHeldTask(sc interface{ Scan(...any) error }) (*record.Task, error) {
	t := record.Task{State: record.TaskReady}
	var runAfter, created, finished int64
	if err := sc.Scan(&t.ID, &t.JobID, &t.ItemID, &t.Step, &t.Action, &t.Queue, &t.Attempt, &t.MaxAttempts, &runAfter, &t.Error, &t.SortKey, &t.ProgressWeight, &created, &finished); err != nil {
		return nil, mapErr(err)
	}
	t.RunAfter, t.CreatedAt, t.FinishedAt = fromMicros(runAfter), fromMicros(created), fromMicros(finished)
	return &t, nil
}

// qTaskHold is qTaskLease's pick alone, for a brief batch: it writes nothing.
func qTaskHold(limit int) string {
	return `SELECT ` + taskHoldCols + ` FROM tasks INDEXED BY tasks_ready WHERE state = 'ready' AND queue = ? AND +run_after <= ? ORDER BY job_id, sort_key LIMIT ` + strconv.Itoa(max(limit, 0))
}

// briefBatch is the brief batch of one transaction.
type briefBatch struct {
	id       int64         // its record's
	attempts map[int64]int // each task's attempt run
}

// held reports whether p finishes an attempt of the transaction's brief batch.
func (q *queries) held(p store.TaskFinishParams) bool {
	if q.brief == nil {
		return false
	}
	a, ok := q.brief.attempts[p.ID]
	return ok && a == p.Attempt
}

// hold leases a brief batch in the transaction (see above).
func (q *queries) hold(ctx context.Context, p store.TaskGetAvailableParams) ([]*record.Task, error) {
	if q.brief != nil {
		return nil, fmt.Errorf("hold tasks: the transaction holds a brief batch already")
	}
	var out []*record.Task
	now := micros(p.Now)
	for i, queue := range p.Queues {
		ts, err := q.listTasksWith(ctx, q.w, scanHeldTask, qTaskHold(p.Max[i]), queue, now)
		if err != nil {
			return nil, fmt.Errorf("hold tasks of %q: %w", queue, mapErr(err))
		}
		out = append(out, ts...)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b := &briefBatch{attempts: make(map[int64]int, len(out))}
	ids, attempts := make([]int64, len(out)), make([]int64, len(out))
	for i, t := range out {
		t.State, t.Attempt, t.LeaseOwner, t.LeaseExpires, t.StartedAt = record.TaskRunning, t.Attempt+1, p.Owner, p.LeaseUntil, p.Now
		b.attempts[t.ID] = t.Attempt
		ids[i], attempts[i] = t.ID, int64(t.Attempt)
	}
	err := q.wrow(ctx, `INSERT INTO held_leases (owner, started, expires, task_ids, attempts) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		p.Owner, now, micros(p.LeaseUntil), idArray(ids), idArray(attempts)).Scan(&b.id)
	if err != nil {
		return nil, fmt.Errorf("record brief batch of %d tasks: %w", len(ids), mapErr(err))
	}
	if _, err := q.tx.ExecContext(ctx, `COMMIT`); err != nil {
		return nil, fmt.Errorf("commit brief batch of %d tasks: %w", len(ids), mapErr(err))
	}
	q.brief = b // committed: a rollback from here on leaves the record to release
	if _, err := q.tx.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return nil, fmt.Errorf("begin brief batch of %d tasks: %w", len(ids), mapErr(err))
	}
	if _, err := q.exec(ctx, `DELETE FROM held_leases WHERE id = ?`, b.id); err != nil {
		return nil, fmt.Errorf("delete brief batch record %d: %w", b.id, err)
	}
	return out, nil
}

// releaseBrief turns the record of a brief batch whose transaction rolled back into the written
// leases of its tasks still ready at the attempt before, until the record's expiry. If that
// fails the record stays, and expires: its tasks are reclaimed as lost attempts.
func (db *DB) releaseBrief(ctx context.Context, b *briefBatch) {
	if b == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `WITH u AS MATERIALIZED (SELECT h.owner, h.started, h.expires, t.value AS id, h.attempts ->> t.key AS attempt
			FROM held_leases h, json_each(h.task_ids) t WHERE h.id = ?1)
		UPDATE tasks SET state = 'running', attempt = tasks.attempt + 1, lease_owner = u.owner, lease_expires = u.expires, started_at = u.started
		FROM u WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state = 'ready'`, b.id); err != nil {
		return
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM held_leases WHERE id = ?`, b.id); err != nil {
		return
	}
	_ = tx.Commit()
}

// TaskGetStuck turns the tasks of the brief batches whose records expired before now, still
// ready at the attempt before the recorded one, into running tasks whose lease has expired,
// deletes the records, and lists the expired leases.
func (q *queries) TaskGetStuck(ctx context.Context, now time.Time, limit int) ([]*record.Task, error) {
	// u materialized: the update then walks the records' tasks and finds each by its id; as a
	// plain join the planner chose to index every ready task first.
	if _, err := q.exec(ctx, `WITH u AS MATERIALIZED (SELECT h.owner, h.started, t.value AS id, h.attempts ->> t.key AS attempt
			FROM held_leases h, json_each(h.task_ids) t WHERE h.expires < ?1)
		UPDATE tasks SET state = 'running', attempt = tasks.attempt + 1, lease_owner = u.owner, lease_expires = 0, started_at = u.started
		FROM u WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state = 'ready'`, micros(now)); err != nil {
		return nil, fmt.Errorf("expire brief batches: %w", err)
	}
	if _, err := q.exec(ctx, `DELETE FROM held_leases WHERE expires < ?`, micros(now)); err != nil {
		return nil, fmt.Errorf("expire brief batches: %w", err)
	}
	return q.TaskListExpired(ctx, now, limit)
}

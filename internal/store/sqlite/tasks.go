package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// The queries of tasks and their attempts (queries.go holds the rest).

const taskCols = `id, job_id, item_id, step, action, queue, state, attempt, max_attempts, run_after, lease_owner, lease_expires, error, sort_key, progress_weight, created_at, started_at, finished_at`

func scanTask(sc interface{ Scan(...any) error }) (*store.Task, error) {
	var t store.Task
	var runAfter, lease, created, started, finished int64
	if err := sc.Scan(&t.ID, &t.JobID, &t.ItemID, &t.Step, &t.Action, &t.Queue, &t.State, &t.Attempt, &t.MaxAttempts, &runAfter, &t.LeaseOwner, &lease, &t.Error, &t.SortKey, &t.ProgressWeight, &created, &started, &finished); err != nil {
		return nil, mapErr(err)
	}
	t.RunAfter, t.LeaseExpires, t.CreatedAt, t.StartedAt, t.FinishedAt = fromMicros(runAfter), fromMicros(lease), fromMicros(created), fromMicros(started), fromMicros(finished)
	return &t, nil
}

func (q *queries) TaskInsert(ctx context.Context, p store.TaskInsertParams) (bool, error) {
	state, attempt, errMsg, ended := store.TaskReady, 0, "", int64(0)
	if p.Done != nil {
		state, attempt, errMsg, ended = p.Done.State, p.Done.Attempt(), p.Done.Error, micros(p.Now)
	}
	res, err := q.exec(ctx, `INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, error, max_attempts, sort_key, progress_weight, created_at, run_after, started_at, finished_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT (item_id, step) DO NOTHING`,
		p.JobID, p.ItemID, p.Step, p.Action, p.Queue, state, attempt, errMsg, p.MaxAttempts, p.SortKey, p.ProgressWeight, micros(p.Now), ended, ended)
	if err != nil {
		return false, fmt.Errorf("insert task %q of item %d: %w", p.Step, p.ItemID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) TaskGet(ctx context.Context, id int64) (*store.Task, error) {
	t, err := scanTask(q.r.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ?`, id))
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get task %d: %w", id, err), "task", id)
	}
	return t, nil
}

// qTaskLease is the lease of up to limit ready tasks of one queue. The pick's plan is pinned to
// the ordered walk of tasks_ready (INDEXED BY: the statement fails to prepare rather than run
// another plan), which reads about as many index entries as it returns, at any backlog: a plan
// free to choose could read every ready row of the queue and sort them ("USE TEMP B-TREE FOR
// ORDER BY"), should statistics (ANALYZE, PRAGMA optimize) ever say so. run_after is written
// +run_after so that no index of it is considered. The limit is a literal (one cached statement
// per value): a bound LIMIT makes SQLite re-prepare the statement on every call, which cost a
// third of the writer's time. See docs/performance.md.
func qTaskLease(limit int) string {
	return `UPDATE tasks SET state = 'running', attempt = attempt + 1, lease_owner = ?, lease_expires = ?, started_at = ?
		WHERE id IN (SELECT id FROM tasks INDEXED BY tasks_ready WHERE state = 'ready' AND queue = ? AND +run_after <= ? ORDER BY job_id, sort_key LIMIT ` + strconv.Itoa(max(limit, 0)) + `)
		RETURNING ` + taskCols
}

func (q *queries) TaskLease(ctx context.Context, p store.TaskLeaseParams) ([]*store.Task, error) {
	st, err := q.prepared(ctx, qTaskLease(p.Limit))
	if err != nil {
		return nil, err
	}
	now := micros(p.Now)
	rows, err := st.QueryContext(ctx, p.Owner, micros(p.LeaseUntil), now, p.Queue, now)
	if err != nil {
		return nil, fmt.Errorf("lease %q: %w", p.Queue, mapErr(err))
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].JobID != out[j].JobID {
			return out[i].JobID < out[j].JobID
		}
		return out[i].SortKey < out[j].SortKey
	})
	return out, nil
}

// TaskLeaseMany is a loop: statements are in-process calls here, so one per queue costs no round
// trip.
func (q *queries) TaskLeaseMany(ctx context.Context, p store.TaskLeaseManyParams) ([]*store.Task, error) {
	var out []*store.Task
	for i, queue := range p.Queues {
		ts, err := q.TaskLease(ctx, store.TaskLeaseParams{Queue: queue, Limit: p.Limits[i], Owner: p.Owner, Now: p.Now, LeaseUntil: p.LeaseUntil})
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// taskHoldCols are the columns of a held pick (qTaskHold): taskCols but those TaskHoldMany sets
// (state, lease_owner, lease_expires, started_at). Each column read costs the driver two or
// three calls into SQLite, each taking and releasing the connection's mutex: the four saved 1.3
// µs of the pick's 6.5 per task.
const taskHoldCols = `id, job_id, item_id, step, action, queue, attempt, max_attempts, run_after, error, sort_key, progress_weight, created_at, finished_at`

// scanHeldTask reads a row of taskHoldCols, a ready task.
func scanHeldTask(sc interface{ Scan(...any) error }) (*store.Task, error) {
	t := store.Task{State: store.TaskReady}
	var runAfter, created, finished int64
	if err := sc.Scan(&t.ID, &t.JobID, &t.ItemID, &t.Step, &t.Action, &t.Queue, &t.Attempt, &t.MaxAttempts, &runAfter, &t.Error, &t.SortKey, &t.ProgressWeight, &created, &finished); err != nil {
		return nil, mapErr(err)
	}
	t.RunAfter, t.CreatedAt, t.FinishedAt = fromMicros(runAfter), fromMicros(created), fromMicros(finished)
	return &t, nil
}

// qTaskHold is qTaskLease's pick alone, for a held lease: it writes nothing.
func qTaskHold(limit int) string {
	return `SELECT ` + taskHoldCols + ` FROM tasks INDEXED BY tasks_ready WHERE state = 'ready' AND queue = ? AND +run_after <= ? ORDER BY job_id, sort_key LIMIT ` + strconv.Itoa(max(limit, 0))
}

// TaskHoldMany picks ready tasks as TaskLeaseMany does and writes nothing: the tasks come back as
// leased, in pick order, their rows still ready. SQLite has one writer, so the transaction that
// picked them holds the whole database, not just their rows: the worker commits the pick with
// its record (HeldLeaseRecord in the same transaction), then runs the tasks and finishes them
// (TaskFinishParams.Held) in a second transaction, and lets no other held batch of its own pick
// in between (see worker.runHeld). A task changed meanwhile (canceled, say) fails its held
// finish, which voids the attempt's effects.
func (q *queries) TaskHoldMany(ctx context.Context, p store.TaskLeaseManyParams) ([]*store.Task, error) {
	var out []*store.Task
	now := micros(p.Now)
	for i, queue := range p.Queues {
		ts, err := q.listTasksWith(ctx, q.w, scanHeldTask, qTaskHold(p.Limits[i]), queue, now)
		if err != nil {
			return nil, fmt.Errorf("hold tasks of %q: %w", queue, mapErr(err))
		}
		for _, t := range ts {
			t.State, t.Attempt, t.LeaseOwner, t.LeaseExpires, t.StartedAt, t.Held = store.TaskRunning, t.Attempt+1, p.Owner, p.LeaseUntil, p.Now, true
		}
		out = append(out, ts...)
	}
	return out, nil
}

// HeldLeaseRecord inserts the record of a held lease. Outside a transaction it commits at once;
// in the transaction of TaskHoldMany it commits with the pick (see TaskHoldMany).
func (q *queries) HeldLeaseRecord(ctx context.Context, p store.HeldLeaseParams) (int64, error) {
	attempts := make([]int64, len(p.Attempts))
	for i, a := range p.Attempts {
		attempts[i] = int64(a)
	}
	var id int64
	err := q.wrow(ctx, `INSERT INTO held_leases (owner, started, expires, task_ids, attempts) VALUES (?, ?, ?, ?, ?) RETURNING id`,
		p.Owner, micros(p.Started), micros(p.Until), idArray(p.TaskIDs), idArray(attempts)).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record held lease of %d tasks: %w", len(p.TaskIDs), mapErr(err))
	}
	return id, nil
}

// HeldLeaseDelete deletes a record of HeldLeaseRecord.
func (q *queries) HeldLeaseDelete(ctx context.Context, id int64) error {
	if _, err := q.exec(ctx, `DELETE FROM held_leases WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete held lease %d: %w", id, err)
	}
	return nil
}

// HeldLeaseExpire turns the tasks of the held leases that expired before now, still ready at the
// attempt before the recorded one, into running tasks whose lease has expired (TaskListExpired
// then reclaims them as lost attempts), and deletes the records.
func (q *queries) HeldLeaseExpire(ctx context.Context, now time.Time) (int64, error) {
	// u materialized: the update then walks the records' tasks and finds each by its id; as a
	// plain join the planner chose to index every ready task first.
	res, err := q.exec(ctx, `WITH u AS MATERIALIZED (SELECT h.owner, h.started, t.value AS id, h.attempts ->> t.key AS attempt
			FROM held_leases h, json_each(h.task_ids) t WHERE h.expires < ?1)
		UPDATE tasks SET state = 'running', attempt = tasks.attempt + 1, lease_owner = u.owner, lease_expires = 0, started_at = u.started
		FROM u WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state = 'ready'`, micros(now))
	if err != nil {
		return 0, fmt.Errorf("expire held leases: %w", err)
	}
	n, _ := res.RowsAffected()
	if _, err := q.exec(ctx, `DELETE FROM held_leases WHERE expires < ?`, micros(now)); err != nil {
		return 0, fmt.Errorf("expire held leases: %w", err)
	}
	return n, nil
}

func (q *queries) TaskFinish(ctx context.Context, p store.TaskFinishParams) (bool, error) {
	refund := 0
	if p.Refund {
		refund = 1
	}
	finished := micros(p.Now)
	if p.State == store.TaskReady {
		finished = 0
	}
	var res sql.Result
	var err error
	if p.Held {
		// The row is still ready at the attempt before: the finish counts the attempt and
		// writes its start.
		res, err = q.exec(ctx, `UPDATE tasks SET state = ?, error = ?, run_after = ?, attempt = attempt + 1 - ?, finished_at = ?, started_at = ?, lease_owner = '', lease_expires = 0
		WHERE id = ? AND state = 'ready' AND attempt = ? - 1`,
			p.State, p.Error, micros(p.RunAfter), refund, finished, micros(p.Started), p.ID, p.Attempt)
	} else {
		res, err = q.exec(ctx, `UPDATE tasks SET state = ?, error = ?, run_after = ?, attempt = attempt - ?, finished_at = ?, lease_owner = '', lease_expires = 0
		WHERE id = ? AND state = 'running' AND attempt = ?`,
			p.State, p.Error, micros(p.RunAfter), refund, finished, p.ID, p.Attempt)
	}
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", p.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// TaskRenewLeases renews the tasks named and the held-lease records named.
func (q *queries) TaskRenewLeases(ctx context.Context, p store.TaskRenewLeasesParams) (int64, error) {
	var n int64
	if len(p.TaskIDs) > 0 {
		res, err := q.exec(ctx, `UPDATE tasks SET lease_expires = ? WHERE id IN (SELECT value FROM json_each(?)) AND state = 'running' AND lease_owner = ?`,
			micros(p.Until), idArray(p.TaskIDs), p.Owner)
		if err != nil {
			return 0, fmt.Errorf("renew leases of %s: %w", p.Owner, err)
		}
		n, _ = res.RowsAffected()
	}
	if len(p.HeldLeaseIDs) > 0 {
		if _, err := q.exec(ctx, `UPDATE held_leases SET expires = ? WHERE id IN (SELECT value FROM json_each(?)) AND owner = ?`,
			micros(p.Until), idArray(p.HeldLeaseIDs), p.Owner); err != nil {
			return 0, fmt.Errorf("renew held leases of %s: %w", p.Owner, err)
		}
	}
	return n, nil
}

func (q *queries) TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*store.Task, error) {
	rows, err := q.w.QueryContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE state = 'running' AND lease_expires < ? ORDER BY lease_expires LIMIT ?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired tasks: %w", err)
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (q *queries) listTasks(ctx context.Context, db dbtx, query string, args ...any) ([]*store.Task, error) {
	return q.listTasksWith(ctx, db, scanTask, query, args...)
}

// listTasksWith is listTasks with the rows read by scan (scanTask, or scanHeldTask for the
// columns of taskHoldCols).
func (q *queries) listTasksWith(ctx context.Context, db dbtx, scan func(interface{ Scan(...any) error }) (*store.Task, error), query string, args ...any) ([]*store.Task, error) {
	var rows *sql.Rows
	var err error
	if db == q.w {
		rows, err = q.wquery(ctx, query, args...)
	} else {
		rows, err = db.QueryContext(ctx, query, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (q *queries) TaskListByItem(ctx context.Context, itemID int64) ([]*store.Task, error) {
	return q.listTasks(ctx, q.w, `SELECT `+taskCols+` FROM tasks WHERE item_id = ? ORDER BY id`, itemID)
}

func (q *queries) TaskListByJob(ctx context.Context, p store.TaskListParams) ([]*store.Task, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	where := []string{"job_id = ?", "id > ?"}
	args := []any{p.JobID, p.AfterID}
	if p.State != "" {
		where = append(where, "state = ?")
		args = append(args, p.State)
	}
	args = append(args, p.Limit)
	return q.listTasks(ctx, q.r, `SELECT `+taskCols+` FROM tasks WHERE `+strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`, args...)
}

func (q *queries) TaskCancelJob(ctx context.Context, p store.TaskCancelJobParams) ([]int64, error) {
	jobID, reason, now := p.JobID, p.Reason, p.Now
	if _, err := q.w.ExecContext(ctx, `UPDATE tasks SET state = 'canceled', error = ?, finished_at = ? WHERE job_id = ? AND state IN ('ready', 'parked')`, reason, micros(now), jobID); err != nil {
		return nil, fmt.Errorf("cancel tasks of job %d: %w", jobID, err)
	}
	rows, err := q.w.QueryContext(ctx, `SELECT id FROM tasks WHERE job_id = ? AND state = 'running'`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func (q *queries) TaskRetry(ctx context.Context, p store.TaskRetryParams) (bool, error) {
	to, from := "ready", "'failed', 'canceled', 'blocked'"
	if p.Blocked {
		to, from = "blocked", "'complete', 'failed', 'canceled'"
	}
	res, err := q.exec(ctx, `UPDATE tasks SET state = ?, max_attempts = CASE WHEN ? > 0 THEN ? ELSE max_attempts END, error = '', run_after = ?,
		finished_at = 0, lease_owner = '', lease_expires = 0
		WHERE id = ? AND state IN (`+from+`)`, to, p.MaxAttempts, p.MaxAttempts, micros(p.Now), p.ID)
	if err != nil {
		return false, fmt.Errorf("retry task %d: %w", p.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) TaskNextRunAfter(ctx context.Context) (time.Time, error) {
	var v sql.NullInt64
	err := q.rrow(ctx, `SELECT MIN(run_after) FROM tasks WHERE state = 'ready' AND run_after > 0`).Scan(&v)
	if err != nil {
		return time.Time{}, err
	}
	return fromMicros(v.Int64), nil
}

// TaskReadyQueues asks each queue in turn (a statement on a reader costs microseconds), as
// qTaskHold picks: through tasks_ready, run_after checked on the rows.
func (q *queries) TaskReadyQueues(ctx context.Context, queues []string, now time.Time) ([]string, error) {
	var out []string
	for _, name := range queues {
		var ready bool
		if err := q.rrow(ctx, `SELECT EXISTS (SELECT 1 FROM tasks INDEXED BY tasks_ready WHERE state = 'ready' AND queue = ? AND +run_after <= ?)`, name, micros(now)).Scan(&ready); err != nil {
			return nil, fmt.Errorf("queues with ready tasks: %w", mapErr(err))
		}
		if ready {
			out = append(out, name)
		}
	}
	return out, nil
}

func (q *queries) TaskCounts(ctx context.Context, jobID int64) ([]store.TaskCount, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT state, action, queue, count(*), COALESCE(sum(max(attempt - 1, 0)), 0) FROM tasks WHERE job_id = ?
		GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, jobID)
	if err != nil {
		return nil, fmt.Errorf("count tasks of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []store.TaskCount
	for rows.Next() {
		var c store.TaskCount
		if err := rows.Scan(&c.State, &c.Action, &c.Queue, &c.Tasks, &c.Retries); err != nil {
			return nil, fmt.Errorf("count tasks of job %d: %w", jobID, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// --- attempts

func (q *queries) AttemptInsert(ctx context.Context, p store.AttemptInsertParams) error {
	_, err := q.exec(ctx, `INSERT INTO attempts (task_id, attempt, owner, started_at, finished_at, error, stack) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.TaskID, p.Attempt, p.Owner, micros(p.StartedAt), micros(p.FinishedAt), p.Error, p.Stack)
	if err != nil {
		return fmt.Errorf("insert attempt %d of task %d: %w", p.Attempt, p.TaskID, err)
	}
	return nil
}

func (q *queries) AttemptList(ctx context.Context, taskID int64) ([]*store.Attempt, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT task_id, attempt, owner, started_at, finished_at, error, stack FROM attempts WHERE task_id = ? ORDER BY attempt`, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Attempt
	for rows.Next() {
		var a store.Attempt
		var s, f int64
		if err := rows.Scan(&a.TaskID, &a.Attempt, &a.Owner, &s, &f, &a.Error, &a.Stack); err != nil {
			return nil, err
		}
		a.StartedAt, a.FinishedAt = fromMicros(s), fromMicros(f)
		out = append(out, &a)
	}
	return out, rows.Err()
}

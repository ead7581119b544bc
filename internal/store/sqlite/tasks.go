package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The queries of tasks and their attempts (queries.go holds the rest).

const taskCols = `id, job_id, item_id, step, action, queue, state, attempt, max_attempts, run_after, lease_owner, lease_expires, error, sort_key, progress_weight, created_at, started_at, finished_at`

// taskRecordCols are taskCols and the task's last worker: what reads of a task's record return.
// A lease returns a running task, whose worker is its lease owner, and leaves it out (scanTask):
// each column read costs the driver calls into SQLite (see taskHoldCols).
const taskRecordCols = taskCols + `, last_worker`

// scanTask reads a row of taskCols; scanTaskRecord one of taskRecordCols.
func scanTask(sc interface{ Scan(...any) error }) (*record.Task, error) {
	return scanTaskRow(sc, false)
}

func scanTaskRecord(sc interface{ Scan(...any) error }) (*record.Task, error) {
	return scanTaskRow(sc, true)
}

func scanTaskRow(sc interface{ Scan(...any) error }, recorded bool) (*record.Task, error) {
	var t record.Task
	var runAfter, lease, created, started, finished int64
	dest := []any{&t.ID, &t.JobID, &t.ItemID, &t.Step, &t.Action, &t.Queue, &t.State, &t.Attempt, &t.MaxAttempts, &runAfter, &t.LeaseOwner, &lease, &t.Error, &t.SortKey, &t.ProgressWeight, &created, &started, &finished, &t.LastWorker}
	if !recorded {
		dest = dest[:len(dest)-1]
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, mapErr(err)
	}
	t.RunAfter, t.LeaseExpires, t.CreatedAt, t.StartedAt, t.FinishedAt = fromMicros(runAfter), fromMicros(lease), fromMicros(created), fromMicros(started), fromMicros(finished)
	return &t, nil
}

func (q *queries) TaskInsert(ctx context.Context, p store.TaskInsertParams) (bool, error) {
	state, attempt, errMsg, ended, worker := record.TaskReady, 0, "", int64(0), ""
	if p.Done != nil {
		state, attempt, errMsg, ended, worker = p.Done.State, p.Done.Attempt(), p.Done.Error, micros(p.Now), p.Done.Worker
	}
	res, err := q.exec(ctx, `INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, error, max_attempts, sort_key, progress_weight, created_at, run_after, started_at, finished_at, last_worker)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) ON CONFLICT (item_id, step) DO NOTHING`,
		p.JobID, p.ItemID, p.Step, p.Action, p.Queue, state, attempt, errMsg, p.MaxAttempts, p.SortKey, p.ProgressWeight, micros(p.Now), ended, ended, worker)
	if err != nil {
		return false, fmt.Errorf("insert task %q of item %d: %w", p.Step, p.ItemID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

func (q *queries) TaskGet(ctx context.Context, id int64) (*record.Task, error) {
	t, err := scanTaskRecord(q.r.QueryRowContext(ctx, `SELECT `+taskRecordCols+` FROM tasks WHERE id = ?`, id))
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

func (q *queries) TaskLease(ctx context.Context, p store.TaskLeaseParams) ([]*record.Task, error) {
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
	var out []*record.Task
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

// TaskGetAvailable holds a brief batch in a transaction (brief.go) and otherwise writes the
// leases, a statement per queue: statements are in-process calls here, so one per queue costs
// no round trip.
func (q *queries) TaskGetAvailable(ctx context.Context, p store.TaskGetAvailableParams) ([]*record.Task, error) {
	if p.Brief && q.tx != nil {
		return q.hold(ctx, p)
	}
	var out []*record.Task
	for i, queue := range p.Queues {
		ts, err := q.TaskLease(ctx, store.TaskLeaseParams{Queue: queue, Limit: p.Max[i], Owner: p.Owner, Now: p.Now, LeaseUntil: p.LeaseUntil})
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func (q *queries) TaskFinish(ctx context.Context, p store.TaskFinishParams) (bool, error) {
	refund := 0
	if p.Refund {
		refund = 1
	}
	finished := micros(p.Now)
	if p.State == record.TaskReady {
		finished = 0
	}
	var res sql.Result
	var err error
	if q.held(p) {
		// The row is still ready at the attempt before: the finish counts the attempt and
		// writes its start.
		res, err = q.exec(ctx, `UPDATE tasks SET state = ?, error = ?, run_after = ?, attempt = attempt + 1 - ?, finished_at = ?, started_at = ?, lease_owner = '', lease_expires = 0, last_worker = ?
		WHERE id = ? AND state = 'ready' AND attempt = ? - 1`,
			p.State, p.Error, micros(p.RunAfter), refund, finished, micros(p.Started), p.Worker, p.ID, p.Attempt)
	} else {
		res, err = q.exec(ctx, `UPDATE tasks SET state = ?, error = ?, run_after = ?, attempt = attempt - ?, finished_at = ?, lease_owner = '', lease_expires = 0, last_worker = ?
		WHERE id = ? AND state = 'running' AND attempt = ?`,
			p.State, p.Error, micros(p.RunAfter), refund, finished, p.Worker, p.ID, p.Attempt)
	}
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", p.ID, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// TaskRenewLeases renews the tasks named. A brief batch needs no renewal here: it holds the one
// writer while it runs, so nothing expires its record before it ends (see brief.go).
func (q *queries) TaskRenewLeases(ctx context.Context, p store.TaskRenewLeasesParams) (int64, error) {
	if len(p.TaskIDs) == 0 {
		return 0, nil
	}
	res, err := q.exec(ctx, `UPDATE tasks SET lease_expires = ? WHERE id IN (SELECT value FROM json_each(?)) AND state = 'running' AND lease_owner = ?`,
		micros(p.Until), idArray(p.TaskIDs), p.Owner)
	if err != nil {
		return 0, fmt.Errorf("renew leases of %s: %w", p.Owner, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func (q *queries) TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*record.Task, error) {
	rows, err := q.w.QueryContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE state = 'running' AND lease_expires < ? ORDER BY lease_expires LIMIT ?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("list expired tasks: %w", err)
	}
	defer rows.Close()
	var out []*record.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// listTasks lists the tasks query reads, a column list of taskRecordCols.
func (q *queries) listTasks(ctx context.Context, db dbtx, query string, args ...any) ([]*record.Task, error) {
	return q.listTasksWith(ctx, db, scanTaskRecord, query, args...)
}

// listTasksWith is listTasks with the rows read by scan (scanTask, or scanHeldTask for the
// columns of taskHoldCols).
func (q *queries) listTasksWith(ctx context.Context, db dbtx, scan func(interface{ Scan(...any) error }) (*record.Task, error), query string, args ...any) ([]*record.Task, error) {
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
	var out []*record.Task
	for rows.Next() {
		t, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func (q *queries) TaskListByItem(ctx context.Context, itemID int64) ([]*record.Task, error) {
	return q.listTasks(ctx, q.w, `SELECT `+taskRecordCols+` FROM tasks WHERE item_id = ? ORDER BY id`, itemID)
}

func (q *queries) TaskListByJob(ctx context.Context, p store.TaskListParams) ([]*record.Task, error) {
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
	return q.listTasks(ctx, q.r, `SELECT `+taskRecordCols+` FROM tasks WHERE `+strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`, args...)
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

func (q *queries) TaskCounts(ctx context.Context, jobID int64) ([]record.TaskCount, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT state, step, action, queue, count(*), COALESCE(sum(max(attempt - 1, 0)), 0) FROM tasks WHERE job_id = ?
		GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`, jobID)
	if err != nil {
		return nil, fmt.Errorf("count tasks of job %d: %w", jobID, err)
	}
	defer rows.Close()
	var out []record.TaskCount
	for rows.Next() {
		var c record.TaskCount
		if err := rows.Scan(&c.State, &c.Step, &c.Action, &c.Queue, &c.Tasks, &c.Retries); err != nil {
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

func (q *queries) AttemptList(ctx context.Context, taskID int64) ([]*record.Attempt, error) {
	rows, err := q.r.QueryContext(ctx, `SELECT task_id, attempt, owner, started_at, finished_at, error, stack FROM attempts WHERE task_id = ? ORDER BY attempt`, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*record.Attempt
	for rows.Next() {
		var a record.Attempt
		var s, f int64
		if err := rows.Scan(&a.TaskID, &a.Attempt, &a.Owner, &s, &f, &a.Error, &a.Stack); err != nil {
			return nil, err
		}
		a.StartedAt, a.FinishedAt = fromMicros(s), fromMicros(f)
		out = append(out, &a)
	}
	return out, rows.Err()
}

const qQueueStats = `SELECT queue, action, 'ready', count(*), min(max(created_at, run_after)) FROM tasks WHERE state = 'ready' AND run_after <= ?1 GROUP BY queue, action
	UNION ALL SELECT queue, action, 'running', count(*), 0 FROM tasks WHERE state = 'running' GROUP BY queue, action
	UNION ALL SELECT queue, action, 'complete', count(*), 0 FROM tasks WHERE state = 'complete' AND finished_at >= ?2 GROUP BY queue, action`

// QueueStats reads three partial indexes: ready tasks (tasks_ready), running ones
// (tasks_running) and those completed lately (tasks_finished, 020).
func (q *queries) QueueStats(ctx context.Context, p store.QueueStatsParams) ([]store.QueueStat, error) {
	rows, err := q.r.QueryContext(ctx, qQueueStats, micros(p.Now), micros(p.Since))
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", mapErr(err))
	}
	defer rows.Close()
	by := map[[2]string]*store.QueueStat{}
	var order [][2]string
	for rows.Next() {
		var queue, act, state string
		var n, oldest int64
		if err := rows.Scan(&queue, &act, &state, &n, &oldest); err != nil {
			return nil, fmt.Errorf("queue stats: %w", mapErr(err))
		}
		k := [2]string{queue, act}
		st := by[k]
		if st == nil {
			st = &store.QueueStat{Queue: queue, Action: act}
			by[k] = st
			order = append(order, k)
		}
		switch state {
		case "ready":
			st.Ready, st.OldestReady = int(n), fromMicros(oldest)
		case "running":
			st.Running = int(n)
		default:
			st.Completed = int(n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", mapErr(err))
	}
	out := make([]store.QueueStat, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	return out, nil
}

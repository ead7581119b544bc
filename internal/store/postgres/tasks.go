package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// The queries of tasks and their attempts (queries.go holds the rest).

const (
	taskCols    = `id, job_id, item_id, step, action, queue, state, attempt, max_attempts, run_after, lease_owner, lease_expires, error, sort_key, progress_weight, created_at, started_at, finished_at`
	qTaskInsert = `INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, error, max_attempts, sort_key, progress_weight, created_at, run_after, started_at, finished_at, last_worker)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0, $13, $13, $14) ON CONFLICT (item_id, step) DO NOTHING`
	// taskRecordCols are taskCols and the task's last worker: what reads of a task's record
	// return. A lease or a hold returns a running task, whose worker is its lease owner, and
	// leaves it out (scanTask).
	taskRecordCols = taskCols + `, last_worker`
	qTaskGet       = `SELECT ` + taskRecordCols + ` FROM tasks WHERE id = $1`
	// The leases pick with task_pick (migration 010): up to lims[i] ready tasks of queues[i], in
	// index order, locked FOR UPDATE SKIP LOCKED so that racing leasers take disjoint sets
	// without waiting on each other, by a plan pinned to the ordered scan of tasks_ready. The
	// update takes the picked ids as an array: joining them instead lets the generic plan (after
	// five executions of the prepared statement) hash-join against a sequential scan of tasks.
	qTaskLeaseMany = `UPDATE tasks SET state = 'running', attempt = attempt + 1, lease_owner = $4, lease_expires = $5, started_at = $2
		WHERE id = ANY (ARRAY(SELECT id FROM task_pick($1::text[], $2, $3::int[], $6::bigint[], $7::text[], $8::bigint[]))) RETURNING ` + taskCols
	qTaskFinish = `UPDATE tasks SET state = $1, error = $2, run_after = $3, attempt = attempt - $4, finished_at = $5, lease_owner = '', lease_expires = 0, last_worker = $8
		WHERE id = $6 AND state = 'running' AND attempt = $7 RETURNING queue`
	// qTaskRenew skips the rows another transaction holds: those are this process's tasks being
	// finished or released by its committer, whose locks it would otherwise wait for (and, with
	// a batch that finishes tasks in two statements, could deadlock with). A row skipped because
	// its transaction rolled back is renewed on the next round, a third of a lease later.
	qTaskRenew = `UPDATE tasks SET lease_expires = $1 WHERE id IN (
		SELECT id FROM tasks WHERE id = ANY($3) AND state = 'running' AND lease_owner = $2 FOR UPDATE SKIP LOCKED)`
	qTaskListExpired = `SELECT ` + taskCols + ` FROM tasks WHERE state = 'running' AND lease_expires < $1 ORDER BY lease_expires LIMIT $2`
	qTaskListByItem  = `SELECT ` + taskRecordCols + ` FROM tasks WHERE item_id = $1 ORDER BY id`
	// qTaskCancelReady checks the state again as it updates (a task may have been leased since
	// the subquery read it), written state || '' so that the planner does not read a partial
	// index of every ready task to intersect it with the ids (see qTaskFinishMany).
	qTaskCancelReady = `UPDATE tasks SET state = 'canceled', error = $1, finished_at = $2
		WHERE id = ANY (ARRAY(SELECT id FROM ` + jobTasks3 + ` WHERE jt.state IN ('ready', 'parked'))) AND state || '' IN ('ready', 'parked')`
	qTaskListRunning = `SELECT id FROM tasks WHERE job_id = $1 AND state = 'running' ORDER BY id`
	qTaskRetry       = `UPDATE tasks SET state = 'ready', max_attempts = CASE WHEN $1 > 0 THEN $1 ELSE max_attempts END, error = '', run_after = $2,
		finished_at = 0, lease_owner = '', lease_expires = 0
		WHERE id = $3 AND state IN ('failed', 'canceled', 'blocked') RETURNING queue`
	qTaskBlock = `UPDATE tasks SET state = 'blocked', max_attempts = CASE WHEN $1 > 0 THEN $1 ELSE max_attempts END, error = '', run_after = $2,
		finished_at = 0, lease_owner = '', lease_expires = 0
		WHERE id = $3 AND state IN ('complete', 'failed', 'canceled') RETURNING queue`
	qTaskNextRunAfter = `SELECT COALESCE(MIN(run_after), 0) FROM tasks WHERE state = 'ready' AND run_after > 0`
	// qTaskReadyQueues looks into tasks_ready as task_pick does (the queue, then run_after),
	// stopping at each queue's first due task, without locking.
	qTaskReadyQueues = `SELECT q FROM unnest($1::text[]) AS q WHERE EXISTS (SELECT 1 FROM tasks t WHERE t.state = 'ready' AND t.queue = q AND t.run_after <= $2)`
	qTaskCounts      = `SELECT state, step, action, queue, count(*), COALESCE(sum(GREATEST(attempt - 1, 0)), 0) FROM ` + jobTasks1 + ` GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`
)

// jobTasks1 and jobTasks3 are the tasks of the job $1 or $3 as a subquery jt, found through the
// job's items (items_key) and each item's tasks (tasks_item_step): there is no index of tasks by
// job (004_drop_tasks_job.up.sql). OFFSET 0 keeps conditions on jt out of the per-item lookup,
// where a condition on the state could lead the planner to a partial index of ready or running
// tasks, read whole for every item.
const (
	jobTasks1 = `(SELECT t.* FROM items i CROSS JOIN LATERAL (SELECT * FROM tasks WHERE tasks.item_id = i.id OFFSET 0) t WHERE i.job_id = $1) jt`
	jobTasks3 = `(SELECT t.* FROM items i CROSS JOIN LATERAL (SELECT * FROM tasks WHERE tasks.item_id = i.id OFFSET 0) t WHERE i.job_id = $3) jt`
)

// scanTask reads a row of taskCols; scanTaskRecord one of taskRecordCols.
func scanTask(sc scanner) (*record.Task, error) { return scanTaskRow(sc, false) }

func scanTaskRecord(sc scanner) (*record.Task, error) { return scanTaskRow(sc, true) }

func scanTaskRow(sc scanner, recorded bool) (*record.Task, error) {
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

// TaskInsert announces the new task on the schema's channel (at commit inside a transaction).
func (q *queries) TaskInsert(ctx context.Context, p store.TaskInsertParams) (bool, error) {
	state, attempt, errMsg, ended, worker := record.TaskReady, 0, "", int64(0), ""
	if p.Done != nil {
		state, attempt, errMsg, ended, worker = p.Done.State, p.Done.Attempt(), p.Done.Error, micros(p.Now), p.Done.Worker
	}
	tag, err := q.c.Exec(ctx, qTaskInsert, p.JobID, p.ItemID, p.Step, p.Action, p.Queue, state, attempt, errMsg, p.MaxAttempts, p.SortKey, p.ProgressWeight, micros(p.Now), ended, worker)
	if err != nil {
		return false, fmt.Errorf("insert task %q of item %d: %w", p.Step, p.ItemID, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	q.wrote(p.ItemID, p.Step, false)
	if p.Done != nil {
		return true, nil // nothing to wake
	}
	if err := q.ready(ctx, p.Queue); err != nil {
		return false, fmt.Errorf("insert task %q of item %d: notify: %w", p.Step, p.ItemID, mapErr(err))
	}
	return true, nil
}

func (q *queries) TaskGet(ctx context.Context, id int64) (*record.Task, error) {
	t, err := scanTaskRecord(q.c.QueryRow(ctx, qTaskGet, id))
	if err != nil {
		return nil, store.NotFound(fmt.Errorf("get task %d: %w", id, err), "task", id)
	}
	return t, nil
}

func (q *queries) TaskLease(ctx context.Context, p store.TaskLeaseParams) ([]*record.Task, error) {
	return q.lease(ctx, store.TaskGetAvailableParams{Queues: []string{p.Queue}, Max: []int{p.Limit}, Owner: p.Owner, Now: p.Now, LeaseUntil: p.LeaseUntil})
}

// TaskGetAvailable holds a brief batch's rows in a transaction (brief.go) and writes the leases
// otherwise.
func (q *queries) TaskGetAvailable(ctx context.Context, p store.TaskGetAvailableParams) ([]*record.Task, error) {
	if tc, ok := q.c.(*txConn); ok && p.Brief && len(p.Queues) > 0 {
		return q.hold(ctx, tc, p)
	}
	return q.lease(ctx, p)
}

func (q *queries) lease(ctx context.Context, p store.TaskGetAvailableParams) ([]*record.Task, error) {
	if len(p.Queues) == 0 {
		return nil, nil
	}
	limits := int32s(p.Max)
	now := micros(p.Now)
	out, err := q.pick(ctx, qTaskLeaseMany, p.Queues, limits, p.Queues, now, limits, p.Owner, micros(p.LeaseUntil))
	if err != nil {
		return nil, fmt.Errorf("lease %d queues: %w", len(p.Queues), err)
	}
	// RETURNING has no order: the queues in the order given, each in lease order.
	inPickOrder(out, p.Queues)
	return out, nil
}

// inPickOrder sorts tasks as a pick takes them: the queues in the order given, each queue's
// tasks in its index's order (job, then sort key).
func inPickOrder(tasks []*record.Task, queues []string) {
	rank := make(map[string]int, len(queues))
	for i, queue := range queues {
		if _, ok := rank[queue]; !ok {
			rank[queue] = i
		}
	}
	slices.SortStableFunc(tasks, func(a, b *record.Task) int {
		if a.Queue != b.Queue {
			return rank[a.Queue] - rank[b.Queue]
		}
		if a.JobID != b.JobID {
			return cmpInt(a.JobID, b.JobID)
		}
		return strings.Compare(a.SortKey, b.SortKey)
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// taskFinishArgs are qTaskFinish's arguments, the state as text (taskFinishSet reads it back as
// a string); taskFinishSet builds qTaskFinishMany's alike.
func taskFinishArgs(p store.TaskFinishParams) []any {
	refund := 0
	if p.Refund {
		refund = 1
	}
	finished := micros(p.Now)
	if p.State == record.TaskReady {
		finished = 0
	}
	return []any{string(p.State), p.Error, micros(p.RunAfter), refund, finished, p.ID, p.Attempt, p.Worker}
}

// TaskFinish announces a task put back to ready on the schema's channel.
func (q *queries) TaskFinish(ctx context.Context, p store.TaskFinishParams) (bool, error) {
	if q.held(p) {
		oks, err := q.taskFinishSet(ctx, []store.TaskFinishParams{p}, map[int64]int{p.ID: 0})
		if err != nil {
			return false, err
		}
		return oks[0], nil
	}
	var queue string
	err := q.c.QueryRow(ctx, qTaskFinish, taskFinishArgs(p)...).Scan(&queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", p.ID, mapErr(err))
	}
	if p.State == record.TaskReady {
		if err := q.readyAgain(ctx, queue); err != nil {
			return false, fmt.Errorf("finish task %d: notify: %w", p.ID, mapErr(err))
		}
	}
	return true, nil
}

func (q *queries) TaskRenewLeases(ctx context.Context, p store.TaskRenewLeasesParams) (int64, error) {
	var n int64
	if len(p.TaskIDs) > 0 {
		tag, err := q.c.Exec(ctx, qTaskRenew, micros(p.Until), p.Owner, p.TaskIDs)
		if err != nil {
			return 0, fmt.Errorf("renew leases of %s: %w", p.Owner, mapErr(err))
		}
		n = tag.RowsAffected()
	}
	if ids := q.db.briefs.of(p.Owner); len(ids) > 0 {
		if _, err := q.c.Exec(ctx, qHeldLeaseRenew, micros(p.Until), p.Owner, ids); err != nil {
			return 0, fmt.Errorf("renew brief batches of %s: %w", p.Owner, mapErr(err))
		}
	}
	return n, nil
}

// TaskGetStuck turns the records of brief batches that expired into expired leases (in a
// transaction, sent with the list: one round trip) and lists the expired leases.
func (q *queries) TaskGetStuck(ctx context.Context, now time.Time, limit int) ([]*record.Task, error) {
	if err := q.execLater(ctx, "expire brief batches", qHeldLeaseExpire, micros(now)); err != nil {
		return nil, err
	}
	return q.TaskListExpired(ctx, now, limit)
}

func (q *queries) TaskListExpired(ctx context.Context, now time.Time, limit int) ([]*record.Task, error) {
	rows, err := q.c.Query(ctx, qTaskListExpired, micros(now), limit)
	out, err := collect(rows, err, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list expired tasks: %w", err)
	}
	return out, nil
}

func (q *queries) TaskListByItem(ctx context.Context, itemID int64) ([]*record.Task, error) {
	rows, err := q.c.Query(ctx, qTaskListByItem, itemID)
	out, err := collect(rows, err, scanTaskRecord)
	if err != nil {
		return nil, fmt.Errorf("list tasks of item %d: %w", itemID, err)
	}
	return out, nil
}

func (q *queries) TaskListByJob(ctx context.Context, p store.TaskListParams) ([]*record.Task, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	var w where
	w.args = []any{p.JobID} // $1 of jobTasks1
	w.add("id > ?", p.AfterID)
	if p.State != "" {
		w.add("state = ?", p.State)
	}
	rows, err := q.c.Query(ctx, `SELECT `+taskRecordCols+` FROM `+jobTasks1+` WHERE `+w.String()+` ORDER BY id LIMIT `+w.next(p.Limit), w.args...)
	out, err := collect(rows, err, scanTaskRecord)
	if err != nil {
		return nil, fmt.Errorf("list tasks of job %d: %w", p.JobID, err)
	}
	return out, nil
}

func (q *queries) TaskCancelJob(ctx context.Context, p store.TaskCancelJobParams) ([]int64, error) {
	jobID, reason, now := p.JobID, p.Reason, p.Now
	if _, err := q.c.Exec(ctx, qTaskCancelReady, reason, micros(now), jobID); err != nil {
		return nil, fmt.Errorf("cancel tasks of job %d: %w", jobID, mapErr(err))
	}
	rows, err := q.c.Query(ctx, qTaskListRunning, jobID)
	ids, err := collect(rows, err, func(sc scanner) (int64, error) {
		var id int64
		return id, sc.Scan(&id)
	})
	if err != nil {
		return nil, fmt.Errorf("cancel tasks of job %d: %w", jobID, err)
	}
	return ids, nil
}

// TaskRetry announces the task's queue on the schema's channel (at commit inside a transaction).
func (q *queries) TaskRetry(ctx context.Context, p store.TaskRetryParams) (bool, error) {
	stmt := qTaskRetry
	if p.Blocked {
		stmt = qTaskBlock
	}
	var queue string
	err := q.c.QueryRow(ctx, stmt, p.MaxAttempts, micros(p.Now), p.ID).Scan(&queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("retry task %d: %w", p.ID, mapErr(err))
	}
	if p.Blocked {
		return true, nil // nothing to lease
	}
	if err := q.readyAgain(ctx, queue); err != nil {
		return false, fmt.Errorf("retry task %d: notify: %w", p.ID, mapErr(err))
	}
	return true, nil
}

func (q *queries) TaskNextRunAfter(ctx context.Context) (time.Time, error) {
	var v int64
	if err := q.c.QueryRow(ctx, qTaskNextRunAfter).Scan(&v); err != nil {
		return time.Time{}, fmt.Errorf("next run_after: %w", mapErr(err))
	}
	return fromMicros(v), nil
}

func (q *queries) TaskReadyQueues(ctx context.Context, queues []string, now time.Time) ([]string, error) {
	rows, err := q.c.Query(ctx, qTaskReadyQueues, queues, micros(now))
	out, err := collect(rows, err, func(sc scanner) (string, error) {
		var name string
		return name, sc.Scan(&name)
	})
	if err != nil {
		return nil, fmt.Errorf("queues with ready tasks: %w", err)
	}
	return out, nil
}

func (q *queries) TaskCounts(ctx context.Context, jobID int64) ([]record.TaskCount, error) {
	rows, err := q.c.Query(ctx, qTaskCounts, jobID)
	out, err := collect(rows, err, func(sc scanner) (record.TaskCount, error) {
		var c record.TaskCount
		return c, sc.Scan(&c.State, &c.Step, &c.Action, &c.Queue, &c.Tasks, &c.Retries)
	})
	if err != nil {
		return nil, fmt.Errorf("count tasks of job %d: %w", jobID, err)
	}
	return out, nil
}

// --- attempts

const (
	qAttemptInsert = `INSERT INTO attempts (task_id, attempt, owner, started_at, finished_at, error, stack) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`
	qAttemptList   = `SELECT task_id, attempt, owner, started_at, finished_at, error, stack FROM attempts WHERE task_id = $1 ORDER BY attempt`
)

func (q *queries) AttemptInsert(ctx context.Context, p store.AttemptInsertParams) error {
	if _, err := q.c.Exec(ctx, qAttemptInsert, p.TaskID, p.Attempt, p.Owner, micros(p.StartedAt), micros(p.FinishedAt), p.Error, p.Stack); err != nil {
		return fmt.Errorf("insert attempt %d of task %d: %w", p.Attempt, p.TaskID, mapErr(err))
	}
	return nil
}

func (q *queries) AttemptList(ctx context.Context, taskID int64) ([]*record.Attempt, error) {
	rows, err := q.c.Query(ctx, qAttemptList, taskID)
	out, err := collect(rows, err, func(sc scanner) (*record.Attempt, error) {
		var a record.Attempt
		var s, f int64
		if err := sc.Scan(&a.TaskID, &a.Attempt, &a.Owner, &s, &f, &a.Error, &a.Stack); err != nil {
			return nil, err
		}
		a.StartedAt, a.FinishedAt = fromMicros(s), fromMicros(f)
		return &a, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list attempts of task %d: %w", taskID, err)
	}
	return out, nil
}

const qQueueStats = `SELECT queue, action, 'ready', count(*), min(GREATEST(created_at, run_after)) FROM tasks WHERE state = 'ready' AND run_after <= $1 GROUP BY queue, action
	UNION ALL SELECT queue, action, 'running', count(*), 0 FROM tasks WHERE state = 'running' GROUP BY queue, action
	UNION ALL SELECT queue, action, 'complete', count(*), 0 FROM tasks WHERE state = 'complete' AND finished_at >= $2 GROUP BY queue, action`

// QueueStats reads three partial indexes: ready tasks (tasks_ready), running ones
// (tasks_running) and those completed lately (tasks_finished, 020).
func (q *queries) QueueStats(ctx context.Context, p store.QueueStatsParams) ([]store.QueueStat, error) {
	rows, err := q.c.Query(ctx, qQueueStats, micros(p.Now), micros(p.Since))
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

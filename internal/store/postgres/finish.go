package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Finishing a batch of tasks: the engine's commit of a batch of results.

// qTaskFinishMany is qTaskFinish for a set of distinct tasks that end alike (same state, error,
// run_after, refund, time and worker): the usual batch, every task complete, run by one process.
// The plan wanted is a nested loop over the (id, attempt) pairs with a primary key lookup for
// each, and two things keep the planner to it. The arrays are passed as ARRAY(SELECT unnest($n)) (see qItemGetMany),
// so it expects a few pairs, not the hundreds a custom plan would see and hash-join against a
// scan of tasks. And the running check is written state || ” so that it does not match
// tasks_running's predicate: the planner, which estimates a few running tasks there, read that
// whole partial index and filtered it by id, but it holds an entry for every lease since the
// last vacuum — thousands in a burndown. The attempt's worker goes into last_worker in the same
// statement: the record costs no write of its own.
const qTaskFinishMany = `UPDATE tasks SET state = $3, error = $4, run_after = $5, attempt = tasks.attempt - $6, finished_at = $7, lease_owner = '', lease_expires = 0,
	last_worker = $8
	FROM unnest(ARRAY(SELECT unnest($1::bigint[])), ARRAY(SELECT unnest($2::int[]))) AS u(id, attempt)
	WHERE tasks.id = u.id AND tasks.attempt = u.attempt AND tasks.state || '' = 'running'
	RETURNING tasks.id, tasks.queue`

// qTaskFinishHeldMany is qTaskFinishMany for the attempts of a brief batch (brief.go): the rows
// are still ready at the attempt before, and the finish counts the attempt and writes its start.
const qTaskFinishHeldMany = `UPDATE tasks SET state = $3, error = $4, run_after = $5, attempt = tasks.attempt + 1 - $6, finished_at = $7, started_at = $9, lease_owner = '', lease_expires = 0,
	last_worker = $8
	FROM unnest(ARRAY(SELECT unnest($1::bigint[])), ARRAY(SELECT unnest($2::int[]))) AS u(id, attempt)
	WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state || '' = 'ready'
	RETURNING tasks.id, tasks.queue`

// qPlanCustom and qPlanCached bracket the finishes of a batch in a transaction, so that their
// plans are made for the table as it is at each run. A prepared statement's plan is cached on its
// connection after five runs (a generic plan), made once for the table as it was then; a plan made
// while tasks was new and under ten pages (a bench's schema, a fresh database) estimates one ready
// row and scans the table with the pairs re-read for each of its rows, and kept as the table grows
// it read every ready row a thousand times: one brief batch's finish cost 2 s of CPU where 20 ms do
// (docs/performance.md). Planning each run costs about a tenth of a millisecond. qPlanCached
// puts the connection's setting back (the driver never changes it otherwise).
const (
	qPlanCustom = `SET LOCAL plan_cache_mode = force_custom_plan`
	qPlanCached = `SET LOCAL plan_cache_mode TO DEFAULT`
)

// TaskSetStateIfRunningMany finishes distinct tasks with one qTaskFinishMany per way of ending
// (usually one), sent as one pipelined batch. A batch that names a task twice, where each finish
// must see the one before, goes as one pipelined batch of single-row statements: one round trip
// too.
func (q *queries) TaskSetStateIfRunningMany(ctx context.Context, ps []store.TaskFinishParams) ([]bool, error) {
	oks := make([]bool, len(ps))
	if len(ps) == 1 && !q.held(ps[0]) {
		ok, err := q.TaskFinish(ctx, ps[0])
		oks[0] = ok
		return oks, err
	}
	at := make(map[int64]int, len(ps))
	for i, p := range ps {
		at[p.ID] = i
	}
	// A brief batch names each of its tasks once.
	if len(at) == len(ps) || q.held(ps[0]) {
		return q.taskFinishSet(ctx, ps, at)
	}
	b := &pgx.Batch{}
	for _, p := range ps {
		b.Queue(qTaskFinish, taskFinishArgs(p)...)
	}
	br := q.c.SendBatch(ctx, b)
	var queues []string
	for i := range ps {
		var queue string
		err := br.QueryRow().Scan(&queue)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			br.Close()
			return nil, fmt.Errorf("finish task %d: %w", ps[i].ID, mapErr(err))
		}
		oks[i] = true
		if ps[i].State == record.TaskReady {
			queues = append(queues, queue)
		}
	}
	if err := q.closeAndWake(ctx, br, len(ps), queues); err != nil {
		return nil, err
	}
	return oks, nil
}

// finishGroup is the tasks of a batch that end alike: the arguments of one qTaskFinishMany.
type finishGroup struct {
	args     []any // state, error, run_after, refund, finished_at, worker[, started_at]
	held     bool
	ids      []int64
	attempts []int32
}

// taskFinishSet finishes distinct tasks, grouped by how they end; at maps each task id to its
// index in ps.
func (q *queries) taskFinishSet(ctx context.Context, ps []store.TaskFinishParams, at map[int64]int) ([]bool, error) {
	type key struct {
		state, err, worker string
		runAfter, finish   int64
		refund             int
		held               bool
		started            int64
	}
	var groups []*finishGroup
	byKey := map[key]*finishGroup{}
	for _, p := range ps {
		a := taskFinishArgs(p) // state, error, run_after, refund, finished_at, id, attempt, worker
		held := q.held(p)
		k := key{a[0].(string), a[1].(string), p.Worker, a[2].(int64), a[4].(int64), a[3].(int), held, 0}
		if held {
			k.started = micros(p.Started)
		}
		g := byKey[k]
		if g == nil {
			g = &finishGroup{args: append(a[:5:5], p.Worker), held: held}
			if held {
				g.args = append(g.args, k.started)
			}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.ids = append(g.ids, p.ID)
		g.attempts = append(g.attempts, int32(p.Attempt))
	}
	b := &pgx.Batch{}
	if q.inTx {
		b.Queue(qPlanCustom)
	}
	for _, g := range groups {
		query := qTaskFinishMany
		if g.held {
			query = qTaskFinishHeldMany
		}
		b.Queue(query, append([]any{g.ids, g.attempts}, g.args...)...)
	}
	if q.inTx {
		b.Queue(qPlanCached)
	}
	br := q.c.SendBatch(ctx, b)
	if q.inTx {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("finish %d tasks: %w", len(ps), mapErr(err))
		}
	}
	oks := make([]bool, len(ps))
	var queues []string
	var id int64
	var queue string
	for range groups {
		rows, err := br.Query()
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&id, &queue}, func() error {
				i := at[id]
				oks[i] = true
				if ps[i].State == record.TaskReady && !slices.Contains(queues, queue) {
					queues = append(queues, queue)
				}
				return nil
			})
		}
		if err != nil {
			br.Close()
			return nil, fmt.Errorf("finish %d tasks: %w", len(ps), mapErr(err))
		}
	}
	if q.inTx {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("finish %d tasks: %w", len(ps), mapErr(err))
		}
	}
	if err := q.closeAndWake(ctx, br, len(ps), queues); err != nil {
		return nil, err
	}
	return oks, nil
}

// closeAndWake closes the batch of n task finishes and then announces the queues that got ready
// tasks back (after Close: outside a transaction ready sends a statement of its own).
func (q *queries) closeAndWake(ctx context.Context, br pgx.BatchResults, n int, queues []string) error {
	if err := br.Close(); err != nil {
		return fmt.Errorf("finish %d tasks: %w", n, mapErr(err))
	}
	for _, queue := range queues {
		if err := q.readyAgain(ctx, queue); err != nil {
			return fmt.Errorf("finish tasks: notify: %w", mapErr(err))
		}
	}
	return nil
}

package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Many rows go in one statement as arrays unnested server-side: one round trip and one plan
// whatever the count.
const (
	qEventInsertMany = qEventInsertNew + ` ON CONFLICT DO NOTHING`
	qTaskInsertMany  = qTaskInsertNew + ` ON CONFLICT (item_id, step) DO NOTHING`
	// qEventInsertNew and qTaskInsertNew insert rows known to be new: of items inserted in the
	// same transaction (inserted_rows.go), or marked New by the engine, which holds the item's lock and
	// knows its events and the tasks their firing makes. A row there fails the insert.
	qEventInsertNew = `INSERT INTO events (item_id, name, created_at)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[])`
	qTaskInsertNew = `INSERT INTO tasks (job_id, item_id, step, action, queue, state, attempt, error, max_attempts, sort_key, progress_weight, created_at, run_after, started_at, finished_at, last_worker)
		SELECT j, i, s, a, q, st, att, e, m, k, w, c, 0, f, f, lw
		FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::int[], $10::text[], $11::float8[], $12::bigint[], $13::bigint[], $14::text[])
			AS r(j, i, s, a, q, st, att, e, m, k, w, c, f, lw)`
)

func (q *queries) EventInsertMany(ctx context.Context, es []store.EventInsertParams) error {
	if len(es) == 0 {
		return nil
	}
	var old, fresh []store.EventInsertParams
	for _, e := range es {
		switch q.claim(e.ItemID, e.Name, true) {
		case rowOld:
			if e.New {
				fresh = append(fresh, e)
			} else {
				old = append(old, e)
			}
		case rowNew:
			fresh = append(fresh, e)
		}
	}
	if err := q.eventInsertMany(ctx, qEventInsertMany, old); err != nil {
		return err
	}
	return q.eventInsertMany(ctx, qEventInsertNew, fresh)
}

func (q *queries) eventInsertMany(ctx context.Context, query string, es []store.EventInsertParams) error {
	if len(es) == 0 {
		return nil
	}
	ids, names, at := make([]int64, len(es)), make([]string, len(es)), make([]int64, len(es))
	for i, e := range es {
		ids[i], names[i], at[i] = e.ItemID, e.Name, micros(e.Now)
	}
	return q.execLater(ctx, fmt.Sprintf("insert %d events", len(es)), query, ids, names, at)
}

func (q *queries) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) error {
	if len(ps) == 0 {
		return nil
	}
	var old, fresh []store.TaskInsertParams
	var wake []string
	for _, p := range ps {
		if p.Done == nil && !slices.Contains(wake, p.Queue) {
			wake = append(wake, p.Queue)
		}
		switch q.claim(p.ItemID, p.Step, false) {
		case rowOld:
			if p.New {
				fresh = append(fresh, p)
			} else {
				old = append(old, p)
			}
		case rowNew:
			fresh = append(fresh, p)
		}
	}
	if err := q.taskInsertMany(ctx, qTaskInsertMany, old); err != nil {
		return err
	}
	if err := q.taskInsertMany(ctx, qTaskInsertNew, fresh); err != nil {
		return err
	}
	for _, queue := range wake {
		if err := q.ready(ctx, queue); err != nil {
			return fmt.Errorf("insert %d tasks: notify: %w", len(ps), mapErr(err))
		}
	}
	return nil
}

func (q *queries) taskInsertMany(ctx context.Context, query string, ps []store.TaskInsertParams) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	jobs, items, steps, actions, queues, states := make([]int64, n), make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]record.TaskState, n)
	attempts, errs, maxes, keys, weights, created, ended := make([]int32, n), make([]string, n), make([]int32, n), make([]string, n), make([]float64, n), make([]int64, n), make([]int64, n)
	workers := make([]string, n)
	for i, p := range ps {
		jobs[i], items[i], steps[i], actions[i], queues[i] = p.JobID, p.ItemID, p.Step, p.Action, p.Queue
		states[i], maxes[i], keys[i], weights[i], created[i] = record.TaskReady, int32(p.MaxAttempts), p.SortKey, p.ProgressWeight, micros(p.Now)
		if p.Done != nil {
			states[i], attempts[i], errs[i], ended[i], workers[i] = p.Done.State, int32(p.Done.Attempt()), p.Done.Error, micros(p.Now), p.Done.Worker
		}
	}
	return q.execLater(ctx, fmt.Sprintf("insert %d tasks", n), query, jobs, items, steps, actions, queues, states, attempts, errs, maxes, keys, weights, created, ended, workers)
}

const qItemColorMany = `UPDATE items SET colored = u.c FROM unnest($1::bigint[], $2::float8[]) AS u(id, c) WHERE items.id = u.id`

// ItemColorMany, in a transaction, goes out with its next statement (execLater): a held batch's
// progress then costs no round trip of its own.
func (q *queries) ItemColorMany(ctx context.Context, ids []int64, colored []float64) error {
	if len(ids) == 0 {
		return nil
	}
	return q.execLater(ctx, fmt.Sprintf("color %d items", len(ids)), qItemColorMany, ids, colored)
}

// Set-based reads and moves: one statement for a whole batch, the ids as one array parameter.

// The ids are passed as ARRAY(SELECT unnest($n)) rather than $n itself: the planner cannot see
// into the subquery, so it estimates a handful of rows and looks them up in the index. Given the
// array itself, a custom plan (the first five executions of a statement on each connection)
// estimates hundreds of rows of a table it has no statistics for (a new schema, before any
// ANALYZE) and scans the whole table with a hashed ANY: with 20,000 items that was a scan of
// every item, dead versions included, several times per second.
const (
	qItemGetMany         = `SELECT ` + itemCols + `, text FROM items WHERE id = ANY (ARRAY(SELECT unnest($1::bigint[]))) ORDER BY id`
	qItemLockMany        = `SELECT ` + itemCols + ` FROM items WHERE id = ANY (ARRAY(SELECT unnest($1::bigint[]))) ORDER BY id FOR UPDATE`
	qItemSetManyIngested = `WITH u AS (UPDATE items SET state = $1, processed_at = CASE WHEN processed_at = 0 THEN $2 ELSE processed_at END, ingested_at = $2,
		colored = CASE WHEN $5 THEN share ELSE colored END WHERE id = ANY (ARRAY(SELECT unnest($3::bigint[]))) AND state = $4 RETURNING id),
		` + openIngested + ` SELECT count(*) FROM u`
	qItemSetManyProcessed = `WITH u AS (UPDATE items SET state = $1, processed_at = $2, colored = CASE WHEN $5 THEN share ELSE colored END
		WHERE id = ANY (ARRAY(SELECT unnest($3::bigint[]))) AND state = $4 RETURNING id),
		` + openMoved + ` SELECT count(*) FROM u`
	qTaskListByItems = `SELECT ` + taskRecordCols + ` FROM tasks WHERE item_id = ANY (ARRAY(SELECT unnest($1::bigint[]))) ORDER BY item_id, id`
)

// ItemLockMany locks the items in id order, the same order every engine uses, so two engines
// locking overlapping batches cannot deadlock on them.
func (q *queries) ItemLockMany(ctx context.Context, ids []int64) ([]*record.Item, error) {
	return q.itemsByID(ctx, "lock", qItemLockMany, ids, false)
}

func (q *queries) ItemGetMany(ctx context.Context, ids []int64) ([]*record.Item, error) {
	return q.itemsByID(ctx, "get", qItemGetMany, ids, true)
}

// itemsByID runs query, which reads items by the array of ids in $1 (with their text when
// withText); verb names the read in errors.
func (q *queries) itemsByID(ctx context.Context, verb, query string, ids []int64, withText bool) ([]*record.Item, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.c.Query(ctx, query, ids)
	out, err := collect(rows, err, func(sc scanner) (*record.Item, error) { return scanItem(sc, withText) })
	if err != nil {
		return nil, fmt.Errorf("%s items: %w", verb, err)
	}
	return out, nil
}

func (q *queries) ItemSetStateMany(ctx context.Context, p store.ItemSetStateManyParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	query := qItemSetManyProcessed
	if p.To == record.ItemIngested {
		query = qItemSetManyIngested
	}
	var n int64
	if err := q.c.QueryRow(ctx, query, p.To, micros(p.Now), p.IDs, p.From, p.ColorAll).Scan(&n); err != nil {
		return 0, fmt.Errorf("set %d items %s: %w", len(p.IDs), p.To, mapErr(err))
	}
	return n, nil
}

func (q *queries) TaskListByItems(ctx context.Context, itemIDs []int64) ([]*record.Task, error) {
	if len(itemIDs) == 0 {
		return nil, nil
	}
	rows, err := q.c.Query(ctx, qTaskListByItems, itemIDs)
	out, err := collect(rows, err, scanTaskRecord)
	if err != nil {
		return nil, fmt.Errorf("list tasks of %d items: %w", len(itemIDs), err)
	}
	return out, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// ItemListByMetadata scans the job's items in the database (items_key leads with job_id); the
// JSON types are compared as Postgres's jsonb containment does: true is not 1.
func (q *queries) ItemListByMetadata(ctx context.Context, p store.ItemMetadataParams) ([]*record.Item, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	if _, err := store.MetadataProbe(p.Key, p.Value); err != nil {
		return nil, err
	}
	rows, err := q.r.QueryContext(ctx, `SELECT `+itemCols+` FROM items WHERE job_id = ?1 AND EXISTS (
		SELECT 1 FROM json_each(items.metadata) j WHERE j.key = ?2 AND j.value = json_extract(?3, '$')
			AND (j.type IN ('true', 'false')) = (json_type(?3) IN ('true', 'false'))) AND id > ?5 ORDER BY id LIMIT ?4`,
		p.JobID, p.Key, string(p.Value), p.Limit, p.AfterID)
	if err != nil {
		return nil, fmt.Errorf("list items of job %d by metadata %q: %w", p.JobID, p.Key, err)
	}
	defer rows.Close()
	var out []*record.Item
	for rows.Next() {
		it, err := scanItem(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func (q *queries) ClaimTake(ctx context.Context, p store.ClaimTakeParams) (*store.Claim, error) {
	if _, err := q.exec(ctx, `INSERT INTO claims (key, holder, state, created_at) VALUES (?, ?, 'held', ?) ON CONFLICT (key) DO NOTHING`, p.Key, p.TaskID, micros(p.Now)); err != nil {
		return nil, fmt.Errorf("claim %q: %w", p.Key, err)
	}
	c := &store.Claim{Key: p.Key}
	var result sql.NullString
	var holderState record.TaskState
	err := q.wrow(ctx, `SELECT c.holder, c.state, c.result, COALESCE(t.state, '') FROM claims c LEFT JOIN tasks t ON t.id = c.holder WHERE c.key = ?`, p.Key).
		Scan(&c.Holder, &c.State, &result, &holderState)
	if err != nil {
		return nil, fmt.Errorf("claim %q: %w", p.Key, mapErr(err))
	}
	if result.Valid {
		c.Result = []byte(result.String)
	}
	if c.State == store.ClaimHeld && c.Holder != p.TaskID && holderState != record.TaskReady && holderState != record.TaskRunning {
		if _, err := q.exec(ctx, `UPDATE claims SET holder = ? WHERE key = ?`, p.TaskID, p.Key); err != nil {
			return nil, fmt.Errorf("claim %q: take over: %w", p.Key, err)
		}
		c.Holder = p.TaskID
	}
	return c, nil
}

func (q *queries) ClaimPark(ctx context.Context, p store.ClaimParkParams) (bool, error) {
	key, taskID, attempt, now := p.Key, p.TaskID, p.Attempt, p.Now
	res, err := q.exec(ctx, `UPDATE tasks SET state = 'parked', attempt = attempt - 1, lease_owner = '', lease_expires = 0, finished_at = ?
		WHERE id = ? AND state = 'running' AND attempt = ?`, micros(now), taskID, attempt)
	if err != nil {
		return false, fmt.Errorf("park task %d on %q: %w", taskID, key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if _, err := q.exec(ctx, `INSERT INTO claim_parked (key, task_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, key, taskID); err != nil {
		return false, fmt.Errorf("park task %d on %q: %w", taskID, key, err)
	}
	return true, nil
}

func (q *queries) ClaimFinish(ctx context.Context, p store.ClaimFinishParams) ([]string, error) {
	var key string
	var err error
	if p.Result != nil {
		err = q.wrow(ctx, `UPDATE claims SET state = 'done', result = ?, finished_at = ? WHERE holder = ? AND state = 'held' RETURNING key`, string(p.Result), micros(p.Now), p.TaskID).Scan(&key)
	} else {
		err = q.wrow(ctx, `DELETE FROM claims WHERE holder = ? AND state = 'held' RETURNING key`, p.TaskID).Scan(&key)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finish the claim of task %d: %w", p.TaskID, err)
	}
	return q.releaseParked(ctx, []string{key}, p.Now)
}

func (q *queries) ClaimReleaseJob(ctx context.Context, jobID int64, now time.Time) ([]string, error) {
	rows, err := q.wquery(ctx, `DELETE FROM claims WHERE state = 'held' AND holder IN (
		SELECT id FROM tasks WHERE job_id = ? AND state NOT IN ('running', 'ready')) RETURNING key`, jobID)
	if err != nil {
		return nil, fmt.Errorf("release the claims of job %d: %w", jobID, err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return q.releaseParked(ctx, keys, now)
}

func (q *queries) releaseParked(ctx context.Context, keys []string, now time.Time) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, key := range keys {
		rows, err := q.wquery(ctx, `UPDATE tasks SET state = 'ready', run_after = ?, finished_at = 0
			WHERE id IN (SELECT task_id FROM claim_parked WHERE key = ?) AND state = 'parked' RETURNING queue`, micros(now), key)
		if err != nil {
			return nil, fmt.Errorf("release the tasks parked on %q: %w", key, err)
		}
		for rows.Next() {
			var qu string
			if err := rows.Scan(&qu); err != nil {
				rows.Close()
				return nil, err
			}
			if !seen[qu] {
				seen[qu] = true
				out = append(out, qu)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if _, err := q.exec(ctx, `DELETE FROM claim_parked WHERE key = ?`, key); err != nil {
			return nil, fmt.Errorf("release the tasks parked on %q: %w", key, err)
		}
	}
	return out, nil
}

// LimitAcquire needs no lock: the single writer serialises it.
func (q *queries) LimitAcquire(ctx context.Context, p store.LimitAcquireParams) (store.LimitAcquireResult, error) {
	fail := func(err error) (store.LimitAcquireResult, error) {
		return store.LimitAcquireResult{}, fmt.Errorf("limit %q: %w", p.Key, err)
	}
	if _, err := q.exec(ctx, `INSERT INTO limit_keys (key) VALUES (?) ON CONFLICT DO NOTHING`, p.Key); err != nil {
		return fail(err)
	}
	var next int64
	if err := q.wrow(ctx, `SELECT next_start FROM limit_keys WHERE key = ?`, p.Key).Scan(&next); err != nil {
		return fail(mapErr(err))
	}
	now := micros(p.Now)
	if p.Interval > 0 && now < next {
		return store.LimitAcquireResult{Next: fromMicros(next)}, nil
	}
	if p.Concurrency > 0 {
		if _, err := q.exec(ctx, `DELETE FROM limit_slots WHERE key = ? AND NOT EXISTS (
			SELECT 1 FROM tasks t WHERE t.id = limit_slots.task_id AND t.state = 'running' AND t.attempt = limit_slots.attempt)`, p.Key); err != nil {
			return fail(err)
		}
		var n int
		if err := q.wrow(ctx, `SELECT count(*) FROM limit_slots WHERE key = ? AND task_id <> ?`, p.Key, p.TaskID).Scan(&n); err != nil {
			return fail(err)
		}
		if n >= p.Concurrency {
			return store.LimitAcquireResult{}, nil
		}
		if _, err := q.exec(ctx, `INSERT INTO limit_slots (key, task_id, attempt) VALUES (?, ?, ?) ON CONFLICT (key, task_id) DO UPDATE SET attempt = excluded.attempt`, p.Key, p.TaskID, p.Attempt); err != nil {
			return fail(err)
		}
	}
	if p.Interval > 0 {
		if _, err := q.exec(ctx, `UPDATE limit_keys SET next_start = ? WHERE key = ?`, now+p.Interval.Microseconds(), p.Key); err != nil {
			return fail(err)
		}
	}
	return store.LimitAcquireResult{OK: true}, nil
}

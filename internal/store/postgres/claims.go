package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

const (
	qItemListByMetadata = `SELECT ` + itemCols + ` FROM items WHERE job_id = $1 AND metadata @> $2::jsonb AND id > $3 ORDER BY id LIMIT $4`
	qClaimInsert        = `INSERT INTO claims (key, holder, state, created_at) VALUES ($1, $2, 'held', $3) ON CONFLICT (key) DO NOTHING`
	qClaimLock          = `SELECT c.holder, c.state, c.result, COALESCE(t.state, '') FROM claims c LEFT JOIN tasks t ON t.id = c.holder WHERE c.key = $1 FOR UPDATE OF c`
	qClaimTakeOver      = `UPDATE claims SET holder = $2 WHERE key = $1`
	qClaimPark          = `INSERT INTO claim_parked (key, task_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	qClaimDone          = `UPDATE claims SET state = 'done', result = $2, finished_at = $3 WHERE holder = $1 AND state = 'held' RETURNING key`
	qClaimDrop          = `DELETE FROM claims WHERE holder = $1 AND state = 'held' RETURNING key`
	qClaimDropJob       = `DELETE FROM claims c USING tasks t WHERE c.state = 'held' AND t.id = c.holder AND t.job_id = $1 AND t.state NOT IN ('running', 'ready') RETURNING c.key`
	// qClaimRelease readies the tasks parked on the keys and forgets them.
	qClaimRelease = `WITH p AS (DELETE FROM claim_parked WHERE key = ANY($1) RETURNING task_id)
		UPDATE tasks SET state = 'ready', run_after = $2, finished_at = 0 WHERE id IN (SELECT task_id FROM p) AND state = 'parked' RETURNING queue`
	qParkTask = `UPDATE tasks SET state = 'parked', attempt = attempt - 1, lease_owner = '', lease_expires = 0, finished_at = $3
		WHERE id = $1 AND state = 'running' AND attempt = $2`
	qLimitKey   = `INSERT INTO limit_keys (key) VALUES ($1) ON CONFLICT DO NOTHING`
	qLimitLock  = `SELECT next_start FROM limit_keys WHERE key = $1 FOR UPDATE`
	qLimitFree  = `DELETE FROM limit_slots s WHERE s.key = $1 AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = s.task_id AND t.state = 'running' AND t.attempt = s.attempt)`
	qLimitCount = `SELECT count(*) FROM limit_slots WHERE key = $1 AND task_id <> $2`
	qLimitSlot  = `INSERT INTO limit_slots (key, task_id, attempt) VALUES ($1, $2, $3) ON CONFLICT (key, task_id) DO UPDATE SET attempt = EXCLUDED.attempt`
	qLimitNext  = `UPDATE limit_keys SET next_start = $2 WHERE key = $1`
)

func (q *queries) ItemListByMetadata(ctx context.Context, p store.ItemMetadataParams) ([]*record.Item, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	probe, err := store.MetadataProbe(p.Key, p.Value)
	if err != nil {
		return nil, err
	}
	rows, err := q.c.Query(ctx, qItemListByMetadata, p.JobID, string(probe), p.AfterID, p.Limit)
	out, err := collect(rows, err, scanItemNoText)
	if err != nil {
		return nil, fmt.Errorf("list items of job %d by metadata %q: %w", p.JobID, p.Key, mapErr(err))
	}
	return out, nil
}

func (q *queries) ClaimTake(ctx context.Context, p store.ClaimTakeParams) (*store.Claim, error) {
	if _, err := q.c.Exec(ctx, qClaimInsert, p.Key, p.TaskID, micros(p.Now)); err != nil {
		return nil, fmt.Errorf("claim %q: %w", p.Key, mapErr(err))
	}
	c := &store.Claim{Key: p.Key}
	var result *string
	var holderState record.TaskState
	if err := q.c.QueryRow(ctx, qClaimLock, p.Key).Scan(&c.Holder, &c.State, &result, &holderState); err != nil {
		return nil, fmt.Errorf("claim %q: %w", p.Key, mapErr(err))
	}
	if result != nil {
		c.Result = []byte(*result)
	}
	if c.State == store.ClaimHeld && c.Holder != p.TaskID && holderState != record.TaskReady && holderState != record.TaskRunning {
		// Its holder will never finish it (canceled, or gone): this task takes it over.
		if _, err := q.c.Exec(ctx, qClaimTakeOver, p.Key, p.TaskID); err != nil {
			return nil, fmt.Errorf("claim %q: take over: %w", p.Key, mapErr(err))
		}
		c.Holder = p.TaskID
	}
	return c, nil
}

func (q *queries) ClaimPark(ctx context.Context, p store.ClaimParkParams) (bool, error) {
	key, taskID, attempt, now := p.Key, p.TaskID, p.Attempt, p.Now
	tag, err := q.c.Exec(ctx, qParkTask, taskID, attempt, micros(now))
	if err != nil {
		return false, fmt.Errorf("park task %d on %q: %w", taskID, key, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	if _, err := q.c.Exec(ctx, qClaimPark, key, taskID); err != nil {
		return false, fmt.Errorf("park task %d on %q: %w", taskID, key, mapErr(err))
	}
	return true, nil
}

func (q *queries) ClaimFinish(ctx context.Context, p store.ClaimFinishParams) ([]string, error) {
	var key string
	var err error
	if p.Result != nil {
		err = q.c.QueryRow(ctx, qClaimDone, p.TaskID, string(p.Result), micros(p.Now)).Scan(&key)
	} else {
		err = q.c.QueryRow(ctx, qClaimDrop, p.TaskID).Scan(&key)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // it held no claim (it had reused one)
	}
	if err != nil {
		return nil, fmt.Errorf("finish the claim of task %d: %w", p.TaskID, mapErr(err))
	}
	return q.releaseParked(ctx, []string{key}, p.Now)
}

func (q *queries) ClaimReleaseJob(ctx context.Context, jobID int64, now time.Time) ([]string, error) {
	rows, err := q.c.Query(ctx, qClaimDropJob, jobID)
	keys, err := collect(rows, err, func(sc scanner) (string, error) {
		var k string
		return k, sc.Scan(&k)
	})
	if err != nil {
		return nil, fmt.Errorf("release the claims of job %d: %w", jobID, mapErr(err))
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return q.releaseParked(ctx, keys, now)
}

// releaseParked readies the tasks parked on the keys and announces their queues.
func (q *queries) releaseParked(ctx context.Context, keys []string, now time.Time) ([]string, error) {
	rows, err := q.c.Query(ctx, qClaimRelease, keys, micros(now))
	queues, err := collect(rows, err, func(sc scanner) (string, error) {
		var s string
		return s, sc.Scan(&s)
	})
	if err != nil {
		return nil, fmt.Errorf("release the tasks parked on %q: %w", keys, mapErr(err))
	}
	var out []string
	seen := map[string]bool{}
	for _, qu := range queues {
		if !seen[qu] {
			seen[qu] = true
			out = append(out, qu)
			if err := q.readyAgain(ctx, qu); err != nil {
				return nil, fmt.Errorf("release the tasks parked on %q: notify: %w", keys, mapErr(err))
			}
		}
	}
	return out, nil
}

func (q *queries) LimitAcquire(ctx context.Context, p store.LimitAcquireParams) (store.LimitAcquireResult, error) {
	fail := func(err error) (store.LimitAcquireResult, error) {
		return store.LimitAcquireResult{}, fmt.Errorf("limit %q: %w", p.Key, mapErr(err))
	}
	if _, err := q.c.Exec(ctx, qLimitKey, p.Key); err != nil {
		return fail(err)
	}
	var next int64
	if err := q.c.QueryRow(ctx, qLimitLock, p.Key).Scan(&next); err != nil {
		return fail(err)
	}
	now := micros(p.Now)
	if p.Interval > 0 && now < next {
		return store.LimitAcquireResult{Next: fromMicros(next)}, nil
	}
	if p.Concurrency > 0 {
		if _, err := q.c.Exec(ctx, qLimitFree, p.Key); err != nil {
			return fail(err)
		}
		var n int
		if err := q.c.QueryRow(ctx, qLimitCount, p.Key, p.TaskID).Scan(&n); err != nil {
			return fail(err)
		}
		if n >= p.Concurrency {
			return store.LimitAcquireResult{}, nil
		}
		if _, err := q.c.Exec(ctx, qLimitSlot, p.Key, p.TaskID, p.Attempt); err != nil {
			return fail(err)
		}
	}
	if p.Interval > 0 {
		if _, err := q.c.Exec(ctx, qLimitNext, p.Key, now+p.Interval.Microseconds()); err != nil {
			return fail(err)
		}
	}
	return store.LimitAcquireResult{OK: true}, nil
}

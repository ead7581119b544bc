package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// A brief batch (TaskGetAvailable with Brief, in a transaction) is leased by locking its tasks'
// rows, which stay ready at the attempt before: the transaction's commit, with their finishes,
// is the batch's only write of them. If the process dies the transaction dies with it and the
// rows are ready again; a record of the batch (held_leases), committed on a connection of its
// own before any task runs, keeps those attempts counted: TaskGetStuck turns an expired record's
// tasks into expired leases. The record is deleted with the transaction's commit; when the
// transaction rolls back it becomes written leases (qBriefRelease), as the contract says.
const (
	qTaskHoldMany = `SELECT ` + taskCols + ` FROM task_pick($1::text[], $2, $3::int[], $4::bigint[], $5::text[], $6::bigint[])`
	// qHeldLeaseRecord commits asynchronously (synchronous_commit off for its own transaction):
	// it is visible at once, and on disk within Postgres's WAL writer delay or with the next
	// commit. It is there for a process that dies; if the database dies before flushing it, the
	// holding transaction died too, and an attempt lost to a database crash says nothing about
	// the input. The batch does not wait for a disk flush before it runs.
	qHeldLeaseRecord = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true))
		INSERT INTO held_leases (owner, started, expires, task_ids, attempts) SELECT $1, $2, $3, $4, $5 FROM async RETURNING id`
	qHeldLeaseDelete = `DELETE FROM held_leases WHERE id = $1`
	qHeldLeaseRenew  = `UPDATE held_leases SET expires = $1 WHERE id = ANY($3) AND owner = $2`
	// qHeldLeaseExpire turns an expired record's tasks that are still ready at the attempt
	// before into running tasks with an expired lease (lease_expires 0).
	qHeldLeaseExpire = `WITH gone AS (DELETE FROM held_leases WHERE expires < $1 RETURNING owner, started, task_ids, attempts),
		u AS (SELECT g.owner, g.started, x.id, x.attempt FROM gone g CROSS JOIN LATERAL unnest(g.task_ids, g.attempts) AS x(id, attempt))
		UPDATE tasks SET state = 'running', attempt = tasks.attempt + 1, lease_owner = u.owner, lease_expires = 0, started_at = u.started
		FROM u WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state || '' = 'ready'`
	// qBriefRelease turns the record $1 of a brief batch whose transaction rolled back into the
	// written leases of its tasks still ready at the attempt before, until the record's expiry.
	qBriefRelease = `WITH gone AS (DELETE FROM held_leases WHERE id = $1 RETURNING owner, started, expires, task_ids, attempts),
		u AS (SELECT g.owner, g.started, g.expires, x.id, x.attempt FROM gone g CROSS JOIN LATERAL unnest(g.task_ids, g.attempts) AS x(id, attempt))
		UPDATE tasks SET state = 'running', attempt = tasks.attempt + 1, lease_owner = u.owner, lease_expires = u.expires, started_at = u.started
		FROM u WHERE tasks.id = u.id AND tasks.attempt = u.attempt - 1 AND tasks.state || '' = 'ready'`
)

// briefBatch is the brief batch of one transaction.
type briefBatch struct {
	attempts map[int64]int // each task's attempt run
	done     chan struct{} // closed once the record's insert returned
	id       int64         // the record's, once done (0 if it failed)
	err      error
}

// held reports whether p finishes an attempt of the transaction's brief batch.
func (q *queries) held(p store.TaskFinishParams) bool {
	if q.brief == nil {
		return false
	}
	a, ok := q.brief.attempts[p.ID]
	return ok && a == p.Attempt
}

// hold leases a brief batch in the transaction tc (see the consts above).
func (q *queries) hold(ctx context.Context, tc *txConn, p store.TaskGetAvailableParams) ([]*record.Task, error) {
	if q.brief != nil {
		return nil, fmt.Errorf("hold tasks: the transaction holds a brief batch already")
	}
	limits := int32s(p.Max)
	out, err := q.pick(ctx, qTaskHoldMany, p.Queues, limits, p.Queues, micros(p.Now), limits)
	if err != nil {
		return nil, fmt.Errorf("hold tasks of %d queues: %w", len(p.Queues), err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	b := &briefBatch{attempts: make(map[int64]int, len(out)), done: make(chan struct{})}
	ids, attempts := make([]int64, len(out)), make([]int32, len(out))
	for i, t := range out {
		t.State, t.Attempt, t.LeaseOwner, t.LeaseExpires, t.StartedAt = record.TaskRunning, t.Attempt+1, p.Owner, p.LeaseUntil, p.Now
		b.attempts[t.ID] = t.Attempt
		ids[i], attempts[i] = t.ID, int32(t.Attempt)
	}
	q.brief = b
	// The record commits on a connection of its own while the transaction's next statement runs
	// (the caller's lock of the tasks' items): one round trip's wait instead of two. Bounded:
	// the pool could be short of connections while this transaction holds rows.
	go func() {
		defer close(b.done)
		rctx, cancel := context.WithTimeout(ctx, max(p.LeaseUntil.Sub(p.Now)/3, time.Second))
		defer cancel()
		b.err = q.db.pool.QueryRow(rctx, qHeldLeaseRecord, p.Owner, micros(p.Now), micros(p.LeaseUntil), ids, attempts).Scan(&b.id)
		if b.err == nil {
			q.db.briefs.set(b.id, p.Owner)
		}
	}()
	tc.await = func() error {
		<-b.done
		if b.err != nil {
			return fmt.Errorf("record brief batch of %d tasks: %w", len(ids), mapErr(b.err))
		}
		tc.execLater(fmt.Sprintf("delete brief batch record %d", b.id), qHeldLeaseDelete, b.id)
		return nil
	}
	return out, nil
}

// endBrief ends the transaction's brief batch once it committed or rolled back: a rolled-back
// batch's record becomes written leases.
func (q *queries) endBrief(ctx context.Context, committed bool) {
	b := q.brief
	if b == nil {
		return
	}
	<-b.done
	if b.id == 0 {
		return
	}
	if !committed {
		// If this fails the record stays, and expires: its tasks are reclaimed as lost attempts.
		_, _ = q.db.pool.Exec(context.WithoutCancel(ctx), qBriefRelease, b.id)
	}
	q.db.briefs.set(b.id, "")
}

// briefRecords are the records of this DB's brief batches in flight, by id, with their owner:
// TaskRenewLeases renews them. Safe for concurrent use.
type briefRecords struct {
	mu sync.Mutex
	m  map[int64]string
}

// set notes the record id of owner in flight, or with owner "" that it ended.
func (r *briefRecords) set(id int64, owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case owner == "":
		delete(r.m, id)
	case r.m == nil:
		r.m = map[int64]string{id: owner}
	default:
		r.m[id] = owner
	}
}

// of returns the ids of owner's records.
func (r *briefRecords) of(owner string) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []int64
	for id, o := range r.m {
		if o == owner {
			ids = append(ids, id)
		}
	}
	return ids
}

func int32s(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(max(x, 0))
	}
	return out
}

package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// Roots written ahead (ItemInsertRoots): a root added in a transaction of its own at 200
// a second spent two round trips, the items' insert (whose answer is their ids) and the commit
// (its tasks, events and job total, then COMMIT). River's insert is one. With ids reserved
// before, and the job as the caller last read it, the insert needs no answer: it goes out with
// the commit, and a statement in the same batch checks what was assumed (sluice_expect,
// migration 015): every item inserted (no key existed) and the job in the state given. When
// not, the transaction fails before its COMMIT runs, with errStale, and InTx runs it again, its
// roots then read first.

const (
	// aheadBlock is how many item ids a reservation takes, aheadLow the count below which the
	// next use reserves more (in the background: the transaction that finds too few goes the
	// ordinary way).
	aheadBlock, aheadLow = 64, 32
	// aheadFresh is how long reserved ids are used: item ids follow the order in which items
	// were created to within this (and a transaction's length), as drawn ids do.
	aheadFresh = time.Second
	// aheadStream is how close two transactions that found too few ids must come for ids to be
	// drawn: roots in a stream (200 a second: 5 ms apart), not a root now and then, whose ids
	// then stay the sequence's, in order and without gaps of unused blocks.
	aheadStream = 100 * time.Millisecond
	// expectState is the SQLSTATE sluice_expect raises.
	expectState = "SL001"
)

// errStale marks a transaction that wrote roots ahead and found, when its writes ran, that what
// it assumed no longer held: nothing of it was written.
var errStale = errors.New("postgres: roots written ahead on a stale assumption")

// idReserve holds item ids drawn from the sequence ahead of use, for one DB.
type idReserve struct {
	mu      sync.Mutex
	ids     []int64
	at      time.Time // when ids were drawn
	asked   time.Time // when a transaction last found too few
	filling bool
	wg      sync.WaitGroup
}

// take returns n reserved ids, or nil when fewer than n fresh ones are held or n is more than
// aheadLow; it starts a reservation when the reserve runs low (at most one at a time), once
// roots come in a stream.
func (r *idReserve) take(db *DB, n int, now time.Time) []int64 {
	if n > aheadLow {
		return nil // a large batch's round trip is not its cost
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.at) > aheadFresh {
		r.ids = nil
	}
	var out []int64
	if len(r.ids) >= n {
		out = r.ids[:n:n]
		r.ids = r.ids[n:]
	}
	if len(r.ids) >= aheadLow || r.filling {
		return out
	}
	// Ids are drawn for a stream of roots, not for one: only when a transaction found too few
	// within aheadStream of the one before. A single small job's roots go the ordinary way and
	// keep their ids in order from the sequence, with no block drawn and left unused.
	if out == nil {
		prev := r.asked
		r.asked = now
		if now.Sub(prev) > aheadStream {
			return nil
		}
	}
	r.filling = true
	r.wg.Add(1)
	go r.fill(db, aheadBlock)
	return out
}

const qReserveItemIDs = `SELECT nextval((SELECT pg_get_serial_sequence('items', 'id')::regclass)) FROM generate_series(1, $1)`

// fill draws n ids from the items' sequence. A reservation that fails is dropped: transactions
// go the ordinary way meanwhile.
func (r *idReserve) fill(db *DB, n int) {
	defer r.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, _ := db.pool.Query(ctx, qReserveItemIDs, n)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.filling = false
	if err != nil {
		return
	}
	if time.Since(r.at) > aheadFresh {
		r.ids = r.ids[:0]
	}
	r.ids = append(r.ids, ids...)
	r.at = time.Now()
}

// qItemInsertAhead is qItemInsertMany with the ids given, answering nothing: the statement
// after the items' insert fails the transaction unless every item went in and the job is as
// the caller assumed.
const qItemInsertAhead = `WITH r AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::int[], $7::int[], $8::text[], $9::text[], $10::text[], $11::text[],
			$12::bigint[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::float8[], $19::float8[], $20::bigint[])
			AS r(id, j, p, rt, s, o, d, k, n, ct, b, sz, md, op, tx, ts, tt, lo, len, c)),
	` + qItemInsertRows + `
	SELECT sluice_expect((SELECT count(*) FROM ins) = cardinality($1::bigint[]), 'an item''s key exists'),
		sluice_expect(EXISTS (SELECT 1 FROM jobs WHERE id = $21 AND state = $22 AND sealed = $23), 'the job changed since it was read')`

// ItemInsertRoots implements [store.Executor]: it writes the roots of a running job ahead when
// ids are reserved for them (insertAhead), else the ordinary way.
func (q *queries) ItemInsertRoots(ctx context.Context, job *record.Job, ps []store.ItemInsertParams) ([]*record.Item, bool, error) {
	if job.State == record.JobRunning && q.db.staleRoots.Load() != job.ID && q.aheadJob == 0 {
		if items, ok, err := q.insertAhead(job, ps); ok || err != nil {
			return items, ok, err
		}
	}
	items, err := q.ItemInsertMany(ctx, ps)
	return items, false, err
}

// insertAhead is ItemInsertMany for roots of the job, written ahead: it returns every item as
// inserted, and ok false (inserting nothing) when too few ids are reserved. The transaction
// assumes job is as given (its state, whether sealed) and reads nothing; when the insert runs,
// an item whose key exists, or a job not as given, fails the transaction with errStale.
func (q *queries) insertAhead(job *record.Job, ps []store.ItemInsertParams) ([]*record.Item, bool, error) {
	tc, ok := q.c.(*txConn)
	if !ok || len(ps) == 0 {
		return nil, false, nil
	}
	for _, p := range ps {
		if p.JobID != job.ID {
			return nil, false, fmt.Errorf("insert items ahead: item of job %d among job %d's", p.JobID, job.ID)
		}
	}
	ids := q.db.reserve.take(q.db, len(ps), time.Now())
	if ids == nil {
		return nil, false, nil
	}
	items := make([]*record.Item, len(ps))
	for i, p := range ps {
		items[i] = itemFromParams(ids[i], p)
	}
	args := append(append([]any{ids}, itemInsertArgs(ps)...), job.ID, job.State, job.Sealed)
	tc.execLater(fmt.Sprintf("insert %d items ahead", len(ps)), qItemInsertAhead, args...)
	q.aheadJob = job.ID
	q.addFreshItems(items)
	return items, true, nil
}

// isExpectErr reports a failure raised by sluice_expect.
func isExpectErr(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == expectState
}

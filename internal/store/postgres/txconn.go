package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txConn runs one transaction's statements on one connection with fewer round trips than
// pgx.Tx: BEGIN goes out in the same pipelined batch as the first statement, and a write whose
// result nobody reads (execLater) waits to go out in the batch of whatever the transaction
// sends next — at the latest its COMMIT. A transaction of a few statements (a lease, a result, a root added at 200 per second)
// spends most of its time in round trips, and on a busy machine each one also waits for the
// server process to be scheduled.
//
// A txConn that sent nothing holds no transaction: commit and rollback are then no-ops.
type txConn struct {
	conn  *pgx.Conn
	begun bool
	// later are the writes of execLater not yet sent, in the order they were made.
	later []laterExec
	// sends counts the batches and statements sent, so that a read sent ahead of its time can
	// tell whether anything went out after it (see queries.prefetched).
	sends int
	// await, when set, is waited for once the transaction's next statement went out, before its
	// results are read, and by the commit: what must be done before that statement returns
	// (a brief batch's record, see brief.go). Its error is that statement's.
	await func() error
}

// laterExec is a write sent with the transaction's next statement; what names it in an error.
type laterExec struct {
	q    pgx.QueuedQuery
	what string
}

var _ querier = (*txConn)(nil)

// execLater queues a write whose result is only its error, to go out before (and in one
// pipelined batch with) the next statement the transaction sends. Its error is returned by that
// statement's call, or by the commit, naming what: the transaction fails either way, as it would
// have at once, since a failed statement aborts a Postgres transaction. Nothing is sent if the
// transaction rolls back first.
func (c *txConn) execLater(what, sql string, args ...any) {
	c.later = append(c.later, laterExec{q: pgx.QueuedQuery{SQL: sql, Arguments: args}, what: what})
}

// pending reports whether a statement sent now would go out with others (BEGIN or later writes).
func (c *txConn) pending() bool { return !c.begun || len(c.later) > 0 || c.await != nil }

// awaited runs await, if set, once.
func (c *txConn) awaited() error {
	a := c.await
	if a == nil {
		return nil
	}
	c.await = nil
	return a()
}

// first sends BEGIN (if not yet sent), the queued later writes and then queued, in one batch,
// and reads the results of all but queued. The caller reads the rest and closes the batch.
func (c *txConn) first(ctx context.Context, queued []*pgx.QueuedQuery) (pgx.BatchResults, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(c.later)+len(queued))}
	if !c.begun {
		b.QueuedQueries = append(b.QueuedQueries, &pgx.QueuedQuery{SQL: "begin"})
	}
	for i := range c.later {
		b.QueuedQueries = append(b.QueuedQueries, &c.later[i].q)
	}
	b.QueuedQueries = append(b.QueuedQueries, queued...)
	c.sends++
	br := c.conn.SendBatch(ctx, b)
	if !c.begun {
		c.begun = true
		if _, err := br.Exec(); err != nil {
			br.Close()
			c.later = nil
			return nil, fmt.Errorf("begin: %w", err)
		}
	}
	later := c.later
	c.later = nil
	for _, l := range later {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("%s: %w", l.what, mapErr(err))
		}
	}
	if err := c.awaited(); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !c.pending() {
		c.sends++
		return c.conn.Exec(ctx, sql, args...)
	}
	br, err := c.first(ctx, []*pgx.QueuedQuery{{SQL: sql, Arguments: args}})
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !c.pending() {
		c.sends++
		return c.conn.Query(ctx, sql, args...)
	}
	br, err := c.first(ctx, []*pgx.QueuedQuery{{SQL: sql, Arguments: args}})
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !c.pending() {
		c.sends++
		return c.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := c.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}

func (c *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !c.pending() {
		c.sends++
		return c.conn.SendBatch(ctx, b)
	}
	br, err := c.first(ctx, b.QueuedQueries)
	if err != nil {
		return errBatch{err}
	}
	return br
}

// commit sends the later writes and COMMIT, in one batch.
func (c *txConn) commit(ctx context.Context) error {
	if !c.begun && len(c.later) == 0 {
		return nil // nothing was sent: there is no transaction
	}
	if err := c.awaited(); err != nil {
		return err
	}
	br, err := c.first(ctx, []*pgx.QueuedQuery{{SQL: "commit"}})
	if err != nil {
		return err
	}
	defer br.Close()
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() == "ROLLBACK" { // the transaction had failed: the server rolled it back
		return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return br.Close()
}

// rollback ends a begun transaction. A connection left inside a transaction by a failed
// rollback is closed by the pool on release, never reused.
func (c *txConn) rollback(ctx context.Context) {
	c.later, c.await = nil, nil
	if c.begun {
		_, _ = c.conn.Exec(ctx, "rollback")
	}
}

// batchRows are the rows of a batch's last statement; closing them closes the batch.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// batchRow is QueryRow over batchRows, with pgx's QueryRow semantics.
type batchRow struct {
	rows pgx.Rows
	err  error
}

func (r *batchRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errBatch is the BatchResults of a batch whose BEGIN failed.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return &batchRow{err: b.err} }
func (b errBatch) Close() error                     { return b.err }

func (b errBatch) Tx() pgx.Tx { return nil }

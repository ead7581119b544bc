package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// txConn runs one transaction's statements on one connection with two round trips fewer than
// pgx.Tx: BEGIN goes out in the same pipelined batch as the first statement, and COMMIT in the
// same batch as the transaction's notifications. A transaction of a few statements (a lease, a
// result, a root added at 200 per second) spends most of its time in round trips, and on a busy
// machine each one also waits for the server process to be scheduled.
//
// A txConn that sent nothing holds no transaction: commit and rollback are then no-ops.
type txConn struct {
	conn  *pgx.Conn
	begun bool
}

var _ querier = (*txConn)(nil)

// first sends BEGIN and the queued statements in one batch and reads BEGIN's result. The caller
// reads the rest and closes the batch.
func (c *txConn) first(ctx context.Context, queued []*pgx.QueuedQuery) (pgx.BatchResults, error) {
	c.begun = true
	b := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery{{SQL: "begin"}}, queued...)}
	br := c.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, fmt.Errorf("begin: %w", err)
	}
	return br, nil
}

func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.begun {
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
	if c.begun {
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
	if c.begun {
		return c.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := c.Query(ctx, sql, args...)
	return &batchRow{rows: rows, err: err}
}

func (c *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if c.begun {
		return c.conn.SendBatch(ctx, b)
	}
	br, err := c.first(ctx, b.QueuedQueries)
	if err != nil {
		return errBatch{err}
	}
	return br
}

// commit sends the notifications (pg_notify of each queue on channel) and COMMIT in one batch.
func (c *txConn) commit(ctx context.Context, channel string, notify []string) error {
	b := &pgx.Batch{}
	if len(notify) > 0 {
		b.Queue(`SELECT pg_notify($2, q) FROM unnest($1::text[]) q`, notify, channel)
	}
	if !c.begun {
		if len(notify) == 0 {
			return nil // nothing was sent: there is no transaction
		}
		_, err := c.Exec(ctx, b.QueuedQueries[0].SQL, b.QueuedQueries[0].Arguments...)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		b = &pgx.Batch{}
	}
	b.Queue("commit")
	br := c.conn.SendBatch(ctx, b)
	defer br.Close()
	if len(b.QueuedQueries) > 1 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
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

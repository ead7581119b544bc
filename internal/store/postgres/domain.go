package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-project/sluice/internal/store"
)

// DomainSQL implements store.Executor: a domain's statements on the executor's connection (in
// its transaction, if any).
func (q *queries) DomainSQL() store.DomainSQL { return domainSQL{q} }

type domainSQL struct{ q *queries }

func (d domainSQL) Dialect() store.Dialect { return store.DialectPostgres }

func (d domainSQL) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.q.c.Exec(ctx, query, args...)
	if err != nil {
		return 0, mapErr(err)
	}
	return tag.RowsAffected(), nil
}

func (d domainSQL) ExecLater(ctx context.Context, what, query string, args ...any) error {
	return d.q.execLater(ctx, what, query, args...)
}

func (d domainSQL) Query(ctx context.Context, query string, args ...any) (store.DomainRows, error) {
	rows, err := d.q.c.Query(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	return domainRows{rows}, nil
}

type domainRows struct{ pgx.Rows }

func (r domainRows) Err() error { return mapErr(r.Rows.Err()) }

// MigrateDomain implements store.Store: each migration in a transaction of its own, serialised
// across processes by an advisory lock per schema and domain.
func (db *DB) MigrateDomain(ctx context.Context, domain string, ms []store.DomainMigration) ([]int, error) {
	var done []int
	for _, m := range ms {
		applied := false
		err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, db.schema+".sluice.domain."+domain); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM domain_migrations WHERE domain = $1 AND version = $2`, domain, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO domain_migrations (domain, version, name, applied_at) VALUES ($1, $2, $3, $4)`,
				domain, m.Version, m.Name, micros(time.Now()))
			applied = err == nil
			return err
		})
		if err != nil {
			return done, fmt.Errorf("domain %s migration %d %s: %w", domain, m.Version, m.Name, mapErr(err))
		}
		if applied {
			done = append(done, m.Version)
		}
	}
	return done, nil
}
